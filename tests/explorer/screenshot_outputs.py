"""Every screenshot the window's command line writes, as the hostile-case tests run it: one list.

``SCREENSHOT_OUTPUTS``: the main window's, each ``--view`` (the code's own list) and each window a
screenshot saves alone (the parser's options). ``screenshot_argv(name, inputs)`` is its command line
(without ``--screenshot``) from ``inputs``: ``toy`` (arguments giving the toy its input), ``model``
(the model views'), ``steps`` (a model with training steps), ``decoder`` (Generate's), ``atlas``
(a folder) and ``attention`` (a file). The same line with hostile inputs is the hostile case."""

from __future__ import annotations

from explorer.files.view_shots import VIEWS

MODEL_VIEWS = ("model", "metrics", "rollout")  # the whole-model views: a pretrained model's survey
WINDOWS = ("timeline", "generate", "atlas", "attention")  # the windows a screenshot saves alone
SCREENSHOT_OUTPUTS = ("screenshot", *(f"view {v}" for v in VIEWS), *(f"window {w}" for w in WINDOWS))


def screenshot_argv(name: str, inputs: dict) -> list[str]:
    kind, _, which = name.partition(" ")
    if kind == "screenshot":
        return list(inputs["toy"])
    if kind == "view":
        source = ["--model", str(inputs["model"]), "--sentence", "The cat sat on the mat."]
        extra = ["--mask", "custom"] if which == "mask" else []
        return [*(source if which in MODEL_VIEWS else inputs["toy"]), *extra, "--view", which]
    return {
        "timeline": ["--model", str(inputs["steps"]), "--sentence", "abcdabcd", "--timeline"],
        "generate": ["--generate", "the cat", "--model", str(inputs["decoder"]), "--new-tokens", "2"],
        "atlas": ["--atlas", str(inputs["atlas"])],
        "attention": ["--attention", str(inputs["attention"])],
    }[which]
