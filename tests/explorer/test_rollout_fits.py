"""The rollout tab fits its place: its plot titles (one a long sentence) made the plots wider than
the tab in the model view, and the right-hand plots were cut off."""

import numpy as np

from explorer.widgets.rollout_view import RolloutView

TOKENS = ("[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "too",
          "tired", ".", "[SEP]")  # fmt: skip


def test_every_plot_of_the_rollout_fits_a_narrow_tab(qtbot):
    view = RolloutView()
    qtbot.addWidget(view)
    n = len(TOKENS)
    rollout = np.random.default_rng(0).dirichlet(np.ones(n), size=(6, n)).astype(np.float32)
    view.set_rollout(rollout, TOKENS)
    view.resize(500, 690)
    view.show()
    qtbot.waitExposed(view)
    qtbot.wait(50)
    width = view.canvas.viewport().width()
    for plot in (view.map_plot, view.rows_plot, view.bars_plot):
        rect = plot.sceneBoundingRect()
        assert rect.left() >= 0 and rect.right() <= width + 1, (plot, rect, width)


def test_a_space_token_is_named_visibly_in_the_titles(qtbot):
    view = RolloutView()
    qtbot.addWidget(view)
    rollout = np.full((2, 3, 3), 1 / 3, dtype=np.float32)
    view.set_rollout(rollout, ("a", " ", "b"))
    view.choose(1, 1)
    assert "␣" in view.rows_plot.titleLabel.text and "␣" in view.bars_plot.titleLabel.text
