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
state.show_trace(DisplayTrace(1, run(request), request=request))
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
