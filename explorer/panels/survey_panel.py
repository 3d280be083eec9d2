"""The whole model at once: the model view, the head metrics table and the rollout, together.

Fed either by a model (:meth:`SurveyPanel.compute`, on :class:`SurveyWorker`, painted layer by
layer as they arrive) or by a file of attention computed anywhere (:meth:`open_attention`).
"Leave out special tokens" drops the rows and key columns of [CLS], [SEP], <s>, </s>,
<|endoftext|> (and a decoder's first token) from the thumbnails, the metrics (recomputed by
:func:`models.reads.survey.head_metrics` with ``keep``) and the rollout shown.

The GUI thread never makes a thumbnail: the worker makes each layer's as the panel shows them
(its side, its toggles), and once the survey is complete, a resize or a toggle asks the read
thread (explorer.jobs.ReadJobs) for every layer's again; the panel paints what arrives.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
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

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.worker = SurveyWorker(self)
        self.jobs = ReadJobs(self)  # a complete survey's thumbnails again (resize, toggles)
        self.survey: Survey | None = None
        self._streamed_view: tuple[bool, bool, bool] | None = None  # the toggles the worker's thumbnails follow
        self.source_label = QLabel("No model or attention file yet")
        self.special_box = QCheckBox("Leave out special tokens")
        self.special_box.setToolTip("Drop [CLS], [SEP], <s>, </s>, <|endoftext|> (and a decoder's first token) "
                                    "from the thumbnails, the metrics and the rollout")  # fmt: skip
        self.sink_box = QCheckBox("Scale without token 0")
        self.sink_box.setToolTip("Leave the first key out of each thumbnail's colour scale: heads that park "
                                 "weight on the first token (attention sinks) stop flattening the rest")  # fmt: skip
        self.measure_combo = QComboBox()  # issue 22: what every thumbnail and metric reads
        self.measure_combo.addItems(["weights", "weighted norms"])
        self.measure_combo.setToolTip("Weights a, or the weighted norms ‖a_ij f_h(x_j)‖ (Kobayashi et al., 2020): "
                                      "what each key really moves; rows as shares of their sum for the metrics")
        self.measure_combo.setEnabled(False)  # a model survey only (an attention file has no values)
        self._last_compute: tuple | None = None
        self.message = QLabel("")  # warnings about a file, errors: one line each
        self.error = ""  # the last survey's one-line failure ("" while it computes or once shown)
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #a04000;")
        self.message.hide()
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
        top = QHBoxLayout()
        top.addWidget(self.source_label, 1)
        top.addWidget(QLabel("Show:"))
        top.addWidget(self.measure_combo)
        top.addWidget(self.special_box)
        top.addWidget(self.sink_box)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.message)
        layout.addWidget(splitter, 1)

        self.worker.started.connect(self._on_started)
        self.worker.layer_ready.connect(self._on_layer)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(self._on_failed)
        self.special_box.toggled.connect(lambda _on: self._refresh())
        self.sink_box.toggled.connect(lambda _on: self._refresh())
        self.measure_combo.currentIndexChanged.connect(lambda _i: self._recompute())
        self.model_view.fit_box.toggled.connect(lambda _on: self._refresh())
        self.model_view.head_chosen.connect(self.head_chosen)
        self.model_view.side_changed.connect(self._on_side_changed)
        self.table.head_chosen.connect(self.head_chosen)

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
        self.error = ""
        self.source_label.setText("Computing every layer…")
        self._last_compute = (model, sentence, mask, max_tokens)
        self.measure_combo.setEnabled(True)
        self.worker.view_pixels = self.model_view.view_pixels()  # the worker's thumbnails fit them
        special, fit, sink = self._streamed_view = self._view_options()
        return self.worker.submit(model, sentence, mask, max_tokens, fit, weighted=self.weighted,
                                  special_out=special, sink_out=sink)  # fmt: skip

    @property
    def weighted(self) -> bool:
        return self.measure_combo.currentText() == "weighted norms"

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
        survey = Survey(opened.weights, opened.query_tokens, opened.key_tokens, opened.source,
                        decoder=opened.decoder, warnings=list(opened.warnings))  # fmt: skip
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
        self.source_label.setText(f"{survey.source}: {L} layers × {h} heads, {n_q} tokens{kind}")
        self.special_box.setEnabled(survey.square)
        self._show_message(survey.warnings)
        self._refresh(thumbnails=not painted)  # thumbnails: asked of the read thread, painted when they come
        self.survey_shown.emit(survey)

    # --- worker results --------------------------------------------------------------------
    def _on_started(self, generation: int, tokens, layers: int, heads: int, decoder: bool, keys=None) -> None:
        if generation != self.worker.generation:
            return
        self.survey = None
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
            self.error = message
            self.source_label.setText("The survey failed")
            self._show_message([f"error: {message}"])

    # --- what is shown ---------------------------------------------------------------------
    def _view_options(self) -> tuple[bool, bool, bool]:
        return self.special_box.isChecked(), self.model_view.fit_box.isChecked(), self.sink_box.isChecked()

    def _keep(self, tokens, decoder: bool) -> np.ndarray | None:
        """The tokens kept, or None to keep all (toggle off, nothing special, or nothing left)."""
        return kept_tokens(tokens, decoder) if self.special_box.isChecked() else None

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
        if rollout is None:
            self.rollout_view.set_rollout(None, (), "No rollout: it needs square self-attention (n_q = n_k).")
        else:
            self.rollout_view.set_rollout(rollout, q_tokens)

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

    def _show_message(self, lines: list[str]) -> None:
        self.message.setText("\n".join(f"⚠ {line}" if not line.startswith("error:") else line for line in lines))
        self.message.setVisible(bool(lines))

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.stop()
        super().closeEvent(event)


class SurveyWindow(QMainWindow):
    """The panel in its own top-level window (File → Open attention…, ``main.py --attention``)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Attention Explorer: the whole model")
        self.panel = SurveyPanel()
        self.setCentralWidget(self.panel)
        open_sized(self, 1300, 800)

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.panel.stop()
        super().closeEvent(event)


def open_attention_window(parent: QWidget | None, path=None) -> SurveyWindow | None:
    """Open (or ask for) an attention file in a new survey window; None when nothing was chosen."""
    window = SurveyWindow(parent)
    opened = window.panel.open_attention(path) if path else window.panel.ask_and_open_attention()
    if not opened and not path:
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


def attention_screenshot(path, out, view: str | None = None) -> int:
    """``main.py --attention FILE --screenshot OUT.png``: the survey window alone, saved as PNG
    (``view``: metrics or rollout picks that tab)."""
    from PySide6.QtWidgets import QApplication

    from explorer.files.view_shots import survey_tab

    window = open_attention_window(None, path)
    survey_tab(window.panel, view)
    QApplication.processEvents()
    window.panel.wait_until_shown()  # the thumbnails, made on the read thread
    QApplication.processEvents()
    if not window.panel.model_view.settled():  # laid out again: thumbnails at the view's pixels now
        window.panel.wait_until_shown()
        QApplication.processEvents()
    from explorer.files.image_export import save_screenshot

    code = save_screenshot(window, out)  # atomic: a failed write never touches the old PNG
    window.close()
    window.deleteLater()
    QApplication.processEvents()
    return code
