"""The result of one generation: the tokens, each step's next-token choices, every attention row
and the logit lens (computed for the cells read: models.generate.lens). Plain numpy; what the files
(files.py) and the Generate panel show.

Positions ``0..n-1`` are the prompt (``0..prompt_length-1``) then the generated tokens. Every token
has been fed, the last one too, so position p's attention row (over keys ``0..p``) exists for
every layer and head, and step ``s`` (``0..n - prompt_length``) is the next-token distribution
read at position ``prompt_length - 1 + s``: the one that chose token ``prompt_length + s``
(``chosen``), or, for the last step, what would come next.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.generate.lens import LENS_TOP, Lens

__all__ = ["LENS_TOP", "Generation", "Lens", "Step"]


@dataclass(frozen=True)
class Step:
    position: int  # the position whose output this is
    top_ids: tuple[int, ...]  # the most likely next tokens, most likely first
    top_tokens: tuple[str, ...]
    top_probs: tuple[float, ...]  # the model's probabilities (temperature 1, before any filter)
    chosen: int | None  # the token that followed (None after the last token)
    chosen_prob: float | None  # its probability under the model (it may lie outside the top-k)


@dataclass
class Generation:
    model: str
    model_type: str
    num_layers: int
    num_heads: int
    ids: list[int]
    tokens: list[str]
    prompt_length: int
    text: str  # the generated tokens decoded (the prompt not included)
    steps: list[Step]
    rows: list[np.ndarray]  # rows[p]: (L, h, p + 1), position p's attention over keys 0..p
    lens: Lens  # the logit lens, computed for the cells asked (models.generate.lens)
    stopped: str  # "eos", "length" or "max positions"
    settings: dict
    head_source: str  # where the unembedding came from
    device: str = "cpu"
    notices: list[str] = field(default_factory=list)
    elapsed_ms: float = 0.0
    step_ms: list[float] = field(default_factory=list)  # time of each generated token's step
    token_names: dict[int, str] = field(default_factory=dict)  # id -> token, for every id named here
    weights: str = ""  # how the layers were held: "weights resident, 4.9 GB" / "12 of 32 layers read ..."
    sequence_text: str = ""  # prompt and generated tokens decoded, special tokens left out

    @property
    def lens_ids(self) -> np.ndarray:
        """``(L, n)`` int64: the top token after each layer (every cell computed)."""
        return self.lens.whole()[0][..., 0]

    @property
    def lens_prob(self) -> np.ndarray:
        """``(L, n)`` float32: the lens' probability of the sequence's next token (every cell computed)."""
        return self.lens.whole()[2]

    @property
    def lens_top_ids(self) -> np.ndarray:
        """``(L, n, LENS_TOP)`` int64: each cell's most likely tokens."""
        return self.lens.whole()[0]

    @property
    def lens_top_prob(self) -> np.ndarray:
        """``(L, n, LENS_TOP)`` float32: their probabilities."""
        return self.lens.whole()[1]

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def generated(self) -> int:
        return self.n - self.prompt_length

    def attention(self, out: np.ndarray | None = None) -> np.ndarray:
        """``(L, h, n, n)`` float32, zero above the diagonal (written into ``out`` if given)."""
        n = self.n
        full = np.zeros((self.num_layers, self.num_heads, n, n), np.float32) if out is None else out
        for p, row in enumerate(self.rows):
            full[:, :, p, : p + 1] = row
            if out is not None:
                full[:, :, p, p + 1 :] = 0
        return full

    def head_matrix(self, layer: int, head: int, upto: int | None = None) -> np.ndarray:
        """One head's ``(m, m)`` matrix over the first ``m = upto`` positions (default all)."""
        m = self.n if upto is None else upto
        out = np.zeros((m, m), np.float32)
        for p in range(m):
            out[p, : p + 1] = self.rows[p][layer, head]
        return out

    def layer_rows(self, position: int) -> np.ndarray:
        """Position ``position``'s attention row for every layer × head, ``(L, h, position + 1)``."""
        return self.rows[position]

    def sink_share(self) -> np.ndarray:
        """``(n, L, h)``: the weight each position puts on the first token (attention sinks)."""
        return np.stack([row[:, :, 0] for row in self.rows])
