"""Settings that survive a restart (QSettings): the inputs (model and layer included), the window
geometry, the weights' colour scale, the export folder and the folder last opened a model from.

The inputs are stored as one JSON object so that types survive every QSettings back end. Which
inputs are saved, and how each saved value is checked, come from the option table
(models/fields.py: ``FIELDS``, through explorer/inputs.py: ``input_rows``): each value is read with
its row's ``Field.from_json`` (type, choices, range), as a RunSpec's JSON is, and must be in the row's
range the window's boxes offer (``Field.window_range``). A value that does not fit
(an old version's, a hand-edited one) falls back to its default rather than stopping the app from
starting.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from PySide6.QtCore import QSettings

from explorer.inputs import Inputs, input_rows
from models.errors import InputError

SETTINGS_ENV = "ATTENTION_EXPLORER_SETTINGS"  # an INI file to use instead of the user's settings
ORGANIZATION, APPLICATION = "attention-explorer", "Attention Explorer"
INPUTS_KEY, GEOMETRY_KEY, EXPORT_FOLDER_KEY = "inputs", "window/geometry", "export/folder"
MODEL_FOLDER_KEY = "models/folder"  # where "Open folder…" starts
COLOURS_KEY = "view/colours"  # the weights' colour scale: "fixed" (0 to 1) or "fit" (0 to their max)
COLOUR_CHOICES = ("auto", "fixed", "fit", "log")  # state.fit_colours: "auto", False, True, "log"
SAVED = {name: row for name, row in input_rows().items() if row is not None}  # input name -> its row


MAX_SETTINGS_BYTES = 1 << 20


def settings_file_problem(path: str | os.PathLike) -> str | None:
    """Why the INI file at ``path`` is not read (a FIFO would hang QSettings, a device never ends),
    or None (a regular file of a sensible size, or nothing there yet)."""
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
    settings.setValue(INPUTS_KEY, json.dumps(inputs_to_dict(inputs), ensure_ascii=False))


def inputs_to_dict(inputs: Inputs, saved: dict = SAVED) -> dict:
    """The saved inputs as JSON values, each as its row writes it (the command line's files and what
    a session brought are for that run only)."""
    data = {name: row.to_json(getattr(inputs, name)) for name, row in saved.items()}
    if data.get("mask") == "custom":  # its matrix came from a file or was painted: not remembered either
        data["mask"] = "none"
    return data


def inputs_from_dict(data: dict, problems: list[str] | None = None, saved: dict = SAVED, default=None):
    """The inputs ``data`` holds, each checked by its row (what the window's boxes can show: nothing
    is clamped to something the file does not hold); one that does not fit keeps the default
    (``default``: ``Inputs()``) and is named in ``problems``. Keys not saved (any more) are ignored."""
    default = Inputs() if default is None else default
    values = {}
    for name, row in saved.items():
        if name not in data:
            continue
        value = data[name]
        if name == "pad_positions" and isinstance(value, list):  # negative ones dropped, as before (not refused)
            value = [p for p in value if not (type(p) is int and p < 0)]
        try:  # None only where the input's default is None (d_k, d_v: "auto")
            values[name] = None if value is None and getattr(default, name) is None else \
                row.check_range(row.from_json(value), window=True)  # fmt: skip
        except InputError:  # keep the default for this one field
            if problems is not None:
                problems.append(f"{name} {_short(value)}")
    return dataclasses.replace(default, **values)


def _short(value) -> str:
    text = json.dumps(value) if isinstance(value, str | int | float | bool | None) else repr(value)
    return text if len(text) <= 30 else text[:29] + "…"


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


def available_inputs(inputs: Inputs) -> tuple[Inputs, str]:
    """``inputs``, or the toy engine with a notice when their model has gone (a deleted folder,
    an emptied cache) since it was saved."""
    if not inputs.uses_model:
        return inputs, ""
    from models.pretrained import resolve_model

    try:
        resolve_model(inputs.model)
    except InputError:
        return dataclasses.replace(inputs, model="", pad_positions=()), \
            f"the model {inputs.model} is no longer there: showing the toy model"  # fmt: skip
    return inputs, ""
