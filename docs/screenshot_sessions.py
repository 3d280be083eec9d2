"""Sessions the documentation's screenshots open (``make screenshots``): a pinned run to compare,
and an edited run shown as edited − original. ``python docs/screenshot_sessions.py OUT_FOLDER``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models.engine.edits import Edit  # noqa: E402
from models.files.session import Session, save_session  # noqa: E402
from models.runspec import RunSpec  # noqa: E402

SENTENCE = "The animal didn't cross the street because it was too tired."
TOY = RunSpec(sentence=SENTENCE, heads=2, d_model=16, mask="causal")


def main(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    pinned = TOY.replace(seed=0)
    current = TOY.replace(seed=0, temperature=0.5)  # sharper: what a temperature does
    save_session(out / "compare.zip", Session(current, stage="weights", head=0, pinned=pinned))
    edited = Session(TOY.with_edits((Edit("q", (0, 6, 0), 4.0),), difference=True), stage="weights", head=0,
                     query=6)  # fmt: skip
    save_session(out / "edit.zip", edited)


if __name__ == "__main__":
    main(sys.argv[1])
