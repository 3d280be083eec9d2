"""The session state is Qt-free data with one event per field: it runs, and is tested, without Qt."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
from explorer.run import DisplayTrace
from explorer.state import ALL_HEADS, ExplorerState, Inputs
from models.api import Trace
from models.engine.pipeline import run
from models.run_engine import toy_request

state = ExplorerState(Inputs(sentence="one two three", heads=2, d_model=8))
events = []
state.inputs_changed.connect(lambda inputs: events.append(("inputs", inputs.mask)))
state.stage_changed.connect(lambda name: events.append(("stage", name)))
state.trace_changed.connect(lambda display: events.append(("trace", display.generation)))
state.update_inputs(mask="causal")
request = state.request()
state.show_trace(DisplayTrace(1, Trace(run(toy_request(request)), request, lambda: None)))
state.step(-1)
state.set_head(1)
assert events == [("inputs", "causal"), ("trace", 1), ("stage", "masked")], events
assert state.display.request is request and state.head == 1 and state.focus_head == 1
assert not any(name.startswith(("PySide6", "pyqtgraph", "superqt")) for name in sys.modules)
print("ok")
"""


def test_the_state_works_without_qt_loaded():
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_state_and_its_requests_import_neither_qt_nor_torch():
    # The window's state is data: building it, editing it and asking for its request needs no
    # engine (PretrainedRequest lived beside the runner and pulled torch in with the state).
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from explorer.state import ExplorerState, Inputs\n"
        "state = ExplorerState(Inputs(sentence='one two', model='minilm', layer=1))\n"
        "request = state.request()\n"
        "assert request.layer == 1 and request.model == 'minilm', request\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'PySide6', 'pyqtgraph', 'superqt')]\n"
        "assert not bad, bad[:5]\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


def test_edits_pins_notices_and_sessions_work_without_qt_or_torch_loaded():
    # What moved into the state from the window's Qt objects (the edits and their undo steps, the
    # Difference checkbox, the pinned run, the notices, a session's rollback) needs neither.
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from types import SimpleNamespace\n"
        "from explorer.run import DisplayTrace\n"
        "from explorer.state import ExplorerState, Inputs\n"
        "from explorer.files.session_io import session_of\n"
        "class Cell:\n"
        "    def __init__(self, stage, cell, value): self.stage, self.cell, self.value = stage, cell, value\n"
        "state = ExplorerState(Inputs(sentence='one two', heads=2, d_model=8))\n"
        "events = []\n"
        "for name in ('edits_changed', 'difference_changed', 'pinned_changed', 'notices_changed'):\n"
        "    getattr(state, name).connect(lambda *a, name=name: events.append(name))\n"
        "state.add_edits([Cell('q', (0, 0, 0), 1.0)]); state.undo(); state.redo(); state.set_difference(True)\n"
        "before = state.snapshot()\n"
        "state.update_inputs(sentence='three four')  # clears the edits, with a notice\n"
        "state.pin(DisplayTrace(1, SimpleNamespace(raw=None, spec=state.request(), params=None)))\n"
        "state.apply(before)\n"
        "assert state.snapshot() == before and state.pinned is None and state.request().difference\n"
        "assert session_of(before).run.edits == before.edits\n"
        "assert events == ['edits_changed'] * 3 + ['difference_changed', 'notices_changed', 'edits_changed',\n"
        "                  'pinned_changed', 'edits_changed', 'pinned_changed'], events\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'PySide6', 'pyqtgraph', 'superqt')]\n"
        "assert not bad, bad[:5]\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr


SHOWN_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
from explorer.run import DisplayTrace
from explorer.state import ExplorerState, Inputs
from models.api import Trace
from models.engine.pipeline import run
from models.run_engine import toy_request

state = ExplorerState(Inputs(sentence="one two three", heads=2, d_model=8))
events = []
state.stepper.shown_changed.connect(events.append)
assert state.stepper.shown is None and state.stepper.stage is None and state.stepper.generation == 0
request = state.request()
state.show_trace(DisplayTrace(1, Trace(run(toy_request(request)), request, lambda: None)))
state.set_stage("q")  # asked for, not yet drawn: the shown stage lags until the view has set its images
assert events == [] and state.stepper.stage is None
q = state.display.trace["q"]
assert state.stepper.set_shown(1, q) and not state.stepper.set_shown(1, q)  # drawn again: no change
assert events == [(1, q)] and state.stepper.stage is q and state.stepper.generation == 1
weights = state.display.trace["weights"]
state.stepper.set_shown(2, weights)
assert [e.stage.name for e in events] == ["q", "weights"] and events[-1].generation == 2
try:
    state.stepper.shown = None  # only set_shown changes it (one event each time)
except AttributeError:
    pass
else:
    raise AssertionError("the shown stage was set without its event")
assert not any(name.startswith(("PySide6", "pyqtgraph", "superqt")) for name in sys.modules)
print("ok")
"""


def test_the_shown_stage_lives_in_the_state_and_changes_with_one_event():
    # The stage whose images are on screen (a step behind state.stage_name while they are built) is
    # the stepper pane's view state: set by the matrix view through set_shown, read by everyone else.
    done = subprocess.run([sys.executable, "-c", SHOWN_SCRIPT, str(ROOT)], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
