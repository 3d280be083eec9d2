"""What a trace needs to know of the model it came from (:class:`LoadedModel`), so that the
modules building traces (stages, encdec_trace) name no model class and import none: the model
modules import them, never the other way round."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class LoadedModel(Protocol):
    """A loaded model as a trace describes it: :class:`~models.pretrained.model.PretrainedModel`
    and :class:`~models.pretrained.encdec_model.EncoderDecoderModel` are ones."""

    name: str
    path: Path
    arch: Any  # its family's Architecture (or EncoderDecoder)
    device_label: str

    @property
    def default_mask(self) -> str: ...
