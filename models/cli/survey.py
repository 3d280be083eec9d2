"""``main.py export --all-layers``: every layer of a model (or of one block of an encoder-decoder model)."""

from __future__ import annotations

import sys

from models.files.survey_export import write_all_layers


def export_all_layers(args) -> int:
    """``main.py export --all-layers`` (from models.cli.export): InputError propagates to its one-line message."""
    from models.io.text_file import whole_model_text
    from models.pretrained import load_model

    sentence = whole_model_text(args, "--all-layers")
    model = load_model(args.model, device=args.device, step=getattr(args, "step", None))
    from models.encdec_options import encdec_options

    if options := encdec_options(model, args):  # an encoder-decoder: one block's layers
        from models.files.encdec_survey import write_block_layers

        out, man = write_block_layers(model, sentence, args.out, force=args.force, mask=args.mask,
                                      pad_positions=args.pad_positions, max_tokens=args.max_tokens,
                                      **options)  # fmt: skip
    else:
        out, man = write_all_layers(
            model, sentence, args.out, force=args.force, mask=args.mask,
            pad_positions=args.pad_positions, max_tokens=args.max_tokens,
        )  # fmt: skip
    for notice in man["notices"]:
        print(f"note: {notice}", file=sys.stderr)
    L, h = man["num_layers"], man["num_heads"]
    print(f"wrote {L} layers × {h} heads over {len(man['tokens'])} tokens to {out} "
          f"({man['device']}, {man['elapsed_ms']:.1f} ms)")  # fmt: skip
    return 0
