"""The one frame scheduler (explorer/widgets/frames.py): named phases in turns of their own, one
"GUI busy" flag that flips once each way, and public waits (issue 17)."""

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from explorer.widgets.frames import Frames


def test_a_phase_runs_in_a_later_turn_once_however_often_it_is_asked(qtbot):
    frames = Frames()
    calls, flips = [], []
    frames.busy_changed.connect(flips.append)
    images = frames.turn("images", lambda: calls.append("images"))
    images.request()
    images.request()  # coalesces
    QApplication.sendPostedEvents()  # what this turn posted: not the phase yet
    assert calls == [] and frames.busy and frames.pending() == ("images",)
    assert frames.wait_until_idle(5)
    assert calls == ["images"] and flips == [True, False] and not frames.busy


def test_phases_run_after_what_their_turn_posted(qtbot):
    """A zero-delay call shares the next turn with the events this turn posted; a phase does not."""
    frames = Frames()
    order = []
    frames.after_this_turn("paint", lambda: order.append("phase"))
    QTimer.singleShot(0, lambda: order.append("posted"))
    assert frames.wait_until_idle(5)
    assert order == ["posted", "phase"]


def test_a_begun_phase_keeps_the_gui_busy_until_its_event_or_its_limit(qtbot):
    frames = Frames()
    ran = []
    frames.phase_ran.connect(ran.append)
    frames.begin("painted")
    assert frames.busy and frames.pending() == ("painted",)
    frames.end("painted")
    assert not frames.busy and ran == ["painted"]
    frames.begin("painted", limit_ms=20)  # the event never comes: the limit ends it
    with qtbot.waitSignal(frames.idle, timeout=2_000):
        pass
    assert not frames.busy


def test_a_watched_condition_counts_and_flush_runs_chained_phases_now(qtbot):
    frames = Frames()
    building = [True]
    frames.watch(lambda: building[0])
    order = []
    second = frames.turn("paint", lambda: order.append("paint"))
    first = frames.turn("images", lambda: (order.append("images"), second.request()))
    first.request()
    frames.flush()
    assert order == ["images", "paint"] and frames.pending() == ()
    assert frames.busy  # the watched condition
    building[0] = False
    with qtbot.waitSignal(frames.idle, timeout=1_000):
        frames.check()
    assert not frames.busy


def test_a_cancelled_phase_never_runs(qtbot):
    frames = Frames()
    calls = []
    turn = frames.turn("images", lambda: calls.append(1))
    turn.request()
    turn.cancel()
    assert not frames.busy
    qtbot.wait(20)
    assert calls == []


def test_a_one_off_phase_asked_many_times_makes_one_timer(qtbot):
    """after_this_turn made a new timer (a child of the scheduler) at every submit and every result:
    a window kept them all."""
    from PySide6.QtCore import QTimer as Timer

    frames = Frames()
    calls = []
    for _ in range(50):
        frames.after_this_turn("submitted", lambda: calls.append(1))
        assert frames.wait_until_idle(5)
    assert calls == [1] * 50 and len(frames.findChildren(Timer)) <= 2
