"""Settings that survive a restart (QSettings): the inputs (model and layer included), the window
geometry, the weights' colour scale, the export folder and the folder last opened a model from.

The inputs are stored as one JSON object so that types survive every QSettings back end; a
value that does not fit (an old version's, a hand-edited one) falls back to its default rather
than stopping the app from starting.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from PySide6.QtCore import QSettings

from .limits import MASK_CHOICES, MAX_SEED, MODEL_MASK_CHOICES, SCORE_CHOICES, TEMPERATURE_RANGE
from .state import Inputs

SETTINGS_ENV = "ATTENTION_EXPLORER_SETTINGS"  # an INI file to use instead of the user's settings
ORGANIZATION, APPLICATION = "attention-explorer", "Attention Explorer"
INPUTS_KEY, GEOMETRY_KEY, EXPORT_FOLDER_KEY = "inputs", "window/geometry", "export/folder"
MODEL_FOLDER_KEY = "models/folder"  # where "Open folder…" starts
COLOURS_KEY = "view/colours"  # the weights' colour scale: "fixed" (0 to 1) or "fit" (0 to their max)
COLOUR_CHOICES = ("auto", "fixed", "fit", "log")  # state.fit_colours: "auto", False, True, "log"


def open_settings(path: str | os.PathLike | None = None) -> QSettings:
    """An INI file when given (or named by $ATTENTION_EXPLORER_SETTINGS), else the user's settings."""
    path = path or os.environ.get(SETTINGS_ENV)
    if path:
        return QSettings(str(path), QSettings.Format.IniFormat)
    return QSettings(ORGANIZATION, APPLICATION)


def load_inputs(settings: QSettings) -> Inputs:
    try:
        data = json.loads(str(settings.value(INPUTS_KEY, "{}")))
    except (TypeError, ValueError):
        data = {}
    return inputs_from_dict(data if isinstance(data, dict) else {})


def save_inputs(settings: QSettings, inputs: Inputs) -> None:
    data = dataclasses.asdict(inputs)
    data["pad_positions"] = list(inputs.pad_positions)
    for name in TRANSIENT:  # the command line's files are for that run only
        data.pop(name, None)
    if data.get("mask") == "custom":  # its matrix came from a file: not remembered either
        data["mask"] = "none"
    settings.setValue(INPUTS_KEY, json.dumps(data, ensure_ascii=False))


TRANSIENT = ("d_out", "bias", "embeddings_file", "labels", "cross_embeddings_file", "cross_labels",
             "weights_file", "mask_file", "painted_mask", "held")  # fmt: skip


def inputs_from_dict(data: dict) -> Inputs:
    default = Inputs()
    values = {}
    for f in dataclasses.fields(Inputs):
        if f.name in data and f.name not in TRANSIENT:
            try:
                values[f.name] = _coerce(f.name, data[f.name], getattr(default, f.name))
            except (TypeError, ValueError):
                pass  # keep the default for this one field
    return dataclasses.replace(default, **values)


def _coerce(name: str, value, default):
    if name in ("d_k", "d_v"):
        return None if value is None else _positive_int(value)
    if name == "pad_positions":
        return tuple(sorted({int(p) for p in value if int(p) >= 0}))
    if name == "mask" and value not in MASK_CHOICES or name == "score" and value not in SCORE_CHOICES:
        raise ValueError(value)
    if name == "model_mask" and value not in MODEL_MASK_CHOICES:
        raise ValueError(value)
    if name == "layer":
        if isinstance(value, bool) or int(value) != value or int(value) < 0:
            raise ValueError(value)
        return int(value)  # 0-based: layer 0 is the first
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise TypeError(value)
        return value
    if isinstance(default, int):
        return _positive_int(value) if name != "seed" else min(max(0, int(value)), MAX_SEED)
    if isinstance(default, float):
        return min(max(TEMPERATURE_RANGE[0], float(value)), TEMPERATURE_RANGE[1])
    if isinstance(default, str):
        if not isinstance(value, str):
            raise TypeError(value)
        return value
    raise TypeError(name)


def _positive_int(value) -> int:
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise ValueError(value)
    return int(value)


def colours_from_choice(value: str) -> bool | str:
    """A --colours / settings word as state.fit_colours: "auto" (chosen from the data: log10 for
    long rows), False (0 to 1), True (fit to data) or "log"; anything unknown is "auto"."""
    return {"fixed": False, "fit": True, "log": "log"}.get(str(value), "auto")


def load_fit_colours(settings: QSettings) -> bool | str:
    """The person's own choice, kept once made; "auto" until then."""
    return colours_from_choice(str(settings.value(COLOURS_KEY, "auto")))


def save_fit_colours(settings: QSettings, fit: bool | str) -> None:
    word = fit if isinstance(fit, str) else COLOUR_CHOICES[2 if fit else 1]
    settings.setValue(COLOURS_KEY, word)


def export_folder(settings: QSettings) -> Path:
    return _folder(settings, EXPORT_FOLDER_KEY)


def model_folder(settings: QSettings) -> Path:
    return _folder(settings, MODEL_FOLDER_KEY)


def remember_model_folder(settings: QSettings, folder: Path) -> None:
    settings.setValue(MODEL_FOLDER_KEY, str(folder))


def _folder(settings: QSettings, key: str) -> Path:
    folder = Path(str(settings.value(key, "") or Path.home()))
    return folder if folder.is_dir() else Path.home()


def remember_export_folder(settings: QSettings, folder: Path) -> None:
    settings.setValue(EXPORT_FOLDER_KEY, str(folder))
