"""``python main.py [options]``: parse the arguments, open the window (or take a screenshot and exit).

    python main.py --sentence "The cat sat." --heads 2 --mask causal --stage weights --screenshot out.png
    python main.py --model minilm --layer 2 --sentence "The cat sat on the mat." --screenshot out.png

Bad values print one clear line and exit with status 2, before any window opens.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import sys
from collections.abc import Sequence
from pathlib import Path

from explorer.files.persistence import (
    APPLICATION,
    COLOUR_CHOICES,
    ORGANIZATION,
    colours_from_choice,
    open_settings,
    settings_inputs,
)
from explorer.files.view_shots import VIEWS, check_view_arguments, parse_cell
from explorer.state import ALL_HEADS, Inputs, settings_problem
from explorer.usage import UsageError
from models.config import InputError
from models.runspec import FIELDS, add_input_arguments, check_applicable, check_ranges
from models.trace import STAGE_ORDER

SCREENSHOT_TIMEOUT_MS = 120_000
STYLE_SHEET = Path(__file__).resolve().parent.parent / "resources" / "style.qss"


def build_parser() -> argparse.ArgumentParser:
    """The window's options: every input option of ``main.py export`` (one definition, in
    models.cli), then what only the window has (stage, head, colours, screenshot, ...)."""
    p = argparse.ArgumentParser(
        prog="main.py",
        description="Open the Attention Explorer window (or run 'main.py export --help' for the headless export).",
    )
    add_input_arguments(p)
    # Not given = None: the window then keeps what was saved last time (or the defaults).
    p.set_defaults(**{a.dest: None for a in p._actions if a.dest != "help"})
    view = p.add_argument_group("window")
    view.add_argument("--stage", choices=STAGE_ORDER, help="the stage to show first (default: weights)")
    view.add_argument("--head", type=int, metavar="N",
                      help="show head N (0-based: the first head is 0, as heads.csv and explain) instead of all heads")
    view.add_argument("--colours", choices=COLOUR_CHOICES,
                      help="the weights' colour scale: auto (default: log10 once rows hold more than 256 keys, "
                           "else 0 to 1), fixed 0 to 1, fit 0 to their largest value, or log (log10)")
    view.add_argument("--timeline", action="store_true",
                      help="open the training timeline (with --screenshot: save it, the window as OUT_window.png)")
    view.add_argument("--screenshot", metavar="OUT.png", help="compute, save a PNG of the window and exit")
    view.add_argument("--view", choices=VIEWS, help="with --screenshot: the view to save (default: stepper, the "
                      "main window); model, metrics and rollout need --model or --attention")
    view.add_argument("--cell", metavar="H,R,C", help="with --view inspector: the cell explained (0-based)")
    view.add_argument("--query", type=int, metavar="I", help="the query row focused on (0-based)")
    view.add_argument("--attention", metavar="FILE",
                      help="open attention computed anywhere (.npy, .npz, or an 'export --all-layers' folder)")
    view.add_argument("--generate", metavar="PROMPT",
                      help="with --model: open the Generate window on this prompt (with --screenshot: save it)")
    view.add_argument("--new-tokens", type=int, default=12, metavar="N", help="with --generate: tokens to generate")
    view.add_argument("--atlas", metavar="DIR", help="open a head atlas folder ('main.py atlas --out DIR')")
    view.add_argument("--atlas-compare", metavar="DIR2", help="with --atlas: show the difference DIR − DIR2")
    view.add_argument("--settings", metavar="FILE.ini", help="read and write settings in this INI file")
    view.add_argument("--session", metavar="FILE", help="open a saved session (other options given apply on top)")
    view.add_argument("--save-session", metavar="FILE", help="with --screenshot: also save the session it shows")
    return p


FILES = {"embeddings": "embeddings_file", "cross_embeddings": "cross_embeddings_file", "weights": "weights_file",
         "mask_file": "mask_file"}  # fmt: skip


def model_from_arg(text: str, step: str | None = None) -> str:
    """What to store for ``--model``: a folder as an absolute path, a name as given; UsageError
    (one line) when there is no such model or its config.json is unusable. Nothing loads here."""
    from models.config import InputError
    from models.pretrained.registry import read_config, resolve_model

    try:
        folder = resolve_model(text)
        if step is not None:  # issue 20: one training step of the model, opened as its own folder
            from models.pretrained.steps import step_folder

            folder = step_folder(folder, step)
        read_config(folder)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if step is not None:
        return str(folder.resolve())
    given = Path(text.strip()).expanduser()
    return str(given.resolve()) if given.is_dir() else text.strip()


def is_encoder_decoder(model: str) -> bool:
    from models.pretrained.registry import is_encoder_decoder as check

    return check(model)


def inputs_from_args(args: argparse.Namespace, base: Inputs) -> Inputs:
    """``base`` with every option given on the command line applied; UsageError when invalid."""
    if args.model is not None:
        encdec = is_encoder_decoder(args.model)  # its --cross-sentence is the target, not the toy's queries
        given = [f.dest for f in FIELDS if getattr(args, f.dest, None) not in (None, False)
                 and not (encdec and f.dest == "cross_sentence")]  # fmt: skip
        try:  # the one check export and sessions make: an option the model ignores is refused
            check_applicable(given, with_model=True)
        except InputError as exc:
            raise UsageError(str(exc)) from None
        if args.cross_sentence is not None and not encdec:  # would be silently ignored by this model
            raise UsageError("--cross-sentence applies with --model only to encoder-decoder models (t5, mt5, bart, "
                             "marian): their target; leave it out")  # fmt: skip
        base = dataclasses.replace(base, model=model_from_arg(args.model, args.step), pad_positions=())
    elif args.step is not None:
        raise UsageError("--step needs --model (a model with training checkpoints)")
    if args.block is not None:
        if not base.uses_model or not is_encoder_decoder(base.model):
            raise UsageError("--block needs an encoder-decoder --model (t5, mt5, bart, marian)")
        base = dataclasses.replace(base, block=args.block)
    if args.layer is not None:
        if not base.uses_model:
            raise UsageError("--layer needs --model (the toy model has a single layer)")
        if args.layer < 0:
            raise UsageError("--layer must be 0 or more (the first layer is 0)")
        base = dataclasses.replace(base, layer=args.layer)
    plain = ["sentence", "heads", "d_model", "d_k", "d_v", "d_out", "mask", "score", "temperature", "seed", "bias",
             "labels", "cross_labels"]  # fmt: skip
    if base.uses_model and args.mask is not None:  # --mask replaces the model's own, to compare
        base = dataclasses.replace(base, model_mask=args.mask)
        plain.remove("mask")
    changes = {name: getattr(args, name) for name in plain if getattr(args, name) is not None}
    if getattr(args, "text_file", None):  # a long text as the sentence
        from models.text_file import read_text_file

        if args.sentence is not None:
            raise UsageError("give --sentence or --text-file, not both")
        try:
            changes["sentence"] = read_text_file(args.text_file)
        except InputError as exc:
            raise UsageError(str(exc)) from None
    if args.cross_sentence is not None:
        changes.update(cross_enabled=True, cross_sentence=args.cross_sentence)
    if args.pe is not None:
        changes["pe"] = args.pe == "sinusoidal"
    for option, field in FILES.items():  # read and checked with export's code when the request is built
        if getattr(args, option) is not None:
            changes[field] = str(Path(getattr(args, option)).expanduser().resolve())
    if args.cross_embeddings is not None:
        changes["cross_enabled"] = True
    for option in ("device", "max_tokens", "all_layers"):
        if getattr(args, option) not in (None, False, "auto"):
            raise UsageError(f"--{option.replace('_', '-')} applies to 'main.py export' only")
    if args.pad_positions is not None:
        changes["pad_positions"] = args.pad_positions
    for name in ("d_k", "d_v"):  # 0 would mean "auto" in the window; on the command line it is an error
        if name in changes and changes[name] < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer")
    try:  # what the window's boxes show (models/fields.py: Field.shown): refused, never clamped
        check_ranges(args, window=True)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    inputs = dataclasses.replace(base, **changes)
    message, _ = settings_problem(inputs)
    if message:
        raise UsageError(message)
    if args.head is not None and args.head < 0:
        raise UsageError("--head must be 0 or more (the first head is 0)")
    if args.head is not None and not inputs.uses_model and args.head >= inputs.heads:
        # (a model's head count is known once it has loaded: the screenshot checks it then)
        raise UsageError(f"--head must be between 0 and {inputs.heads - 1} ({inputs.heads} heads, numbered from 0)")
    return inputs


def run_app(argv: Sequence[str]) -> int:
    try:
        args = build_parser().parse_args(list(argv))
    except SystemExit as exc:  # argparse has printed the usage and the reason
        return int(exc.code or 0)
    if problem := check_view_arguments(args.view, args.model, args.screenshot, args.attention):
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
        from explorer.panels.survey_panel import attention_screenshot, check_attention_arg

        if (problem := check_attention_arg(args.attention)) or args.screenshot:
            return attention_screenshot(args.attention, args.screenshot, args.view) if not problem else _fail(problem)
    if args.generate is not None:  # issue 21: the Generate window alone
        from explorer.panels.generate_panel import generate_screenshot, open_generate_window

        if not args.model:
            return _fail("--generate needs --model (a decoder)")
        if args.screenshot:
            return generate_screenshot(args.model, args.generate, args.new_tokens, args.screenshot)
        # shown: as the main window, start-up objects frozen out of collections (no ~90 ms walk while stepping)
        return open_generate_window(app, args.model, args.generate, args.new_tokens, freeze_startup_objects)
    if args.atlas and args.screenshot:  # issue 22: the atlas window alone
        from explorer.panels.atlas_window import atlas_screenshot

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
        from explorer.actions.timeline_actions import timeline_screenshot

        timeline = window.windows.open_timeline(step=args.step)
        if args.screenshot:
            return timeline_screenshot(app, window, timeline, args.screenshot, _screenshot)
    try:
        if args.screenshot:
            code = _screenshot(app, window, args.screenshot, args.stage, args.head, args.layer,
                               (args.view, cell, args.query))  # fmt: skip
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
                shot: tuple = (None, None, None)) -> int:  # fmt: skip
    """Show the window, wait until the result and the shown stage's image are on screen, save a PNG
    (of the view ``shot`` = (--view, --cell, --query) names: explorer/files/view_shots.py)."""
    from PySide6.QtCore import QEventLoop, QTimer

    outcome: dict[str, str] = {}

    def wait_until(done, every_ms: int) -> None:
        """Run the event loop until ``done()`` (polled: a fast first result may come before any
        connection here) or the deadline, which is an error."""
        loop = QEventLoop()
        # Timer objects (not QTimer.singleShot) so that none is left pending once this returns.
        poll, deadline = QTimer(), QTimer()
        poll.timeout.connect(lambda: done() and loop.quit())
        deadline.setSingleShot(True)
        progress = [-1.0]

        def expired() -> None:
            now = _streaming_progress(window)  # a long input's overview still growing: wait on
            if now is not None and now > progress[0]:
                progress[0] = now
                deadline.start(SCREENSHOT_TIMEOUT_MS)
                return
            outcome.setdefault("error", "timed out")
            loop.quit()

        deadline.timeout.connect(expired)
        poll.start(every_ms)
        deadline.start(SCREENSHOT_TIMEOUT_MS)
        loop.exec()
        poll.stop()
        deadline.stop()

    def check() -> bool:
        if not window.is_settled():
            return False
        if window.last_error:
            outcome["error"] = window.last_error
        elif stage and stage not in window.state.display.trace:
            names = ", ".join(window.state.display.trace.names)
            outcome["error"] = f"this computation has no stage {stage!r}; it has {names}"
        elif head is not None and head >= (heads := max(s.heads for s in window.state.display.trace.stages)):
            outcome["error"] = f"--head must be between 0 and {heads - 1} ({heads} heads, numbered from 0)"
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
        wait_until(lambda: opened.ready() and window.is_settled(), 20)
        if "error" in outcome:
            print(f"error: {outcome['error']}", file=sys.stderr)
            return 2
        for _ in range(3):  # its layout settled and painted
            app.processEvents()
        target = opened.widget
    saved = window.save_screenshot(path) if target is window else target.grab().save(str(path), "PNG")
    if not saved:
        print(f"error: {getattr(window, 'screenshot_error', None) or f'cannot write screenshot to {path}'}",
              file=sys.stderr)  # fmt: skip
        return 2
    print(f"wrote {path}")
    return 0
