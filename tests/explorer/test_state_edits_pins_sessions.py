"""What is on screen lives in one state (explorer/state.py), tested without a window: the edits with
their undo and redo steps, the Difference toggle, the pinned run, the notices, and a session as a
snapshot that applies whole or not at all. No Qt is needed (test_state_without_qt.py checks that
none is loaded)."""

import dataclasses

import pytest

from explorer.run import DisplayTrace
from explorer.state import ALL_HEADS, EditHistory, ExplorerState, Inputs, Snapshot
from models.api import Trace
from models.engine.edits import Edit, hide_key
from models.engine.pipeline import run
from models.run_engine import toy_request

SIGNALS = ("inputs_changed", "edits_changed", "difference_changed", "pinned_changed", "stage_changed",
           "head_changed", "focus_head_changed", "query_changed", "notices_changed", "requested_changed",
           "key_tokens_changed", "model_info_changed", "settings_error_changed", "trace_changed")  # fmt: skip
Q = Edit("q", (0, 1, 2), 4.0)
V = Edit("v", (1, 0, 0), -2.0)


def _state(**inputs):
    return ExplorerState(Inputs(**{"sentence": "one two three", "heads": 2, "d_model": 8, **inputs}))


def _listen(state):
    events = []
    for name in SIGNALS:
        getattr(state, name).connect(lambda *args, name=name: events.append((name, *args)))
    return events


def _shown(state, generation=1):
    """Compute the state's request as the worker would and show it."""
    request = state.request()
    display = DisplayTrace(generation, Trace(run(toy_request(request)), request, lambda: None))
    state.show_trace(display)
    return display


def test_edits_undo_redo_and_reset_are_events_of_the_state():
    state = _state()
    events = _listen(state)
    state.add_edits([Q])
    state.add_edits([hide_key(0, 1), hide_key(1, 1)])  # a token hidden from every query: one step
    assert state.edits == (Q, hide_key(0, 1), hide_key(1, 1)) and state.history.can_undo
    state.undo()
    assert state.edits == (Q,) and state.history.can_redo
    state.redo()
    assert state.edits == (Q, hide_key(0, 1), hide_key(1, 1)) and not state.history.can_redo
    state.undo()
    state.add_edits([V])  # a new edit: what was undone can no longer be redone
    assert state.edits == (Q, V) and not state.history.can_redo
    state.reset_edits()
    state.reset_edits()  # nothing left to reset: no event
    state.undo()  # nothing to undo: no event
    assert [name for name, *_ in events] == ["edits_changed"] * 7  # add, add, undo, redo, undo, add, reset
    assert events[-1] == ("edits_changed", EditHistory())


def test_the_request_carries_the_edits_and_the_difference_toggle():
    state = _state()
    events = _listen(state)
    state.add_edits([Q])
    state.set_difference(True)
    state.set_difference(True)  # already on: no event
    request = state.request()
    assert request.edits == (Q,) and request.difference
    state.set_difference(False)
    assert [e for e in events if e[0] == "difference_changed"] == [("difference_changed", True),
                                                                  ("difference_changed", False)]  # fmt: skip
    assert not state.request().difference and state.request().edits == (Q,)


def test_changing_the_inputs_clears_the_edits_of_the_old_computation_with_a_notice():
    state = _state()
    state.add_edits([Q])
    events = _listen(state)
    state.update_inputs(painted_mask=((False,) * 3,) * 3)  # the painted mask is not another computation
    assert state.edits == (Q,) and state.notices == ()
    seen = []
    state.inputs_changed.connect(lambda _inputs: seen.append(state.edits))  # read when the inputs change
    state.update_inputs(temperature=2.0)
    assert state.edits == () and not state.history.can_redo and seen == [()]
    assert state.notices == ("edits cleared: the inputs changed",)
    assert ("edits_changed", EditHistory()) in events
    assert state.take_notices() == ("edits cleared: the inputs changed",) and state.notices == ()
    assert events[-1] == ("notices_changed", ())


def test_pin_and_unpin_are_events_and_pinning_needs_a_run():
    state = _state()
    events = _listen(state)
    assert not state.pin() and state.pinned is None  # nothing shown yet
    display = _shown(state)
    assert state.pin() and state.pinned is display
    assert state.pin(display)  # the same run again: no event
    state.update_inputs(temperature=2.0)
    later = _shown(state, 2)
    assert state.pinned is display and state.display is later  # the pinned run stays as it was
    state.unpin()
    state.unpin()
    assert state.pinned is None
    assert [e for e in events if e[0] == "pinned_changed"] == [("pinned_changed", display), ("pinned_changed", None)]


def test_the_latest_request_is_held_by_the_state():
    state = _state()
    events = _listen(state)
    request = state.request()
    state.set_requested(request)
    assert state.requested is request and events == [("requested_changed", request)]


def _busy_state():
    """A state with a shown and a pinned run, two edits (one undone), Difference on and a chosen view."""
    state = _state()
    state.update_inputs(mask="causal")
    _shown(state)
    state.pin()
    state.add_edits([Q])
    state.add_edits([V])
    state.undo()
    state.set_difference(True)
    _shown(state, 2)
    state.set_stage("scores")
    state.set_head(1)
    state.set_query(0)
    return state


def _fields(state):
    return (state.inputs, state.history, state.edits, state.difference, state.pinned, state.display, state.stage_name,
            state.head, state.focus_head, state.query, state.key_tokens, state.problem, state.notices)  # fmt: skip


def test_a_snapshot_applied_to_another_state_shows_the_same_thing():
    busy = _busy_state()
    snapshot = busy.snapshot()
    assert snapshot.edits == (Q,) and snapshot.history.undone == ((V,),) and snapshot.pinned is busy.pinned
    other = _state(sentence="something else entirely")
    events = _listen(other)
    other.apply(snapshot)
    assert other.snapshot() == snapshot and other.inputs == busy.inputs and other.key_tokens == busy.key_tokens
    assert other.history.can_redo  # the undone step comes along: Redo works as it did
    assert other.request() == busy.request()
    names = [name for name, *_ in events]
    assert names.count("inputs_changed") == 1 and names.count("edits_changed") == 1  # one event per field
    assert {"difference_changed", "pinned_changed", "stage_changed", "head_changed", "query_changed"} <= set(names)
    assert "notices_changed" not in names  # its edits are its own: the new inputs do not clear them


def test_apply_sets_every_field_before_the_first_event():
    busy = _busy_state()
    other = _state()
    seen = []
    other.inputs_changed.connect(lambda _inputs: seen.append(other.snapshot()))
    other.apply(busy.snapshot())
    assert seen == [busy.snapshot()]


@pytest.mark.parametrize("damage", [
    dict(stage="no-such-stage"),
    dict(head=-2),
    dict(query=1.5),
    dict(focus_head=-1),
    dict(difference="yes"),
    dict(inputs={"sentence": "a"}),
    dict(history=EditHistory(((Q,), ("not an edit",)))),
    dict(history=EditHistory(((),))),
    dict(pinned="a run"),
])  # fmt: skip
def test_a_failing_apply_leaves_every_field_unchanged_and_emits_nothing(damage):
    state = _busy_state()
    other = _state(sentence="a b c d", temperature=3.0)  # what the bad snapshot would bring
    other.add_edits([V])
    good = other.snapshot()
    before = _fields(state)
    events = _listen(state)
    with pytest.raises((TypeError, ValueError)):
        state.apply(dataclasses.replace(good, **damage))
    assert _fields(state) == before and events == []
    state.apply(good)  # the same snapshot, whole: applies
    assert state.snapshot() == good


def test_the_snapshot_taken_before_undoes_everything_at_once():
    state = _busy_state()
    before = state.snapshot()
    state.update_inputs(sentence="a different sentence", mask="none")  # clears the edits
    state.unpin()
    state.set_difference(False)
    state.set_stage("weights")
    state.set_head(ALL_HEADS)
    state.apply(before)
    assert state.snapshot() == before and state.edits == (Q,) and state.pinned is not None


def test_a_session_without_a_stage_keeps_the_stage_shown():
    state = _busy_state()
    state.apply(Snapshot(Inputs(sentence="x y", heads=2, d_model=8)))
    assert state.stage_name == "scores" and state.edits == () and state.pinned is None and not state.difference
