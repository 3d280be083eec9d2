"""``python main.py [options]``: parse the arguments, open the window (or take a screenshot and exit).

    python main.py --sentence "The cat sat." --heads 2 --mask causal --stage weights --screenshot out.png
    python main.py --model minilm --layer 2 --sentence "The cat sat on the mat." --screenshot out.png

Bad values print one clear line and exit with status 2, before any window opens.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from pathlib import Path

from explorer.command_line import (  # noqa: F401 - the window's command line, re-exported for its callers
    build_parser,
    generate_arguments,
    head_name,
    head_out_of_range,
    inputs_from_args,
    model_from_arg,
)
from explorer.files.persistence import (
    APPLICATION,
    ORGANIZATION,
    colours_from_choice,
    open_settings,
    settings_inputs,
)
from explorer.files.view_shots import check_view_arguments, check_window_screenshot, parse_cell
from explorer.state import ALL_HEADS, Inputs
from explorer.usage import UsageError

SCREENSHOT_TIMEOUT_MS = 120_000
STYLE_SHEET = Path(__file__).resolve().parent.parent / "resources" / "style.qss"


def run_app(argv: Sequence[str], commands: str = "") -> int:
    try:
        args = build_parser(commands).parse_args(list(argv))
    except SystemExit as exc:  # argparse has printed the usage, or the one line of the reason
        return int(exc.code or 0)
    if problem := check_view_arguments(args.view, args.model, args.screenshot, args.attention):
        return _fail(problem)
    if problem := check_window_screenshot(args):
        return _fail(problem)
    try:
        cell = parse_cell(args.cell) if args.cell else None
    except ValueError as exc:
        return _fail(str(exc))
    problems: list[str] = []  # issue 19: a bad settings file is reported once, the window still starts
    settings = open_settings(args.settings, problems)
    # A screenshot documents exactly the options given: start from the defaults, save nothing.
    base = Inputs() if args.screenshot else settings_inputs(settings, problems)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    try:
        if args.session or args.save_session:  # issue 9 (explorer/files/session_io.py)
            from explorer.files.session_io import session_arguments

            base = session_arguments(args, base)
        inputs = inputs_from_args(args, base)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if problem := generate_arguments(args, inputs):
        return _fail(problem)

    from PySide6.QtWidgets import QApplication

    from explorer.widgets.window_size import use_desktop_offscreen_screen
    from explorer.window import MainWindow

    use_desktop_offscreen_screen()  # a screenshot is taken on a 1920 × 1080 screen, not Qt's 800 × 800
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "attention-explorer"])
    if app.platformName() == "offscreen":
        quiet_offscreen_warnings()
    app.setOrganizationName(ORGANIZATION)
    app.setApplicationName(APPLICATION)
    if STYLE_SHEET.is_file():
        app.setStyleSheet(STYLE_SHEET.read_text(encoding="utf-8"))
    head = ALL_HEADS if args.head is None else args.head
    fit = None if args.colours is None else colours_from_choice(args.colours)
    if args.attention:  # issue 10: a file refused before any window opens; --screenshot shows just it
        from explorer.files.view_shots import attention_screenshot
        from explorer.panels.survey_panel import check_attention_arg

        if (problem := check_attention_arg(args.attention)) or args.screenshot:
            return attention_screenshot(args.attention, args.screenshot, args.view) if not problem else _fail(problem)
    if args.generate is not None:  # issue 21: the Generate window alone
        from explorer.panels.generate_panel import generate_screenshot, open_generate_window

        if args.screenshot:  # the model as the main window opens it (--step: that step's folder)
            return generate_screenshot(inputs.model, args.generate, args.max_new_tokens, args.screenshot)
        # shown: as the main window, start-up objects frozen out of collections (no ~90 ms walk while stepping)
        return open_generate_window(app, inputs.model, args.generate, args.max_new_tokens, freeze_startup_objects)
    if args.atlas and args.screenshot:  # issue 22: the atlas window alone
        from explorer.panels.atlas_extras import atlas_screenshot

        return atlas_screenshot(args.atlas, args.screenshot, args.atlas_compare)
    window = MainWindow(settings, inputs, persist=not args.screenshot, stage=args.stage, head=head, fit_colours=fit)
    if args.atlas:
        window.windows.open_atlas(folder=args.atlas, compare=args.atlas_compare)
    if args.attention:
        window.windows.open_survey(path=args.attention)
    if getattr(args, "window_session", None) is not None:  # issue 9: its edits, pinned run and query
        from explorer.files.session_io import on_top

        window.sessions.restore(on_top(args.window_session, inputs, args.stage, head))
    if args.timeline:  # issue 20
        from explorer.actions.timeline_actions import start_timeline, timeline_screenshot

        shown_first = start_timeline if not args.screenshot else lambda w, step: w.windows.open_timeline(step=step)
        timeline = shown_first(window, args.step)  # the timeline in front of the window, not behind it
        if args.screenshot:
            return timeline_screenshot(app, window, timeline, (args.screenshot, args.window_screenshot), _screenshot)
    try:
        if args.screenshot:
            code = _screenshot(app, window, args.screenshot, args.stage, args.head, args.layer,
                               (args.view, cell, args.query), head_name(args))  # fmt: skip
            if code == 0 and args.save_session:
                from explorer.files.session_io import save_shown_session

                code = save_shown_session(args.save_session, window)
            return code
        window.show()
        freeze_startup_objects()
        return app.exec()
    finally:
        window.close()  # stops and joins the worker thread
        window.deleteLater()
        app.processEvents()
        join_jobs(app)


JOIN_AT_EXIT_S = 600  # a job asked to stop hears it within one band (a few seconds at 131,072 tokens)


def join_jobs(app, timeout_s: float = JOIN_AT_EXIT_S) -> bool:
    """Wait (the GUI's events processed) until no job runs on the executor: a worker's stop waits 30 s,
    and a job still in a torch call when the process ended aborted it after its PNG was written
    ('terminate called without an active exception', exit 134: a 16,384-token window's 'concat' under
    load; issue 50, point 1). True when none is left."""
    from explorer.executor import EXECUTOR

    waited = 0.0
    while not EXECUTOR.wait_until_idle(0.05) and waited < timeout_s:
        app.processEvents()
        waited += 0.05
    return EXECUTOR.idle


def freeze_startup_objects() -> None:
    """Leave the objects alive after start-up (torch, pyqtgraph, every widget: ~10⁶ of them) out
    of Python's cyclic garbage collections from now on. Each full collection walked them all on
    the GUI thread: ~90 ms, at a moment no one chooses (it was the longest stall of a first model
    load). What is frozen stays: the widgets, the libraries, at most the first small trace."""
    gc.collect()
    gc.freeze()


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def quiet_offscreen_warnings() -> None:
    """Without a screen Qt warns about every window hint it cannot honour ("This plugin does not
    support propagateSizeHints()"): noise in a screenshot run. Other messages pass on unchanged."""
    from PySide6.QtCore import qInstallMessageHandler

    previous = None

    def handler(mode, context, message: str) -> None:
        if message.startswith("This plugin does not support"):
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            print(message, file=sys.stderr)

    previous = qInstallMessageHandler(handler)


def _streaming_progress(window) -> float | None:
    """The shown stage's share of rows done while a long input's overview streams in, else None."""
    display, name = window.state.display, window.state.stage_name
    image = display.images.get(name) if display is not None else None
    return image.progress if image is not None and image.progress < 1.0 else None


def _screenshot(app, window, path: str, stage: str | None, head: int | None = None, layer: int | None = None,
                shot: tuple = (None, None, None), head_from: str = "--head") -> int:  # fmt: skip
    """Show the window, wait until the result and the shown stage's image are on screen, save a PNG
    (of the view ``shot`` = (--view, --cell, --query) names: explorer/files/view_shots.py)."""
    from explorer.widgets.frames import run_until

    outcome: dict[str, str] = {}

    def wait_until(done, every_ms: int) -> None:
        """Run the event loop until ``done()`` (polled: a fast first result may come before any
        connection here) or the deadline, which is an error; a long input's overview still growing
        (its share of rows done larger than at the last deadline) moves the deadline on."""
        progress = -1.0
        while not run_until(done, every_ms, SCREENSHOT_TIMEOUT_MS):
            now = _streaming_progress(window)
            if now is None or now <= progress:
                outcome.setdefault("error", "timed out")
                return
            progress = now

    def check() -> bool:
        if not window.is_settled():
            return False
        if window.last_error:
            outcome["error"] = window.last_error
        elif window.sessions.problem:  # --session: what of it cannot be shown is refused, not dropped
            outcome["error"] = window.sessions.problem
        elif stage and stage not in window.state.display.trace:
            names = ", ".join(window.state.display.trace.names)
            outcome["error"] = f"this computation has no stage {stage!r}; it has {names}"
        elif head is not None and head >= (heads := max(s.heads for s in window.state.display.trace.stages)):
            outcome["error"] = head_out_of_range(head_from, heads)
        elif layer is not None and window.state.display.trace.meta.get("layer") != layer:
            # the window showed the last layer instead; a screenshot must show what was asked for
            config = window.state.display.trace.config
            outcome["error"] = (f"--layer must be between 0 and {config['num_layers'] - 1} "
                                f"({config['model']} has {config['num_layers']} layers)")  # fmt: skip
        elif window.state.stage_name in window.state.display.images:
            outcome["done"] = "yes"
        return bool(outcome)

    window.show()
    wait_until(check, 10)
    if "error" in outcome:
        print(f"error: {outcome['error']}", file=sys.stderr)
        return 2
    app.processEvents()  # let the layout settle and the views paint
    view, cell, query = shot
    target = window
    if view not in (None, "stepper") or query is not None:
        from explorer.files.view_shots import open_view

        opened = open_view(window, view or "stepper", cell, query)
        if isinstance(opened, str):
            print(f"error: {opened}", file=sys.stderr)
            return 2
        wait_until(lambda: opened.ready() and window.is_settled() or bool(opened.failed()), 20)
        if opened.failed():
            outcome["error"] = opened.failed()
        if "error" in outcome:
            print(f"error: {outcome['error']}", file=sys.stderr)
            return 2
        for _ in range(3):  # its layout settled and painted
            app.processEvents()
        target = opened.widget
    from explorer.files.image_export import save_screenshot

    if target is window:  # the heatmaps painted and the numbers read off the GUI thread shown
        window.settle_for_screenshot()
    return save_screenshot(target, path)  # atomic: a failed write never touches the old PNG
