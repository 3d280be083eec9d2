"""The Generate panel: type a prompt, generate, and step through the generation token by token.

At step s (slider, ← / →) the panel shows position ``p = prompt_length - 1 + s``:
- every layer × head over positions 0..p (the model view grows row by row) with its head metrics
  (``sink``: the share of attention on the first token), a click opens that head;
- the chosen head's full matrix, the prompt / generated boundary dashed, row p outlined, and its
  weight on the first token along the sequence (attention sinks);
- the next-token top-k at p as bars, the token that followed in orange;
- the logit lens (layers × positions), column p outlined; hover: the top-5 at that layer.

"Scale without token 0" leaves the first key out of the colour scale (explorer/images/sink_scale.py).
A step's frame (every image as uint8, the texts) is computed on the read thread (explorer.jobs) from
the GenerationView; the GUI thread only paints it. The thumbnails are made at the device pixels the
model view gives each (as the survey's): by the worker at first, by the read thread after a resize.
Generation runs on :class:`GenerateWorker`; the panel is handed a model source (a callable name ->
model, e.g. the window's model cache) and a model name, never the window.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSizePolicy,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import signals_blocked

from explorer.engine.generate_worker import GenerateWorker
from explorer.engine.generation_view import GenerationView, StepFrame, quoted
from explorer.jobs import ReadJobs
from explorer.panels.generate_form import GenerateFormBar, settings_of, spin
from explorer.panes import GeneratedStep, GeneratePane
from explorer.widgets.frames import Frames, wait_until
from explorer.widgets.generated_matrix import GeneratedMatrix
from explorer.widgets.lens_map import LensMap
from explorer.widgets.model_view import ModelView
from explorer.widgets.scale_bar import blank_axes
from explorer.widgets.topk_bars import TopKBars
from explorer.widgets.window_size import open_sized
from models.config import InputError
from models.generate import GenerateSettings
from models.step_names import checkpoint_note

ModelSource = Callable[[str], object]


class GeneratePanel(QWidget):
    shown = Signal(int)  # the step now on screen
    open_in_window = Signal(str, int)  # the generated sequence's text, the layer to open it at

    def __init__(self, model_source: ModelSource, model_name: str = "", parent: QWidget | None = None,
                 frames: Frames | None = None, pane: GeneratePane | None = None):  # fmt: skip
        super().__init__(parent)
        self.model_source = model_source
        self.pane = pane if pane is not None else GeneratePane()  # the state's, opened from the main window
        if model_name:
            self.pane.update_form(model=model_name)  # else the model asked last (the pane outlives the window)
        self.worker = GenerateWorker(self)
        self.jobs = ReadJobs(self)  # each step's frame, computed off the GUI thread
        self.frame: StepFrame | None = None  # the step painted last
        # A step paints in two turns: the heatmaps, then the rest; as phases of the main window's
        # scheduler when opened from it (one owner of time), of its own when alone (--generate).
        self.frames = frames if frames is not None else Frames(self)
        self.paint_rest = self.frames.turn("rest", self._paint_rest)
        self.view: GenerationView | None = None
        self.step = 0
        self.asked = self.pane.form.model  # the model the last generation was asked of
        # The form follows the pane and writes to it (explorer/panels/generate_form.py).
        self.form = GenerateFormBar(self.pane)
        self.model_edit, self.prompt_edit, self.new_tokens = self.form.model_edit, self.form.prompt_edit, \
            self.form.new_tokens  # fmt: skip
        self.temperature, self.top_k, self.top_p = self.form.temperature, self.form.top_k, self.form.top_p
        self.seed, self.go = self.form.seed, self.form.go
        self.open_button = QPushButton("Open in the explorer")
        self.open_button.setToolTip("Trace the whole generated sequence in the main window at the layer shown")
        self.open_button.setEnabled(False)
        self.status = QLabel(self.pane.status)  # follows the pane's status (set_status)
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)  # tokens like <s> are text, not markup
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setEnabled(False)
        self.step_label = QLabel(" ")
        self.step_label.setTextFormat(Qt.TextFormat.PlainText)
        self.step_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)  # no relayout
        self.layer_box = spin(0, 0, 0, "The layer of the head shown in full")
        self.head_box = spin(0, 0, 0, "The head shown in full")
        self.sink_box = QCheckBox("Scale without token 0")
        self.sink_box.setToolTip("Leave the first key out of the colour scale (heads that park weight on the "
                                 "first token stop flattening the maps); hover still reads exact values")  # fmt: skip
        self.model_view = ModelView()
        self.matrix = GeneratedMatrix()
        self.bars = TopKBars()
        self.lens = LensMap()
        self._lay_out()
        self.go.clicked.connect(self.generate)
        self.prompt_edit.returnPressed.connect(self.generate)
        self.open_button.clicked.connect(
            lambda: self.view and self.open_in_window.emit(self.view.gen.sequence_text or self.pane.form.prompt,
                                                           self.pane.view.layer)  # fmt: skip
        )
        # The slider, boxes and checkboxes ask through the pane (its view) and follow it.
        update = self.pane.update_view
        self.slider.valueChanged.connect(lambda v: update(step=v))
        self.layer_box.valueChanged.connect(lambda v: update(layer=v))
        self.head_box.valueChanged.connect(lambda v: update(head=v))
        self.sink_box.toggled.connect(lambda on: update(sink_out=on))
        self.model_view.fit_box.toggled.connect(lambda on: update(fit_each=on))
        self.pane.view_changed.connect(self._follow_view)
        self._sync_view(self.pane.view)
        self.model_view.head_chosen.connect(self.choose_head)
        self.model_view.side_changed.connect(lambda _side: self._ask_frame())  # made at the new side
        self.pane.status_changed.connect(self._show_status)
        self.worker.progress.connect(self._on_progress)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        for key, delta in ((Qt.Key.Key_Left, -1), (Qt.Key.Key_Right, 1)):
            shortcut = QShortcut(QKeySequence(key), self, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(lambda d=delta: self.slider.setValue(self.slider.value() + d))

    def _lay_out(self) -> None:
        stepper = QHBoxLayout()
        stepper.addWidget(QLabel("Step (← →)"))
        stepper.addWidget(self.slider, 2)
        stepper.addWidget(self.step_label, 3)
        stepper.addWidget(QLabel("Head shown: layer"))
        stepper.addWidget(self.layer_box)
        stepper.addWidget(QLabel("head"))
        stepper.addWidget(self.head_box)
        stepper.addWidget(self.sink_box)
        stepper.addWidget(self.open_button)
        top = QSplitter(Qt.Orientation.Horizontal)
        for widget in (self.model_view, self.matrix, self.bars):
            top.addWidget(widget)
        top.setStretchFactor(0, 3)
        top.setStretchFactor(1, 3)
        top.setStretchFactor(2, 2)
        body = QSplitter(Qt.Orientation.Vertical)
        body.addWidget(top)
        body.addWidget(self.lens)
        body.setStretchFactor(0, 3)
        body.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(self.form)
        layout.addWidget(self.status)
        layout.addLayout(stepper)
        layout.addWidget(body, 1)
        self.body = body
        blank_axes(body, True)  # no numbers on the empty plots before the first generation

    # --- running ---------------------------------------------------------------------------
    def settings(self) -> GenerateSettings:
        """The generation settings of the pane's form."""
        return settings_of(self.pane.form)

    def _request(self):
        form = self.pane.form
        name = form.model.strip()
        if not name:
            raise InputError("choose a decoder model first")
        settings = self.settings().validate()
        source = self.model_source
        return (lambda: source(name)), form.prompt, settings

    def generate(self, now: bool = False) -> int | None:
        """Start generating (on the worker; ``now``: on this thread, for tests and screenshots)."""
        try:
            model, prompt, settings = self._request()
        except InputError as exc:
            self._on_failed(self.worker.request, str(exc))
            return None
        self.asked = self.pane.form.model.strip()
        note = checkpoint_note(self.asked)  # e.g. a step the training timeline chose, remembered since
        self.pane.set_status(f"Generating ({settings.describe()})…" + (f"  ⚠ {note}" if note else ""))
        self.worker.view_pixels = self.model_view.view_pixels()  # its thumbnails fit them
        return (self.worker.run_now if now else self.worker.submit)(model, prompt, settings)

    def _on_progress(self, request: int, done: int, total: int) -> None:
        if request == self.worker.request:
            self.pane.set_status(f"Generating: {done} / {total} tokens…")

    def _on_failed(self, request: int, message: str) -> None:
        if request == self.worker.request:
            self.pane.set_status(f"error: {message}")

    def _on_finished(self, request: int, view: GenerationView) -> None:
        if request != self.worker.request:
            return
        self.view = view
        blank_axes(self.body, False)
        g = view.gen
        L, h = g.num_layers, g.num_heads
        with signals_blocked(self.layer_box), signals_blocked(self.head_box), signals_blocked(self.slider):
            self.layer_box.setRange(0, L - 1)
            self.head_box.setRange(0, h - 1)
            self.slider.setRange(0, view.steps - 1)
        notes = "".join(f"  ⚠ {n}" for n in (checkpoint_note(self.asked), *g.notices) if n)
        held = f"; {g.weights}" if g.weights else ""  # how the layers were held
        ms = sorted(g.step_ms)[len(g.step_ms) // 2] if g.step_ms else 0.0
        if view.causal:
            self.pane.set_status(f"{g.model}: {g.prompt_length} prompt tokens + {g.generated} generated "
                                f"(stopped: {g.stopped}; {ms:.0f} ms per token{held}): {g.text!r}{notes}")  # fmt: skip
        else:
            best = ", ".join(f"{s.position}: {quoted(s.top_tokens[0])}" for s in g.steps)
            self.pane.set_status(f"{g.model} (encoder): {g.n} tokens, {view.steps} mask tokens predicted: "
                                f"{best}{notes}")  # fmt: skip
        self.lens.describe = view.lens_hover
        self.model_view.set_shape(L, h, g.n, g.n)
        self.model_view.set_metrics(view.metrics)
        target = "the next token" if view.causal else "the last layer's top token"
        self.lens.set_waiting(L, view.tokens, g.prompt_length, target)  # filled in below, off this thread
        self.matrix.set_sequence(view.tokens, g.prompt_length, view.causal)
        self.slider.setEnabled(True)
        self.open_button.setEnabled(True)
        if not self.pane.update_view(step=view.steps - 1, layer=min(self.pane.view.layer, L - 1),
                                     head=min(self.pane.view.head, h - 1)):  # fmt: skip
            self._follow_view(self.pane.view)  # the same view asked: its frame of this generation
        # The lens of every cell (models.generate.lens computes it when read): on the read thread beside the
        # step frames (in_order False), once the generation is on screen.
        self.jobs.ask("lens", view.lens_map, lambda m: view is self.view and self.lens.set_lens(
            m[0], m[1], view.tokens, g.prompt_length, target), in_order=False)  # fmt: skip

    # --- showing a step --------------------------------------------------------------------
    def choose_head(self, layer: int, head: int) -> None:
        self.pane.update_view(layer=layer, head=head)

    def show_step(self, step: int) -> None:
        """Show ``step`` (asked through the pane, as the slider does)."""
        if self.view is not None:
            self.pane.update_view(step=max(0, min(step, self.view.steps - 1)))

    def _follow_view(self, asked: GeneratedStep) -> None:
        self._sync_view(asked)
        self._ask_frame()

    def _sync_view(self, asked: GeneratedStep) -> None:
        """The slider, boxes and checkboxes show the pane's view (signals blocked: they do not ask again)."""
        for widget, value in ((self.slider, asked.step), (self.layer_box, asked.layer), (self.head_box, asked.head)):
            with signals_blocked(widget):
                widget.setValue(value)
        for box, on in ((self.sink_box, asked.sink_out), (self.model_view.fit_box, asked.fit_each)):
            with signals_blocked(box):
                box.setChecked(on)

    def _ask_frame(self) -> None:
        """The pane's view of this generation: its frame is computed on the read thread (explorer.jobs, the
        latest ask wins, so a held arrow key never queues up paints) and painted here when it comes."""
        view, asked = self.view, self.pane.view
        if view is None:
            return
        self.step = step = max(0, min(asked.step, view.steps - 1))
        fit, sink = asked.fit_each, asked.sink_out
        layer, head = min(asked.layer, view.gen.num_layers - 1), min(asked.head, view.gen.num_heads - 1)
        side = self.model_view.wanted_side()  # the view's device pixels now
        self.jobs.ask("step", lambda: view.frame(step, fit, sink, layer, head, side),
                      lambda frame: frame is not None and view is self.view and self.paint_step(frame))  # fmt: skip

    def paint_step(self, frame: StepFrame) -> None:
        """Paint a ready frame: images, marks and texts only (nothing computed, nothing laid out),
        in two turns of the event loop, each with its own paint, so input is handled in between:
        the model view and the chosen head now, the bars and the lens in the next turn."""
        self.frame = frame
        self.pane.set_shown(GeneratedStep(frame.step, frame.layer, frame.head, self.pane.view.fit_each, frame.sink_out))
        self.step_label.setText(frame.text)
        view = self.model_view
        if view.side != frame.side:  # resized: the mosaic laid out again for the new side (its metrics kept)
            view.set_shape(view.layers, view.heads, *view.matrix_shape, side=frame.side)
            view.set_metrics(self.view.metrics)
        view.set_layers(frame.thumbs)  # the mosaic keeps its shape: rows fill in as p grows
        head = self.view.attention[frame.layer, frame.head]
        self.matrix.show_step(frame.matrix, frame.matrix_top, head, frame.position, frame.matrix_title, frame.sink_out)
        self.matrix.set_sink(frame.head_sink, frame.mean_sink, frame.position)
        self.paint_rest.request()  # a newer frame before it runs: the rest of the newest is painted

    def _paint_rest(self) -> None:
        frame, view = self.frame, self.view
        if frame is None or view is None:
            return
        self.bars.set_bars(frame.bar_tokens, frame.bar_probs, frame.bar_chosen, frame.chosen_token, frame.chosen_prob,
                           "Next token" if view.causal else "Predicted at the mask token")  # fmt: skip
        self.lens.set_position(frame.position)
        self.shown.emit(frame.step)

    def is_settled(self) -> bool:
        """True when the step asked last is on screen (its frame computed and painted), its
        thumbnails at the side the model view's pixels ask for (a first layout moves its axes: the
        side is then asked for at once, not after the resize pause)."""
        return self.jobs.idle and not self.frames.busy and self.model_view.settled()

    def wait_until_shown(self, timeout: float = 10.0) -> bool:
        """Process events until :meth:`is_settled` (tests, screenshots), as ReadJobs.wait_until_idle."""
        return wait_until(self.is_settled, timeout)

    def _show_status(self, text: str) -> None:
        self.status.setText(text)

    def disconnect_pane(self) -> None:
        """Stop following the pane (the window is closing; the pane lives on in the state, its status
        back to idle: the work this window did is stopped)."""
        self.form.disconnect_pane()
        self.pane.status_changed.disconnect(self._show_status)
        self.pane.view_changed.disconnect(self._follow_view)
        self.pane.set_status(self.pane.idle_status)

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.worker.stop()
        self.jobs.shutdown()
        self.paint_rest.cancel()
        self.disconnect_pane()
        super().closeEvent(event)


class GenerateWindow(QMainWindow):
    def __init__(self, model_source: ModelSource, model_name: str = "", parent: QWidget | None = None,
                 frames: Frames | None = None, pane: GeneratePane | None = None):  # fmt: skip
        super().__init__(parent)
        self.setWindowTitle("Attention Explorer: generate and watch")
        self.panel = GeneratePanel(model_source, model_name, frames=frames, pane=pane)
        self.setCentralWidget(self.panel)
        open_sized(self)  # 1400 × 900, or the screen's size when smaller

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.panel.worker.stop()
        self.panel.jobs.shutdown()
        self.panel.frames.drop(self.panel.paint_rest)  # the main window's scheduler forgets its phase
        self.panel.disconnect_pane()  # the state's pane outlives this window
        super().closeEvent(event)


def generate_screenshot(model: str, prompt: str, new_tokens: int, out, step: int | None = None) -> int:
    """``main.py --generate PROMPT --model M --screenshot OUT.png``: the Generate window alone."""
    from PySide6.QtWidgets import QApplication

    from models.pretrained import load_model

    window = GenerateWindow(lambda name: load_model(name), model)
    window.panel.pane.update_form(prompt=prompt, new_tokens=new_tokens)
    window.show()
    window.panel.generate(now=True)
    QApplication.processEvents()
    if step is not None and window.panel.view is not None:
        window.panel.slider.setValue(step)
    window.panel.wait_until_shown()  # the thumbnails at the view's pixels, once laid out
    QApplication.processEvents()
    message = window.panel.status.text()
    from explorer.files.image_export import save_screenshot

    if window.panel.view is None:
        code = 2
        print(message if message.startswith("error") else f"error: nothing was generated: {message}", file=sys.stderr)
    else:
        code = save_screenshot(window, out)  # atomic: a failed write never touches the old PNG
    window.close()
    window.deleteLater()
    QApplication.processEvents()
    return code


def open_generate_window(app, model: str, prompt: str, new_tokens: int, shown: Callable[[], None] = lambda: None):
    """``main.py --generate PROMPT --model M``: the Generate window on its own, generating at once;
    ``shown()`` is called once it is shown (the app freezes its start-up objects out of collections)."""
    from models.pretrained import load_model

    window = GenerateWindow(lambda name: load_model(name), model)
    window.panel.pane.update_form(prompt=prompt, new_tokens=new_tokens)
    window.show()
    shown()
    window.panel.generate()
    try:
        return app.exec()
    finally:
        window.close()


def open_generate_for(parent: QWidget, models, state) -> GenerateWindow:
    """File → Generate and watch…: the window's model (when one is chosen) and model cache; "Open in
    the explorer" traces the generated sequence in the main window at the layer shown."""
    inputs = state.inputs
    window = GenerateWindow(models.model, inputs.model if inputs.uses_model else "", parent,
                            frames=getattr(parent, "frames", None), pane=state.generate)  # the main window's

    def open_sequence(text: str, layer: int) -> None:
        state.update_inputs(model=state.generate.form.model.strip(), sentence=text, layer=layer)

    window.panel.open_in_window.connect(open_sequence)
    window.show()
    return window
