"""Settings that survive a restart (QSettings): the inputs (model and layer included), the window
geometry, the weights' colour scale, the export folder and the folder last opened a model from.

The inputs are stored as one JSON object so that types survive every QSettings back end; a
value that does not fit (an old version's, a hand-edited one) falls back to its default rather
than stopping the app from starting.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

from PySide6.QtCore import QSettings

from explorer.limits import (
    MASK_CHOICES,
    MAX_D_MODEL,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_LAYER,
    MAX_SEED,
    MODEL_MASK_CHOICES,
    SCORE_CHOICES,
    TEMPERATURE_RANGE,
)
from explorer.state import Inputs

SETTINGS_ENV = "ATTENTION_EXPLORER_SETTINGS"  # an INI file to use instead of the user's settings
ORGANIZATION, APPLICATION = "attention-explorer", "Attention Explorer"
INPUTS_KEY, GEOMETRY_KEY, EXPORT_FOLDER_KEY = "inputs", "window/geometry", "export/folder"
MODEL_FOLDER_KEY = "models/folder"  # where "Open folder…" starts
COLOURS_KEY = "view/colours"  # the weights' colour scale: "fixed" (0 to 1) or "fit" (0 to their max)
COLOUR_CHOICES = ("auto", "fixed", "fit", "log")  # state.fit_colours: "auto", False, True, "log"


MAX_SETTINGS_BYTES = 1 << 20


def settings_file_problem(path: str | os.PathLike) -> str | None:
    """Why the INI file at ``path`` is not read (a FIFO would hang QSettings, a device never ends),
    or None (a regular file of a sensible size, or nothing there yet)."""
    from models.config import InputError
    from models.io import check_regular

    if not os.path.lexists(path):
        return None
    try:
        size = check_regular(path, "settings file").st_size
    except InputError as exc:
        return str(exc)
    if size > MAX_SETTINGS_BYTES:
        return f"settings file {path} is too large ({size:,} bytes)"
    return None


def open_settings(path: str | os.PathLike | None = None, problems: list[str] | None = None) -> QSettings:
    """An INI file when given (or named by $ATTENTION_EXPLORER_SETTINGS), else the user's settings.
    A path that is not a regular file is not opened: the defaults are used (in a temporary file),
    and why is added to ``problems``."""
    path = path or os.environ.get(SETTINGS_ENV)
    if path:
        problem = settings_file_problem(path)
        if problem is not None:
            import tempfile

            if problems is not None:
                problems.append(f"{problem}; using the defaults")
            folder = tempfile.mkdtemp(prefix="attention-explorer-settings-")
            return QSettings(os.path.join(folder, "settings.ini"), QSettings.Format.IniFormat)
        return QSettings(str(path), QSettings.Format.IniFormat)
    return QSettings(ORGANIZATION, APPLICATION)


def load_inputs(settings: QSettings) -> Inputs:
    return read_inputs(settings)[0]


def settings_inputs(settings: QSettings, problems: list[str]) -> Inputs:
    """:func:`read_inputs`, its problems added to ``problems`` as one line naming the file."""
    inputs, bad = read_inputs(settings)
    if bad:
        problems.append(f"settings file {settings.fileName()}: {', '.join(bad)} cannot be used; using the "
                        f"defaults for them")  # fmt: skip
    return inputs


def read_inputs(settings: QSettings) -> tuple[Inputs, list[str]]:
    """The saved inputs, and one line per value that could not be used (each replaced by its
    default): an app whose settings file holds ``inf`` or 10**30 heads still starts."""
    try:
        data = json.loads(str(settings.value(INPUTS_KEY, "{}")))
    except (TypeError, ValueError, RecursionError):
        return Inputs(), ["the saved inputs are not readable JSON"]
    if not isinstance(data, dict):
        return Inputs(), ["the saved inputs are not a JSON object"]
    problems: list[str] = []
    return inputs_from_dict(data, problems), problems


def save_inputs(settings: QSettings, inputs: Inputs) -> None:
    data = dataclasses.asdict(inputs)
    data["pad_positions"] = list(inputs.pad_positions)
    for name in TRANSIENT:  # the command line's files are for that run only
        data.pop(name, None)
    if data.get("mask") == "custom":  # its matrix came from a file: not remembered either
        data["mask"] = "none"
    settings.setValue(INPUTS_KEY, json.dumps(data, ensure_ascii=False))


TRANSIENT = ("d_out", "bias", "embeddings_file", "labels", "cross_embeddings_file", "cross_labels",
             "weights_file", "mask_file", "painted_mask", "held", "exact")  # fmt: skip


def inputs_from_dict(data: dict, problems: list[str] | None = None) -> Inputs:
    default = Inputs()
    values = {}
    for f in dataclasses.fields(Inputs):
        if f.name in data and f.name not in TRANSIENT:
            try:
                values[f.name] = _coerce(f.name, data[f.name], getattr(default, f.name))
            except (TypeError, ValueError, OverflowError):  # int(inf), int(nan), 10**30 > the range
                if problems is not None:  # keep the default for this one field
                    problems.append(f"{f.name} {_short(data[f.name])}")
    return dataclasses.replace(default, **values)


def _short(value) -> str:
    text = json.dumps(value) if isinstance(value, str | int | float | bool | None) else repr(value)
    return text if len(text) <= 30 else text[:29] + "…"


_RANGES = {"heads": (1, MAX_HEADS), "d_model": (1, MAX_D_MODEL), "d_k": (1, MAX_HEAD_DIM), "d_v": (1, MAX_HEAD_DIM),
           "seed": (0, MAX_SEED), "layer": (0, MAX_LAYER), "temperature": TEMPERATURE_RANGE}  # fmt: skip


def _in_range(name: str, value):
    """``value`` when the window's control can show it; else ValueError (the default is used:
    never clamped to something else the user did not choose)."""
    low, high = _RANGES.get(name, (None, None))
    if low is not None and value is not None and not low <= value <= high:
        raise ValueError(value)
    return value


def _coerce(name: str, value, default):
    return _in_range(name, _convert(name, value, default))


def _convert(name: str, value, default):
    if name in ("d_k", "d_v"):
        return None if value is None else _positive_int(value)
    if name == "pad_positions":
        return tuple(sorted({int(p) for p in value if int(p) >= 0}))
    if name == "mask" and value not in MASK_CHOICES or name == "score" and value not in SCORE_CHOICES:
        raise ValueError(value)
    if name == "model_mask" and value not in MODEL_MASK_CHOICES:
        raise ValueError(value)
    if name == "block" and value not in ("encoder", "decoder", "cross"):  # an encoder-decoder's attention
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
        if name == "seed" and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(value)
        return _positive_int(value) if name != "seed" else value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(value)
        return float(value)
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
