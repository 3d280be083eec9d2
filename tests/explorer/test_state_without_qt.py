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
from models.pipeline import run

state = ExplorerState(Inputs(sentence="one two three", heads=2, d_model=8))
events = []
state.inputs_changed.connect(lambda inputs: events.append(("inputs", inputs.mask)))
state.stage_changed.connect(lambda name: events.append(("stage", name)))
state.trace_changed.connect(lambda display: events.append(("trace", display.generation)))
state.update_inputs(mask="causal")
request = state.request()
state.show_trace(DisplayTrace(1, run(request.toy_request()), request=request))
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
