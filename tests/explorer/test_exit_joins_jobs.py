"""The window's process ends with no job running (issue 50, point 1): a worker's stop waits 30 s, and a
job still inside a torch call when the interpreter ended aborted the process after its PNG was
written ('terminate called without an active exception', exit 134). run_app joins the executor's
jobs (explorer.app.join_jobs), processing the GUI's events meanwhile."""

from __future__ import annotations

import threading

from explorer.app import join_jobs
from explorer.executor import EXECUTOR


def test_the_exit_waits_for_a_job_still_running_and_processes_events_meanwhile(qapp):
    release, ended = threading.Event(), threading.Event()

    def job() -> None:
        release.wait(20)
        ended.set()

    EXECUTOR.start(job, lane=object())
    assert not EXECUTOR.idle
    calls = []
    original = qapp.processEvents

    def counting(*args):
        calls.append(1)
        if len(calls) == 5:  # the job ends a few event rounds later, as a stopped worker's does
            release.set()
        return original(*args)

    qapp.processEvents = counting
    try:
        assert join_jobs(qapp, timeout_s=30)
    finally:
        del qapp.processEvents
    assert ended.is_set() and EXECUTOR.idle and len(calls) >= 5


def test_the_exit_gives_up_after_its_time_limit_and_says_a_job_is_left(qapp):
    release = threading.Event()
    EXECUTOR.start(lambda: release.wait(20), lane=object())
    try:
        assert not join_jobs(qapp, timeout_s=0.2)
    finally:
        release.set()
        assert EXECUTOR.wait_until_idle(20)
