"""The head atlas in a window: a sortable table of every head, the layers × heads map coloured by any
column, a scatter of any two columns (one point per head, labelled ``L3 H7``), and a comparison of
two atlases (a difference table and map). Computed off the GUI thread (:class:`AtlasWorker`) on a
corpus file or the detectors' built-in probes, or read from a folder ``main.py atlas`` wrote.
A double click on a head (table row, map cell or scatter point) opens the text where that head
scores highest on the chosen metric in the stepper (``head_chosen``).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import signals_blocked

from explorer.engine.atlas_worker import AtlasWorker
from explorer.panes import AtlasForm, AtlasPane, AtlasShown
from explorer.widgets.atlas_table import AtlasTableModel, head_label
from explorer.widgets.cell_axis import CellAxis, head_cells, layer_cells
from explorer.widgets.colormaps import colour_map
from explorer.widgets.point_labels import PointLabels
from explorer.widgets.scale_bar import blank_axes
from explorer.widgets.window_size import bring_forward, open_sized
from models.config import InputError
from models.reads.atlas import Atlas, read_atlas


def metric_of(column: str) -> str:
    """The per-text metric behind a column (``entropy_mean`` -> ``entropy``), or the column itself."""
    return column.rsplit("_", 1)[0] if column.endswith(("_mean", "_sd")) else column


class AtlasPanel(QWidget):
    head_chosen = Signal(int, int, str)  # layer, head, the text where it scores highest ("" if none)

    def __init__(self, parent: QWidget | None = None, model_loader=None, pane: AtlasPane | None = None):
        super().__init__(parent)
        self.pane = pane if pane is not None else AtlasPane()  # the state's, opened from the main window
        self.model_loader = model_loader  # () -> PretrainedModel, called on the worker
        self.worker = AtlasWorker(self)
        self.atlas: Atlas | None = None  # the atlas computed or opened
        self.other: Atlas | None = None  # compared with (shown: atlas − other)
        self.status = QLabel(self.pane.status)  # follows the pane's status (set_status)
        self.status.setWordWrap(True)
        buttons = QHBoxLayout()
        for text, slot in (("Run on a file…", self.ask_corpus), ("Run on the probes", lambda: self.run(None)),
                           ("Open atlas…", self.ask_open), ("Compare with…", self.ask_compare),
                           ("Stop", self.worker.cancel)):  # fmt: skip
            b = QPushButton(text)
            b.clicked.connect(slot)
            buttons.addWidget(b)
        self.run_buttons = [buttons.itemAt(i).widget() for i in range(2)]
        buttons.addStretch(1)
        self.colour_combo, self.x_combo, self.y_combo = QComboBox(), QComboBox(), QComboBox()
        choose = QHBoxLayout()
        for label, combo in (("Colour by", self.colour_combo), ("Scatter x", self.x_combo), ("y", self.y_combo)):
            # as wide as their longest column name, filled after the first show ("entropy_", "inductior")
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
            choose.addWidget(QLabel(label))
            choose.addWidget(combo)
        # The combos write the pane's form (explorer/panes.py: AtlasForm) and follow it (_follow_form).
        self.colour_combo.currentTextChanged.connect(lambda t: t and self.pane.update_form(colour=t))
        self.x_combo.currentTextChanged.connect(lambda t: t and self.pane.update_form(x=t))
        self.y_combo.currentTextChanged.connect(lambda t: t and self.pane.update_form(y=t))
        choose.addStretch(1)
        self.table_model = AtlasTableModel(self)
        self.table = QTableView()
        self.table.setModel(self.table_model)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.verticalHeader().hide()
        self.table.doubleClicked.connect(lambda i: self.choose(*self.table_model.heads[i.row()]))
        self.map_plot = pg.PlotWidget(background="w", axisItems={s: CellAxis(s) for s in ("left", "bottom")})
        self.map_image = pg.ImageItem(axisOrder="row-major")
        self.map_plot.addItem(self.map_image)
        self.map_plot.invertY(True)
        self.map_plot.setLabel("left", "layer")
        self.map_plot.setLabel("bottom", "head")
        self.map_plot.setMouseEnabled(False, False)
        self.colour_bar = pg.ColorBarItem(colorMap=colour_map(True), interactive=False)
        self.colour_bar.setImageItem(self.map_image, insert_in=self.map_plot.getPlotItem())
        self.map_plot.scene().sigMouseClicked.connect(self._map_clicked)
        self.scatter_plot = pg.PlotWidget(background="w")
        self.scatter = pg.ScatterPlotItem(size=8, brush=pg.mkBrush(40, 90, 160, 180), pen=None, hoverable=True)
        self.scatter.sigClicked.connect(lambda _item, points, _ev: points and self.choose(*points[0].data()))
        self.scatter_plot.addItem(self.scatter)
        self.labels = PointLabels(self.scatter_plot)  # the scatter's "L3 H7" labels, placed apart
        views = QTabWidget()
        views.addTab(self.map_plot, "Layers × heads")
        views.addTab(self.scatter_plot, "Scatter")
        self.views = views
        views.currentChanged.connect(lambda i: self.pane.update_form(scatter=i == 1))
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.table)
        splitter.addWidget(views)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addLayout(choose)
        layout.addWidget(splitter, 1)
        self.worker.progress.connect(self._on_progress)
        self.worker.finished.connect(self._on_finished)
        self.worker.failed.connect(lambda g, m: g == self.worker.generation and self.pane.set_status(f"error: {m}"))
        self._follow_form(self.pane.form)
        self.pane.form_changed.connect(self._follow_form)
        self.pane.status_changed.connect(self._show_status)
        blank_axes(self, True)  # no numbers on the empty map and scatter before an atlas (read −0.5 … 0.5)

    def _follow_form(self, form: AtlasForm) -> None:
        """Show the pane's form: the combos (a column this atlas lacks is not offered: the form takes
        the one shown instead) and the tab in front; the map or the scatter drawn again if they changed."""
        for combo, name in ((self.colour_combo, form.colour), (self.x_combo, form.x), (self.y_combo, form.y)):
            if combo.currentText() != name and combo.findText(name) >= 0:
                with signals_blocked(combo):
                    combo.setCurrentText(name)
        if self.views.currentIndex() != int(form.scatter):
            with signals_blocked(self.views):
                self.views.setCurrentIndex(int(form.scatter))
        shown = self.pane.shown
        if shown is not None:
            if form.colour != shown.colour:
                self._redraw(scatter=False)  # recolouring repaints the map only
            if (form.x, form.y) != (shown.x, shown.y):
                self._redraw_scatter()  # the scatter's labels are rebuilt
        self._take_shown()

    def _take_shown(self) -> None:
        """The form takes the columns the combos show (once an atlas fills them)."""
        texts = {"colour": self.colour_combo.currentText(), "x": self.x_combo.currentText(),
                 "y": self.y_combo.currentText()}  # fmt: skip
        if all(texts.values()):
            self.pane.update_form(**texts)

    def _show_status(self, text: str) -> None:
        self.status.setText(text)

    def disconnect_pane(self) -> None:
        """Stop following the pane (the window is closing; the pane lives on in the state, its status
        back to idle: the work this window did is stopped)."""
        self.pane.form_changed.disconnect(self._follow_form)
        self.pane.status_changed.disconnect(self._show_status)
        self.pane.set_status(self.pane.idle_status)

    # --- running and opening ------------------------------------------------------------------
    def ask_corpus(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Corpus: one text per line", "", "Text (*.txt);;All files (*)")
        if path:
            self.run(path)

    def run(self, corpus: str | None, limit: int | None = None) -> int | None:
        if self.model_loader is None:
            self.pane.set_status("error: the atlas needs a pretrained model: choose one in the main window first")
            return None
        self.pane.update_form(corpus=str(corpus or ""))
        self.pane.set_status(f"Computing the atlas on {corpus or 'the built-in probes'}…")
        return self.worker.submit(self.model_loader, corpus, limit)

    def ask_open(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "An atlas folder (main.py atlas --out)")
        if folder:
            self.open_folder(folder)

    def ask_compare(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "The atlas to compare with")
        if folder:
            self.compare_folder(folder)

    def open_folder(self, folder) -> bool:
        try:
            self.set_atlas(read_atlas(folder))
        except InputError as exc:
            self.pane.set_status(f"error: {exc}")
            return False
        return True

    def compare_folder(self, folder) -> bool:
        if self.atlas is None:
            self.pane.set_status("error: open or compute an atlas first, then compare another with it")
            return False
        try:
            other = read_atlas(folder)
            self.atlas.difference(other)  # refuses different shapes in one line
        except InputError as exc:
            self.pane.set_status(f"error: {exc}")
            return False
        self.other = other
        self._show()
        return True

    def _on_progress(self, generation: int, done: int, total: int) -> None:
        if generation == self.worker.generation:
            self.pane.set_status(f"Computing the atlas: {done}/{total} texts…")

    def _on_finished(self, generation: int, atlas: Atlas) -> None:
        if generation == self.worker.generation:
            self.set_atlas(atlas)

    # --- showing --------------------------------------------------------------------------------
    def set_atlas(self, atlas: Atlas) -> None:
        self.atlas, self.other = atlas, None
        self._show()

    @property
    def shown(self) -> Atlas | None:
        if self.atlas is None or self.other is None:
            return self.atlas
        return self.atlas.difference(self.other)

    def _show(self) -> None:
        blank_axes(self, False)
        shown = self.shown
        corpus = self._corpus(self.atlas)
        what = f"{self.atlas.model}: {self.atlas.layers} layers × {self.atlas.heads} heads over " \
               f"{self.atlas.texts} texts of {corpus}"  # fmt: skip
        if self.other is not None:
            what = (f"Difference: {self.atlas.model} over {self._corpus(self.atlas)} − {self.other.model} over "
                    f"{self._corpus(self.other)} (the map is signed: red higher in the first, blue in the second)")
        self.pane.set_status(what)
        names = [c for c in shown.columns if c != "texts"]
        form, default = self.pane.form, AtlasForm()
        for combo, want, fallback in ((self.colour_combo, form.colour, default.colour),
                                      (self.x_combo, form.x, default.x),
                                      (self.y_combo, form.y, default.y)):  # fmt: skip
            with signals_blocked(combo):
                combo.clear()
                combo.addItems(names)
                combo.setCurrentText(want if want in names else fallback if fallback in names else names[0])
        self.table_model.set_atlas(shown)
        metrics = self.table.fontMetrics()  # widths from the headers (resizeColumnsToContents reads every cell)
        for c in range(self.table_model.columnCount()):
            name = str(self.table_model.headerData(c, Qt.Orientation.Horizontal))
            width = max(metrics.horizontalAdvance(name), metrics.horizontalAdvance("-0.00000"))
            self.table.setColumnWidth(c, width + 24)
        self._redraw()
        self._take_shown()  # the form takes a column this atlas lacks as the one shown

    @staticmethod
    def _corpus(atlas: Atlas) -> str:
        from pathlib import Path

        path = (atlas.manifest.get("corpus") or {}).get("path")
        return Path(path).name if path else "the built-in probes"

    def _redraw_scatter(self) -> None:
        if self.shown is not None:
            self._draw_scatter(self.shown)
        self._record()

    def _record(self) -> None:
        """The state's atlas pane follows what is drawn (explorer/panes.py)."""
        atlas, other = self.atlas, self.other
        name = lambda a: f"{a.model} over {self._corpus(a)}"  # noqa: E731
        self.pane.set_shown(None if atlas is None else AtlasShown(
            name(atlas), name(other) if other is not None else "", self.colour_combo.currentText(),
            self.x_combo.currentText(), self.y_combo.currentText()))  # fmt: skip

    def _redraw(self, scatter: bool = True) -> None:
        shown = self.shown
        if shown is None or self.colour_combo.currentText() not in shown.columns:
            return
        values = shown.columns[self.colour_combo.currentText()]
        finite = values[np.isfinite(values)]
        signed = self.other is not None or (finite.size and finite.min() < 0)
        if finite.size == 0:
            levels = (0.0, 1.0)
        elif signed:
            bound = float(np.abs(finite).max()) or 1.0
            levels = (-bound, bound)
        else:
            levels = (0.0, float(finite.max()) or 1.0)
        self.colour_bar.setColorMap(colour_map(not signed))
        self.map_image.setImage(np.nan_to_num(values, nan=levels[0]), autoLevels=False)
        self.map_image.setRect(-0.5, -0.5, shown.heads, shown.layers)  # integer ticks at cell centres
        self.map_plot.getAxis("left").set_cells(layer_cells(shown.layers, 0))  # no "0.5 layer"
        self.map_plot.getAxis("bottom").set_cells(head_cells(shown.heads, 0))
        self.colour_bar.setLevels(levels)
        self.map_plot.setTitle(self.colour_combo.currentText())
        if scatter:
            self._draw_scatter(shown)
        self._record()

    def _draw_scatter(self, shown: Atlas) -> None:
        x_name, y_name = self.x_combo.currentText(), self.y_combo.currentText()
        if x_name not in shown.columns or y_name not in shown.columns:
            return
        x, y = shown.columns[x_name].ravel(), shown.columns[y_name].ravel()
        ok = np.isfinite(x) & np.isfinite(y)
        layers, heads = np.divmod(np.arange(x.size), shown.heads)
        self.scatter.setData(x[ok], y[ok], data=list(zip(layers[ok].tolist(), heads[ok].tolist(), strict=True)))
        self.labels.set_points(x[ok], y[ok], [head_label(a, b) for a, b in zip(layers[ok], heads[ok], strict=True)])
        self.scatter_plot.setLabel("bottom", x_name)
        self.scatter_plot.setLabel("left", y_name)

    # --- choosing a head --------------------------------------------------------------------------
    def _map_clicked(self, event) -> None:
        if self.atlas is None or not event.double():
            return
        p = self.map_plot.getPlotItem().vb.mapSceneToView(event.scenePos())
        layer, head = round(p.y()), round(p.x())
        if 0 <= layer < self.atlas.layers and 0 <= head < self.atlas.heads:
            self.choose(layer, head)

    def best_text(self, layer: int, head: int) -> str:
        """The text where head ``L H`` scores highest on the colour column's metric ("" if unknown)."""
        if self.atlas is None:
            return ""
        lines = self.atlas.best_line.get(metric_of(self.colour_combo.currentText()))
        if lines is None:
            return ""
        return self.atlas.best_text.get(int(lines[layer, head]), "")

    def choose(self, layer: int, head: int) -> None:
        text = self.best_text(int(layer), int(head))
        self.pane.set_status(f"{head_label(layer, head)}: " + (f"opened its highest-scoring text: {text}" if text
                            else "no text for this column (a detector column: its probes are generated)"))
        self.head_chosen.emit(int(layer), int(head), text)


class AtlasWindow(QMainWindow):
    def __init__(self, parent: QWidget | None = None, model_loader=None, pane: AtlasPane | None = None):
        super().__init__(parent)
        self.setWindowTitle("Head atlas")
        self.panel = AtlasPanel(self, model_loader, pane)
        self.setCentralWidget(self.panel)
        open_sized(self, 1300, 760)

    def closeEvent(self, event):  # noqa: N802 - Qt API
        self.panel.worker.stop()
        self.panel.disconnect_pane()
        super().closeEvent(event)


def open_atlas_window(parent, models, state) -> AtlasWindow:
    """The atlas of the main window's model; a chosen head opens its best text, layer and head."""
    inputs = state.inputs
    loader = (lambda: models.model(inputs.model)) if inputs.uses_model else None
    window = AtlasWindow(parent, loader, state.atlas)

    def open_head(layer: int, head: int, text: str) -> None:
        if text:
            state.update_inputs(sentence=text, layer=layer)
        else:
            state.update_inputs(layer=layer)
        state.set_head(head)
        bring_forward(parent)

    window.panel.head_chosen.connect(open_head)
    window.show()
    return window
