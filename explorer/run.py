"""A run as the window holds it: the trace, the request that made it and what was made for it so far.

Qt-free plain data: the worker builds it, the session state shows it, tests read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer.images.stage_image import StageImage
from models.engine.trace import AttentionTrace


@dataclass(eq=False)
class DisplayTrace:
    """A trace plus the colour-index images made for it so far (filled in as they arrive)."""

    generation: int
    trace: AttentionTrace
    images: dict[str, StageImage] = field(default_factory=dict)
    request: object = None  # the request that made it: what is on screen never comes from later inputs
    params: object = None  # models.reads.params.LayerParams of the traced layer (for the cell inspector), or None
    worker_ms: float = 0.0  # compute + conversion on the worker, for the status bar
    # A small trace's exact values, read with the result on the worker ({stage: [rows of each head]}): the
    # numbers in the cells are drawn with its heatmaps, in their one paint (explorer.widgets.stage_rows).
    values: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class FileRequest:
    """The toy's request while files are open (embeddings, weights, a mask, a session's arrays): the
    form, its edits and the Difference toggle, made a RunSpec by :meth:`resolve` on the worker, which
    reads the files and checks them there (the GUI thread never reads an array file nor runs the
    checks' torch calls; a bad file comes back as the worker's one-line failure)."""

    inputs: object  # explorer.inputs.Inputs
    edits: tuple = ()
    difference: bool = False
    model: str = ""  # the toy engine (files apply to it only)

    def resolve(self):
        """The RunSpec these inputs compute (``Inputs.to_runspec``: the files read now)."""
        return self.inputs.to_runspec().with_edits(self.edits, self.difference)
