"""A new input option is one row of the table, and nothing else (issue 31, "One typed request"):
a row added to ``models.fields.FIELDS`` set to 7 on the command line is 7 in the window's form, the
request the worker is sent, a saved session (and the window that opens it again), the saved
settings and ``export``'s RunSpec. Before, each end named its fields by hand: the value came back
as the row's default, 3, everywhere."""

from __future__ import annotations

import sys

import pytest

PROJECT = ("models", "explorer")


@pytest.fixture
def wider(monkeypatch):
    """The project imported afresh with one more row in FIELDS (everything derives from it at import)."""
    kept = [name for name in sys.modules if name.split(".")[0] in PROJECT]
    for name in kept:
        monkeypatch.delitem(sys.modules, name)
    import models.fields as fields

    row = fields.Field("new_option", "attention", "toy", "a made-up option", type=int, default=3, low=1,
                       shown=(1, 9))  # fmt: skip
    monkeypatch.setattr(fields, "FIELDS", (*fields.FIELDS, row))
    for name, value in fields.tables(fields.FIELDS).items():
        monkeypatch.setattr(fields, name, value)
    yield row
    for name in [name for name in sys.modules if name.split(".")[0] in PROJECT]:
        del sys.modules[name]  # the modules made for the wider table; the monkeypatch puts the others back


def test_a_new_row_set_to_7_reaches_the_form_the_worker_a_session_the_settings_and_export(wider, qtbot, tmp_path):
    from explorer.app import build_parser, inputs_from_args
    from explorer.files.persistence import load_inputs, open_settings, save_inputs
    from explorer.files.session_io import inputs_from_session, session_of
    from explorer.state import Inputs
    from explorer.window import MainWindow
    from models.cli.export import build_parser as export_parser
    from models.files.run_files import spec_from_args  # the wider table's, imported afresh
    from models.files.session import load_session, save_session
    from models.runspec import RunSpec

    assert Inputs().new_option == 3 and RunSpec().new_option == 3
    # The window's command line.
    inputs = inputs_from_args(build_parser().parse_args(["--sentence", "the cat sat", "--new-option", "7"]), Inputs())
    assert inputs.new_option == 7
    # export's command line and RunSpec's JSON.
    spec = spec_from_args(export_parser().parse_args(["--sentence", "a b", "--new-option", "7", "--out", "x"]))
    assert spec.new_option == 7 and RunSpec.from_json(spec.to_json()).new_option == 7
    # The request the worker is sent.
    settings = open_settings(tmp_path / "settings.ini")
    window = MainWindow(settings, inputs, persist=False)
    qtbot.addWidget(window)
    sent = []
    submit = window.worker.submit
    window.worker.submit = lambda request, **kw: sent.append(request) or submit(request, **kw)
    window.submit_now()
    assert sent[-1].new_option == 7 and window.state.requested.new_option == 7
    qtbot.waitUntil(lambda: window.state.display is not None and window.is_settled(), timeout=30_000)
    assert window.state.display.request.new_option == 7
    # A saved session, and the window's inputs when it is opened again.
    path = save_session(tmp_path / "s.zip", session_of(window.state.snapshot(), window.state.display.request))
    assert load_session(path).run.new_option == 7
    assert inputs_from_session(load_session(path)).inputs.new_option == 7
    # The saved settings.
    save_inputs(settings, window.state.inputs)
    assert load_inputs(open_settings(tmp_path / "settings.ini")).new_option == 7


def test_a_new_rows_value_outside_its_range_is_refused_by_the_window_command_line(wider):
    from explorer.app import build_parser, inputs_from_args
    from explorer.state import Inputs
    from explorer.usage import UsageError

    with pytest.raises(UsageError, match="--new-option 12 is outside what the window shows"):
        inputs_from_args(build_parser().parse_args(["--new-option", "12"]), Inputs())
