"""What ``make screenshots`` needs besides the shipped models, made from nothing but this repository:

    python docs/screenshot_models.py models OUT       random T5, gpt-oss and ModernBERT folders in OUT
                                                      (the tests' own builders; needs transformers), and
                                                      gpt-oss-long: 131,072 positions, a window of 2,048,
                                                      learned sinks, with text.txt of 32,768 words
    python docs/screenshot_models.py scatter ATLAS OUT.png      the atlas window's scatter tab
    python docs/screenshot_models.py weighted OUT.png ARGS...   --view model on weighted norms

Each PNG is made by the app's own screenshot code, as every other image in docs/.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "models")]


def models(out: Path) -> None:
    import encdec_refs
    import test_pretrained_families_2 as families

    out.mkdir(parents=True, exist_ok=True)
    for name, build in (("t5", lambda f: encdec_refs.build(f, "t5")),
                        ("gpt-oss", lambda f: families.build(f, "gpt_oss-sinks-moe")),
                        ("modernbert", lambda f: families.build(f, "modernbert-local-global"))):  # fmt: skip
        folder = out / name
        folder.mkdir(exist_ok=True)
        build(folder)
        print(f"wrote {folder}")
    long_gpt_oss(out / "gpt-oss-long")
    print(f"wrote {out / 'gpt-oss-long'}")


def long_gpt_oss(folder: Path, words: int = 32768) -> None:
    """A random gpt-oss whose positions reach 131,072 (layer 0: a sliding window of 2,048; sinks 1.5 and
    −0.5), a word tokenizer, and ``text.txt``: ``words`` words (issue 34's long structure)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(50)}}
    config = transformers.GptOssConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_local_experts=2,
                                       num_experts_per_tok=1, sliding_window=2048, max_position_embeddings=131072,
                                       layer_types=["sliding_attention", "full_attention"],
                                       initializer_range=0.08)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("sinks"):
                p.copy_(torch.tensor([1.5, -0.5]))
    model.save_pretrained(folder)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "text.txt").write_text(" ".join(f"w{(i * 7919) % 50}" for i in range(words)), encoding="utf-8")


def scatter(atlas: str, png: str) -> int:
    from PySide6.QtWidgets import QApplication

    from explorer.panels.atlas_extras import atlas_screenshot

    _app = QApplication.instance() or QApplication([])
    return atlas_screenshot(atlas, png, scatter=True)


def weighted(png: str, argv: list[str]) -> int:
    """``--view model`` with the survey's "Show: weighted norms" chosen, as a person would."""
    import explorer.files.view_shots as view_shots
    from explorer.app import run_app

    plain = view_shots.survey_tab

    def weighted_tab(panel, view):
        panel.measure_combo.setCurrentText("weighted norms")  # computes again; the shot waits for it
        plain(panel, view)

    view_shots.survey_tab = weighted_tab
    return run_app([*argv, "--view", "model", "--screenshot", png])


if __name__ == "__main__":
    what, *rest = sys.argv[1:]
    if what == "models":
        models(Path(rest[0]))
    elif what == "scatter":
        sys.exit(scatter(rest[0], rest[1]))
    else:
        sys.exit(weighted(rest[0], rest[1:]))
