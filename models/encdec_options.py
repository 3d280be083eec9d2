"""The command line's options for encoder-decoder models (``--cross-sentence``, ``--block``).

With an encoder-decoder ``--model``, ``--sentence`` is the source (the encoder's input) and
``--cross-sentence`` the target (the decoder's); ``--block encoder|decoder|cross`` picks the
attention (default cross). With any other model both options are refused by name.
"""

from __future__ import annotations

import argparse

from models.config import InputError
from models.pretrained.encdec import DEFAULT_BLOCK


def is_encoder_decoder(model) -> bool:
    return bool(getattr(model, "encoder_decoder", False))


def encdec_options(model, args: argparse.Namespace) -> dict:
    """The keyword arguments ``model.trace`` / ``layer_weights`` take for these options."""
    cross, block = getattr(args, "cross_sentence", None), getattr(args, "block", None)
    if is_encoder_decoder(model):
        if cross is None:
            raise InputError(f"{model.name} is an encoder-decoder model ({model.model_type}): give the target "
                             "sentence with --cross-sentence; --sentence is the source")  # fmt: skip
        return {"cross_sentence": cross, "block": block or DEFAULT_BLOCK}
    given = [o for o, v in (("--cross-sentence", cross), ("--block", block)) if v is not None]
    if given:
        raise InputError(f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to encoder-decoder "
                         f"models (t5, mt5, bart, marian); {model.name} is a {model.model_type} model")  # fmt: skip
    return {}
