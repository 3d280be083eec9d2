"""One widget per file.

Importing any of them makes pyqtgraph draw its text near black (titles, axes, ticks, legends, colour
bars), as the token labels: its default grey read poorly on white. And no axis ever rescales its numbers
by an SI prefix: a rollout's colour bar read 0–700 "(×0.001)" beside bars reading 0–0.7 (pyqtgraph turns
the prefix on in every AxisItem's constructor and has no option for it, so the constructor is wrapped).
"""

import pyqtgraph as pg

from explorer.widgets.colormaps import TEXT_RGB

pg.setConfigOption("foreground", TEXT_RGB)

_axis_init = pg.AxisItem.__init__


def _plain_axis_init(self, *args, **kwargs) -> None:
    _axis_init(self, *args, **kwargs)
    self.enableAutoSIPrefix(False)


if not getattr(pg.AxisItem.__init__, "plain", False):  # once, however often the package is reloaded
    _plain_axis_init.plain = True
    pg.AxisItem.__init__ = _plain_axis_init
