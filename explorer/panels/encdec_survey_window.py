"""The whole encoder-decoder model at once: three rows of blocks (encoder, decoder, cross).

Each row is a :class:`SurveyPanel` of its own (layers × heads thumbnails, head metrics, and the
rollout of the square encoder and decoder blocks; its options and status the state's
``survey_rows``: explorer.panes.SurveyRows), fed by
:class:`models.files.encdec_survey.BlockSurvey`; the model loads once, on the first row's thread. A click
on a head opens that block, layer and head in the main window.
"""

from __future__ import annotations

import threading

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMainWindow, QScrollArea, QSplitter, QVBoxLayout, QWidget

from explorer.images.thumbnails import READABLE_SIDE
from explorer.panels.survey_panel import SurveyPanel
from explorer.panes import SurveyRows
from explorer.widgets.window_size import bring_forward, open_sized
from models.files.encdec_survey import BlockSurvey

ROWS = (("encoder", "Encoder self-attention: the source's tokens attend to each other"),
        ("decoder", "Decoder self-attention (causal): each target token attends to the ones before it"),
        ("cross", "Cross-attention: the target's tokens (rows) attend to the source's (columns)"))  # fmt: skip


class EncoderDecoderSurveyWindow(QMainWindow):
    def __init__(self, parent: QWidget | None = None, rows: SurveyRows | None = None):
        """``rows``: the state's panes of the three rows (explorer.panes.SurveyRows); their own when None."""
        super().__init__(parent)
        self.setWindowTitle("Attention Explorer: the whole encoder-decoder model")
        self.panels: dict[str, SurveyPanel] = {}
        splitter = QSplitter(Qt.Orientation.Vertical)
        for block, title in ROWS:
            row = QWidget()
            layout = QVBoxLayout(row)
            layout.setContentsMargins(2, 2, 2, 2)
            header = QLabel(f"<b>{block}</b> · {title}")
            header.setObjectName(f"{block}Header")
            layout.addWidget(header)
            panel = self.panels[block] = SurveyPanel(pane=getattr(rows, block) if rows is not None else None)
            panel.model_view.least_side = READABLE_SIDE  # the rows scroll rather than shrink the thumbnails
            layout.addWidget(panel, 1)
            splitter.addWidget(row)
        splitter.setChildrenCollapsible(False)
        # The rows scroll rather than squeeze their thumbnails or make the window taller than the screen.
        scroll = QScrollArea()
        scroll.setWidget(splitter)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setCentralWidget(scroll)
        open_sized(self, 1300, 900)  # three rows share the height; each thumbnail grid fits its row

    @property
    def busy(self) -> bool:
        return any(p.busy for p in self.panels.values())

    def closeEvent(self, event):  # noqa: N802 - Qt API
        for panel in self.panels.values():
            panel.stop()
            panel.disconnect_pane()  # the state's panes outlive this window
        super().closeEvent(event)


def open_encdec_survey(parent: QWidget | None, models, state) -> EncoderDecoderSurveyWindow:
    """Every layer of every block of the window's model, source and target sentences."""
    inputs = state.inputs
    window = EncoderDecoderSurveyWindow(parent, state.survey_rows)
    lock = threading.Lock()

    def load():
        with lock:  # the first row loads it; the others find it in the runner's cache
            return models.model(inputs.model)

    for block, panel in window.panels.items():

        def open_head(layer: int, head: int, block=block) -> None:
            state.update_inputs(block=block, layer=layer)
            state.set_head(head)
            bring_forward(parent)

        panel.head_chosen.connect(open_head)
        panel.compute(BlockSurvey(load, block, inputs.cross_sentence), inputs.sentence)
    window.show()
    return window
