"""A rotary model's layer without positions (SmolLM3's NoPE layers) says so in the settings."""

from __future__ import annotations

from explorer.state import ExplorerState, Inputs, ModelInfo
from explorer.widgets.settings_panel import SettingsPanel


def _info(pe: str) -> ModelInfo:
    return ModelInfo(name="m", model_type="smollm3", num_layers=3, heads=4, kv_heads=2, d_model=32, d_k=8,
                     default_mask="causal", pe=pe, device="cpu")  # fmt: skip


def test_positions_of_a_nope_layer_are_unticked_and_named(qtbot):
    state = ExplorerState(Inputs(model="m", layer=1))
    panel = SettingsPanel(state, "cpu")
    qtbot.addWidget(panel)
    state.model_info = _info("none")
    state.model_info_changed.emit(state.model_info)
    assert not panel.pe.isChecked() and panel.pe.text() == "none in this layer (NoPE)"
    state.model_info = _info("rotary")
    state.model_info_changed.emit(state.model_info)
    assert panel.pe.isChecked() and panel.pe.text() == "rotary (rotates q, k)"
