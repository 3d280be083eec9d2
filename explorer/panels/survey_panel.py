"""The whole model at once: the model view, the head metrics table and the rollout, together.

Fed either by a model (:meth:`SurveyPanel.compute`, on :class:`SurveyWorker`, painted layer by
layer as they arrive) or by a file of attention computed anywhere (:meth:`open_attention`).
"Leave out special tokens" drops the rows and key columns of [CLS], [SEP], <s>, </s>,
<|endoftext|> (and a decoder's first token) from the thumbnails, the metrics (recomputed by
:func:`models.reads.survey.head_metrics` with ``keep``) and the rollout shown.

The GUI thread never makes a thumbnail: the worker makes each layer's as the panel shows them
(its side, its toggles), and once the survey is complete, a resize or a toggle asks the read
thread (explorer.jobs.ReadJobs) for every layer's again; the panel paints what arrives.

What the user chooses (the measure, the toggles, the heat table's metric, the tab, the rollout's layer
and token) and the status lines are a :class:`~explorer.panes.SurveyPane` (the state's ``survey``
when opened from the main window): the controls write it and follow it, never hold a choice alone.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from explorer.engine.survey_worker import SurveyWorker
from explorer.images.thumbnails import kept_tokens, layer_thumbnails
from explorer.jobs import ReadJobs
from explorer.panels.survey_form import TABS, SurveyFormBar
from explorer.panes import SurveyForm, SurveyPane
from explorer.widgets.head_metrics_table import HeadMetricsTable
from explorer.widgets.model_view import ModelView
from explorer.widgets.rollout_view import RolloutView
from explorer.widgets.window_size import open_sized
from models.config import InputError
from models.files.attention_file import open_attention
from models.reads.survey import Survey, complete, head_metrics

FILE_FILTER = "Attention (*.npy *.npz);;All files (*)"


class SurveyPanel(QWidget):
    head_chosen = Signal(int, int)  # layer, head: open it in the stepper
    survey_shown = Signal(object)  # the Survey now complete on screen

    def __init__(self, parent: QWidget | None = None, pane: SurveyPane | None = None):
        super().__init__(parent)
        self.pane = pane if pane is not None else SurveyPane()  # the state's, opened from the main window
        self.worker = SurveyWorker(self)
        self.jobs = ReadJobs(self)  # a complete survey's thumbnails again (resize, toggles)
        self.survey: Survey | None = None
        self._streamed_view: tuple[bool, bool, bool] | None = None  # the toggles the worker's thumbnails follow
        # The source line, the measure and the toggles (explorer/panels/survey_form.py): they follow the pane.
        self.bar = SurveyFormBar(self.pane)
        self.source_label, self.measure_combo = self.bar.source_label, self.bar.measure_combo
        self.special_box, self.sink_box = self.bar.special_box, self.bar.sink_box
        self._last_compute: tuple | None = None
        self.message = QLabel(self.pane.message)  # warnings about a file, errors: one line each
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #a04000;")
        self.message.setVisible(bool(self.pane.message))
        self.model_view = ModelView()
        self.table = HeadMetricsTable()
        self.rollout_view = RolloutView()
        tabs = QTabWidget()
        tabs.addTab(self.table, "Head metrics")
        tabs.addTab(self.rollout_view, "Rollout")
        self.tabs = tabs
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.model_view)
        splitter.addWidget(tabs)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(self.bar)
        layout.addWidget(self.message)
        layout.addWidget(splitter, 1)

        self.worker.started.connect(self._on_started)
        self.worker.layer_ready.connect(self._on_layer)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        self.model_view.head_chosen.connect(self.head_chosen)
        self.model_view.side_changed.connect(self._on_side_changed)
        self.table.head_chosen.connect(self.head_chosen)
        # The controls write the pane's form (explorer/panes.py: SurveyForm) and follow it (_follow_form).
        update, rollout = self.pane.update_form, self.rollout_view
        self.model_view.fit_box.toggled.connect(lambda on: update(fit_each=on))
        self.model_view.metric_box.currentTextChanged.connect(lambda text: text and update(metric=text))
        self.tabs.currentChanged.connect(lambda i: update(tab=TABS[i]))
        rollout.slider.valueChanged.connect(lambda v: rollout.rollout is not None and update(rollout_layer=v))
        rollout.token_box.currentIndexChanged.connect(lambda i: i >= 0 and update(rollout_token=i))
        self.table.sorted_by.connect(lambda name, descending: update(sort=(name, descending)))
        self._followed = SurveyForm()  # the form the controls and the survey shown were last made to follow
        self._follow_form(self.pane.form)
        self.pane.form_changed.connect(self._follow_form)
        self.pane.status_changed.connect(self.bar.show_status)
        self.pane.message_changed.connect(self._show_message_text)

    # --- the pane --------------------------------------------------------------------------
    def _follow_form(self, form: SurveyForm) -> None:
        """The controls show the pane's form (a metric or a rollout layer or token this survey lacks is
        not shown: the form takes the one shown instead); what changed is computed or drawn again."""
        old, self._followed = self._followed, form
        self.bar.sync(form)
        self.model_view.fit_box.setChecked(form.fit_each)  # (its own bars relabel: signals not blocked)
        if form.metric and self.model_view.metric_box.findText(form.metric) >= 0:
            self.model_view.choose_metric(form.metric)
        if form.tab in TABS:
            self.tabs.setCurrentIndex(TABS.index(form.tab))
        if form.sort != self.table.sorting():
            self.table.sort_by(*form.sort)
        self._choose_rollout(form)
        if form.measure != old.measure:
            self._recompute()
        elif (form.special_out, form.sink_out, form.fit_each) != (old.special_out, old.sink_out, old.fit_each):
            self._refresh()
        self._take_shown(rollout=form.rollout_layer >= 0 or form.rollout_token >= 0)

    def _choose_rollout(self, form: SurveyForm, start: bool = False) -> None:
        """The rollout's layer and token of ``form``, where the rollout shown has them (``start``: none
        chosen yet is the last layer and the first token)."""
        rollout = self.rollout_view.rollout
        if rollout is None:
            return
        layers, n, _ = rollout.shape
        layer = layers - 1 if start and form.rollout_layer < 0 else form.rollout_layer
        token = 0 if start and form.rollout_token < 0 else form.rollout_token
        if 0 <= layer < layers:
            self.rollout_view.slider.setValue(layer)
        if 0 <= token < n:
            self.rollout_view.token_box.setCurrentIndex(token)

    def _take_shown(self, rollout: bool = True) -> None:
        """The form takes the metric (and the rollout's layer and token) the controls show."""
        changes: dict[str, object] = {}
        if self.model_view.metric_box.currentText():
            changes["metric"] = self.model_view.metric_box.currentText()
        if rollout and self.rollout_view.rollout is not None and self.rollout_view.token_box.currentIndex() >= 0:
            changes.update(rollout_layer=self.rollout_view.slider.value(),
                           rollout_token=self.rollout_view.token_box.currentIndex())  # fmt: skip
        self.pane.update_form(**changes)

    def _show_message_text(self, text: str) -> None:
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def disconnect_pane(self) -> None:
        """Stop following the pane (the window is closing; the pane lives on in the state, its status
        back to idle: the work this window did is stopped)."""
        self.pane.form_changed.disconnect(self._follow_form)
        self.pane.status_changed.disconnect(self.bar.show_status)
        self.pane.message_changed.disconnect(self._show_message_text)
        self.pane.set_status(self.pane.idle_status)
        self.pane.set_message("")

    # --- sources ---------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A survey is being computed, or thumbnails made for the view."""
        return self.worker.busy or not self.jobs.idle

    def wait_until_shown(self, timeout: float = 10.0) -> bool:
        """Process events until the thumbnails asked for are painted (tests, screenshots)."""
        return self.jobs.wait_until_idle(timeout)

    def stop(self) -> None:
        """Before the panel goes away: the survey stopped, the reads ended."""
        self.worker.stop()
        self.jobs.shutdown()

    def compute(self, model, sentence: str, mask: str | None = None, max_tokens: int | None = None) -> int:
        """Survey a model (a PretrainedModel or a callable returning one) on the worker."""
        self._show_message([])
        self.pane.set_status("Computing every layer…")
        if (model, sentence, mask, max_tokens) != self._last_compute:  # another survey: no rollout chosen yet
            self.pane.update_form(rollout_layer=-1, rollout_token=-1)
        self._last_compute = (model, sentence, mask, max_tokens)
        self.measure_combo.setEnabled(True)
        self.worker.view_pixels = self.model_view.view_pixels()  # the worker's thumbnails fit them
        special, fit, sink = self._streamed_view = self._view_options()
        return self.worker.submit(model, sentence, mask, max_tokens, fit, weighted=self.weighted,
                                  special_out=special, sink_out=sink)  # fmt: skip

    @property
    def weighted(self) -> bool:
        return self.pane.form.measure == "weighted norms"

    def _recompute(self) -> None:
        if self._last_compute is not None:
            self.compute(*self._last_compute)

    def open_attention(self, path) -> bool:
        """Show an attention file (see models.files.attention_file); False, with the reason shown, if unusable."""
        self.worker.cancel()
        self._last_compute = None
        self.measure_combo.setEnabled(False)
        try:
            opened = open_attention(path)
        except InputError as exc:
            self._show_message([f"error: {exc}"])
            return False
        self.pane.update_form(rollout_layer=-1, rollout_token=-1)  # another survey: no rollout chosen yet
        survey = Survey(opened.weights, opened.query_tokens, opened.key_tokens, opened.source,
                        decoder=opened.decoder, warnings=list(opened.warnings), cross=opened.cross)  # fmt: skip
        self.show_survey(complete(survey))
        return True

    def ask_and_open_attention(self) -> bool:
        path, _ = QFileDialog.getOpenFileName(self, "Open attention", "", FILE_FILTER)
        return bool(path) and self.open_attention(path)

    def show_survey(self, survey: Survey, painted: bool = False) -> None:
        """Show a complete survey; ``painted``: its thumbnails are on screen already (streamed)."""
        self.survey = survey
        L, h, n_q, n_k = survey.weights.shape
        kind = "" if survey.square else f" (cross attention: {n_q} queries × {n_k} keys)"
        self.pane.set_status(f"{survey.source}: {L} layers × {h} heads, {n_q} tokens{kind}")
        self.special_box.setEnabled(survey.square)
        self._show_message(survey.warnings)
        self._refresh(thumbnails=not painted)  # thumbnails: asked of the read thread, painted when they come
        self.pane.set_shown(survey)
        self.survey_shown.emit(survey)

    # --- worker results --------------------------------------------------------------------
    def _on_started(self, generation: int, tokens, layers: int, heads: int, decoder: bool, keys=None) -> None:
        if generation != self.worker.generation:
            return
        self.survey = None
        self.pane.set_shown(None)
        if keys is not None and tuple(keys) != tuple(tokens):  # cross attention: no token is left out
            self.model_view.set_shape(layers, heads, len(tokens), len(keys))
            return
        keep = kept_tokens(tokens, decoder) if self._streamed_view[0] else None  # as the worker's thumbnails
        m = len(tokens) if keep is None else int(keep.sum())
        self.model_view.set_shape(layers, heads, m, m)

    def _on_layer(self, generation: int, layer: int, weights: np.ndarray, thumbnails: np.ndarray) -> None:
        if generation != self.worker.generation:
            return
        # The worker's thumbnails, unless a toggle or a resize changed the mosaic since the survey
        # started: then every layer is made again (off this thread) once the survey is complete.
        if self._view_options() == self._streamed_view and thumbnails.shape[1:] == self.model_view.tile:
            self.model_view.set_layer(layer, indices=thumbnails)

    def _on_finished(self, generation: int, survey: Survey) -> None:
        if generation == self.worker.generation:
            # the streamed thumbnails stand unless the toggles or the view's size changed meanwhile
            view = self.model_view
            painted = view.painted_layers == survey.weights.shape[0] and view.side == view.wanted_side()
            painted = painted and self._streamed_view == self._view_options()
            self.show_survey(survey, painted=painted)

    def _on_failed(self, generation: int, message: str) -> None:
        if generation == self.worker.generation:
            self.pane.set_status("The survey failed")
            self._show_message([f"error: {message}"])

    # --- what is shown ---------------------------------------------------------------------
    def _view_options(self) -> tuple[bool, bool, bool]:
        form = self.pane.form
        return form.special_out, form.fit_each, form.sink_out

    def _keep(self, tokens, decoder: bool) -> np.ndarray | None:
        """The tokens kept, or None to keep all (toggle off, nothing special, or nothing left)."""
        return kept_tokens(tokens, decoder) if self.pane.form.special_out else None

    def keep_mask(self) -> np.ndarray | None:
        if self.survey is None or not self.survey.square:
            return None
        return self._keep(self.survey.query_tokens, self.survey.decoder)

    def _refresh(self, thumbnails: bool = True) -> None:
        survey = self.survey
        if survey is None:
            return
        keep = self.keep_mask()
        if thumbnails:
            self._ask_thumbnails()
        if keep is None:  # the survey's own metrics and rollout: nothing to compute
            return self._show_metrics(survey, (survey.metrics, survey.rollout), survey.query_tokens)
        q_tokens = tuple(t for t, k in zip(survey.query_tokens, keep) if k)

        def without_left_out():  # the metrics over the kept tokens only: on the read thread
            rollout = None if survey.rollout is None else survey.rollout[:, keep][:, :, keep]
            return head_metrics(survey.weights, keep=keep), rollout

        self.jobs.ask("metrics", without_left_out, lambda answer: self._show_metrics(survey, answer, q_tokens))

    def _show_metrics(self, survey: Survey, answer: tuple, q_tokens: tuple[str, ...]) -> None:
        if survey is not self.survey:
            return
        metrics, rollout = answer
        self.model_view.set_metrics(metrics)
        self.table.set_metrics(metrics)
        self.table.sort_by(*self.pane.form.sort)  # the form's order, where this survey has that column
        self.pane.update_form(sort=self.table.sorting())
        if rollout is None:
            why = ("cross-attention: its queries (the target) and keys (the source) are two sequences"
                   if survey.cross else "it needs square self-attention (n_q = n_k)")
            self.rollout_view.set_rollout(None, (), f"No rollout: {why}.")
        else:
            self.rollout_view.set_rollout(rollout, q_tokens)
        form = self.pane.form
        if form.metric and form.metric in metrics:
            self.model_view.choose_metric(form.metric)
        self._choose_rollout(form, start=True)
        self._take_shown()

    def _ask_thumbnails(self) -> None:
        """Every layer's thumbnails of the survey shown, at the view's side and toggles now: made
        on the read thread, painted when they come (the latest ask wins; an answer for a survey no
        longer shown is dropped)."""
        survey, keep = self.survey, self.keep_mask()
        L, h, n_q, n_k = survey.weights.shape
        shape = (L, h, n_q, n_k) if keep is None else (L, h, int(keep.sum()), int(keep.sum()))
        side = self.model_view.wanted_side(L, h)
        _special, fit, sink = self._view_options()

        def make() -> np.ndarray:
            return np.stack([layer_thumbnails(a, fit, side, keep, sink) for a in survey.weights])

        self.jobs.ask("thumbnails", make, lambda thumbs: self._paint_thumbnails(survey, shape, side, thumbs))

    def _paint_thumbnails(self, survey: Survey, shape: tuple[int, int, int, int], side: int,
                          thumbs: np.ndarray) -> None:  # fmt: skip
        if survey is not self.survey:
            return
        view = self.model_view
        if (view.layers, view.heads, *view.matrix_shape) != shape or view.side != side:
            metrics = view.metrics  # the mosaic laid out again: the heat table keeps its metrics
            view.set_shape(*shape, side=side)
            if metrics:
                view.set_metrics(metrics)
        view.set_layers(thumbs)

    def _on_side_changed(self, _side: int) -> None:
        """The view was resized: thumbnails again at its new device pixels, made off this thread
        (a survey still computing: its layers are made again once it is complete)."""
        self.worker.view_pixels = self.model_view.view_pixels()
        if self.survey is not None:
            self._ask_thumbnails()

    @property
    def error(self) -> str:
        """The last failure, as the pane's message says it ("" while a survey computes or once shown)."""
        return self.pane.message.removeprefix("error: ") if self.pane.message.startswith("error: ") else ""

    def _show_message(self, lines: list[str]) -> None:
        self.pane.set_message("\n".join(f"⚠ {line}" if not line.startswith("error:") else line for line in lines))

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.stop()
        super().closeEvent(event)


class SurveyWindow(QMainWindow):
    """The panel in its own top-level window (File → Open attention…, ``main.py --attention``)."""

    def __init__(self, parent: QWidget | None = None, pane: SurveyPane | None = None):
        super().__init__(parent)
        self.setWindowTitle("Attention Explorer: the whole model")
        self.panel = SurveyPanel(pane=pane)
        self.setCentralWidget(self.panel)
        open_sized(self, 1300, 800)

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.panel.stop()
        self.panel.disconnect_pane()  # the state's pane outlives this window
        super().closeEvent(event)


def open_attention_window(parent: QWidget | None, path=None, pane: SurveyPane | None = None) -> SurveyWindow | None:
    """Open (or ask for) an attention file in a new survey window; None when nothing was chosen."""
    window = SurveyWindow(parent, pane)
    opened = window.panel.open_attention(path) if path else window.panel.ask_and_open_attention()
    if not opened and not path:
        window.panel.disconnect_pane()
        window.deleteLater()
        return None
    window.show()  # also on failure with a path: the error is shown in the panel
    return window


def check_attention_arg(path) -> str:
    """``main.py --attention FILE``: '' when the file opens, else the one-line reason."""
    try:
        open_attention(path)
    except InputError as exc:
        return str(exc)
    return ""
