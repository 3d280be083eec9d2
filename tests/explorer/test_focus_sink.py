"""The query focus lists a learned attention sink's weight without a value row (gpt-oss)."""

import numpy as np

from explorer.widgets.query_focus import contributions_html


def test_the_sink_has_no_value_row():
    weights = np.array([0.5, 0.2, 0.3], dtype=np.float32)  # two keys, then the sink
    html = contributions_html(("a", "b", "sink"), weights, np.zeros(2, np.float32), n_values=2)
    assert "(no value)</td><td><b>sink" in html and "v<sub>2</sub>" not in html
    assert "v<sub>0</sub>" in html and "v<sub>1</sub>" in html
