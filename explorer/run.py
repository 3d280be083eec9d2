"""A run as the window holds it: the trace, the request that made it and what was made for it so far.

Qt-free plain data: the worker builds it, the session state shows it, tests read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models.engine.colour_index import StageImage
from models.engine.trace import AttentionTrace


@dataclass(eq=False)
class DisplayTrace:
    """The shown run, as a notebook holds it: ``run`` is the front door's :class:`models.api.Trace` (the
    engine's trace, the request as traced, the layer's parameters, the model that made it; duck-typed
    here, which imports no engine), plus the colour-index images made for it so far (filled in as they
    arrive). Its pictures and numbers are ``models.reads.read.read(run, ReadRequest)``."""

    generation: int
    run: object  # models.api.Trace (.raw, .spec, .params, .engine)
    images: dict[str, StageImage] = field(default_factory=dict)
    worker_ms: float = 0.0  # compute + conversion on the worker, for the status bar
    # A small trace's exact values, read with the result on the worker ({stage: [rows of each head]}): the
    # numbers in the cells are drawn with its heatmaps, in their one paint (explorer.widgets.stage_rows).
    values: dict = field(default_factory=dict)

    @property
    def trace(self) -> AttentionTrace | None:
        return self.run.raw

    @property
    def request(self) -> object:
        """The request that made it: what is on screen never comes from later inputs."""
        return self.run.spec

    @property
    def params(self) -> object:
        """models.reads.params.LayerParams of the traced layer (for the cell inspector), or None."""
        return self.run.params


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
