"""Sessions the documentation's screenshots open (``make screenshots``): a pinned run to compare,
and an edited run shown as edited − original. ``python docs/screenshot_sessions.py OUT_FOLDER``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models.edits import Edit  # noqa: E402
from models.session import Run, Session, save_session  # noqa: E402

SENTENCE = "The animal didn't cross the street because it was too tired."
TOY = {"--sentence": SENTENCE, "--heads": 2, "--d-model": 16, "--mask": "causal"}


def main(folder: str) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    pinned = Run(dict(TOY, **{"--seed": 0}))
    current = Run(dict(TOY, **{"--seed": 0, "--temperature": 0.5}))  # sharper: what a temperature does
    save_session(out / "compare.zip", Session(current, stage="weights", head=0, pinned=pinned))
    edited = Session(Run(dict(TOY)), stage="weights", head=0, query=6, edits=(Edit("q", (0, 6, 0), 4.0),),
                     difference=True)  # fmt: skip
    save_session(out / "edit.zip", edited)


if __name__ == "__main__":
    main(sys.argv[1])
