"""Issue 44 item 8: never a rollout of cross-attention. A BART source and target of one length had one
("R after layer 2", columns labelled with the target's tokens); other lengths were refused. Each
encoder-decoder family of the test zoo, built at random with transformers."""

from __future__ import annotations

import numpy as np
import pytest

from models.files.attention_file import open_attention
from models.files.encdec_survey import BlockSurvey, write_block_layers
from models.pretrained import load_model
from models.reads.survey import Survey, complete

pytest.importorskip("transformers")
from encdec_refs import FAMILIES, TARGET, build  # noqa: E402


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def model(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    build(folder, request.param)
    return load_model(folder, device="cpu")


def test_a_cross_block_of_square_shape_has_no_rollout(model, tmp_path):
    block = BlockSurvey(model, "cross", TARGET)
    queries = block.encode(TARGET)
    keys = block.key_tokens(TARGET)
    assert len(queries.tokens) == len(keys)  # source = target: square cross-attention
    q_enc, weights, _notices = block.layer_weights(TARGET)
    assert weights.shape[-1] == weights.shape[-2]
    survey = complete(Survey(weights, tuple(q_enc.tokens), keys, block.name, cross=block.cross))
    assert not survey.square and survey.rollout is None
    assert np.isfinite(survey.metrics["entropy"]).all()  # the head metrics still are
    for name in ("encoder", "decoder"):  # self-attention: rolled out
        own = BlockSurvey(model, name, TARGET)
        q_enc, weights, _notices = own.layer_weights(TARGET)
        assert complete(Survey(weights, tuple(q_enc.tokens), tuple(q_enc.tokens), own.name, cross=own.cross)).square
    # The cross block's export, opened again (File → Open attention…): no rollout either.
    out, _manifest = write_block_layers(model, TARGET, tmp_path / "cross", mask=None, pad_positions=(),
                                        cross_sentence=TARGET, max_tokens=None, block="cross")  # fmt: skip
    opened = open_attention(out)
    assert opened.cross
    survey = complete(Survey(opened.weights, opened.query_tokens, opened.key_tokens, opened.source,
                             cross=opened.cross))  # fmt: skip
    assert survey.rollout is None
