"""``main.py generate``: a prompt -> generated tokens, attention rows and logit lens in a folder.

Every user error becomes one ``error: ...`` line and exit status 2, with nothing written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from models.cli.export import USER_ERRORS, print_notes, printable, refused
from models.command_fields import GENERATE_ROWS
from models.config import InputError
from models.fields import OneLineParser, add_arguments, check_text
from models.generate.sampling import GenerateSettings
from models.io.atomic import check_target


def build_parser() -> argparse.ArgumentParser:
    """Every option is a row (models/command_fields.py: ``GENERATE_ROWS``; the model's from the one
    table: ``--model``, ``--step``, ``--device``, ``--max-tokens``), read by the one converter."""
    p = OneLineParser(
        prog="main.py generate",
        description="Generate with a decoder; write tokens.json, attention.npy (L,h,n,n), "
        "lens_ids.npy, lens_prob.npy (L,n) and manifest.json. An encoder predicts its prompt's mask tokens.",
    )
    return add_arguments(p, GENERATE_ROWS, required=("model", "prompt", "out"))


def settings_from_args(args: argparse.Namespace) -> GenerateSettings:
    """The generation settings of parsed options, checked by their rows (UTF-8, ranges: refused,
    never clamped) and by :meth:`GenerateSettings.validate`; InputError (one line) when not."""
    check_text(args, GENERATE_ROWS)
    return GenerateSettings.from_rows(args)


def _masked(model, args: argparse.Namespace, settings: GenerateSettings) -> int:
    """``generate`` with an encoder: predict every mask token of the prompt (models/generate/mlm.py)."""
    from models.files.generation import write_masked
    from models.generate.mlm import predict_masks

    if not settings.greedy:
        raise InputError(f"{model.name} is an encoder: it predicts its mask tokens, nothing is sampled; "
                         "remove --temperature, --top-k and --top-p")  # fmt: skip
    result = predict_masks(model, args.prompt, shown=settings.shown, max_tokens=args.max_tokens)
    out = write_masked(result, args.prompt, args.out, force=args.force)
    print_notes(result.notices)
    best = {m.position: m.top_tokens[0] for m in result.masks}
    if args.json:
        masks = [{"position": m.position, "ids": list(m.top_ids), "tokens": list(m.top_tokens),
                  "probs": list(m.top_probs)} for m in result.masks]  # fmt: skip
        print(json.dumps({"masks": masks}, ensure_ascii=False))
    else:
        print(printable(f"predicted {len(best)} masked tokens into {out}: {best}"))
    return 0


def generate_main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
        check_target(args.out, args.force)  # fail before computing anything
        from models import api
        from models.files.generation import write_generation
        from models.generate.loop import generate

        model = api.load(args.model, step=args.step, device=args.device, dtype=args.dtype).engine  # the front door's
        if getattr(model.arch, "encoder_decoder", False):  # said by name, not as a missing MLM head
            raise InputError(f"generate runs decoders (and masked-language-model encoders); {model.name} is an "
                             f"encoder-decoder model ({model.model_type}), which it cannot generate with")  # fmt: skip
        if model.default_mask != "causal":  # an encoder: its predictions at the mask tokens
            return _masked(model, args, settings)
        gen = generate(model, args.prompt, settings)
        out = write_generation(gen, args.prompt, args.out, force=args.force)
    except USER_ERRORS as exc:
        if (code := refused(exc)) is None:
            raise
        return code
    print_notes(gen.notices)
    if args.json:
        print(json.dumps({"text": gen.text, "ids": gen.ids[gen.prompt_length :], "all_ids": gen.ids,
                          "prompt_length": gen.prompt_length, "stopped": gen.stopped, "weights": gen.weights},
                         ensure_ascii=False))  # fmt: skip
    else:
        held = f"; {gen.weights}" if gen.weights else ""
        ms = sorted(gen.step_ms)[len(gen.step_ms) // 2] if gen.step_ms else 0.0
        print(printable(f"generated {gen.generated} tokens ({gen.stopped}; {ms:.1f} ms per token{held}) "
                         f"into {out}: {gen.text!r}"))  # fmt: skip
    return 0
