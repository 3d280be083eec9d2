"""One widget per file.

Importing any of them makes pyqtgraph draw its text near black (titles, axes, ticks, legends, colour
bars), as the token labels: its default grey read poorly on white."""

import pyqtgraph as pg

from explorer.widgets.colormaps import TEXT_RGB

pg.setConfigOption("foreground", TEXT_RGB)
