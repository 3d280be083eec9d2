"""docs/hardening.md's matrix, output × hostile case, made from the tests' own lists (issue 36).

The rows are the lists the hostile tests run: every command's output (tests/models/command_outputs.py,
checked against main.py's commands) and every screenshot (tests/explorer/screenshot_outputs.py,
checked against the window's parser there). Each column is a hostile case; a cell names the test
that runs that case on that output, read from the test's parameter list, or "—" with the reason
the case does not apply. A new output joins every list at once; an output a case does not run,
or a cell the page says otherwise, fails here. ``python tests/models/test_hardening_matrix.py``
writes the table into the page."""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "explorer"))  # the screenshots' list and test

import test_command_hostile as command_hostile  # noqa: E402
import test_full_disk as full_disk  # noqa: E402
import test_screenshot_hostile as screenshot_hostile  # noqa: E402
import test_stdout_fails as stdout_fails  # noqa: E402
import test_writer_signals as writer_signals  # noqa: E402
from command_outputs import COMMAND_OUTPUTS, PRINTS  # noqa: E402
from screenshot_outputs import SCREENSHOT_OUTPUTS  # noqa: E402

DOC = ROOT / "docs" / "hardening.md"
BEGIN = "<!-- the matrix: written by tests/models/test_hardening_matrix.py -->"
END = "<!-- end of the matrix -->"
COLUMNS = ("full disk", "signals", "overflowing weights", "NaN checkpoint", "memory cap", "FIFO", "stdout full",
           "stdout closed")  # fmt: skip
ROWS = (*COMMAND_OUTPUTS, *SCREENSHOT_OUTPUTS)
LABELS = {"export": "`export` (one layer)", "all-layers": "`export --all-layers`",
          "encdec-all-layers": "encoder-decoder `--all-layers`", "explain": "`explain` (prints)",
          "why": "`why` (prints)", "generate": "`generate`", "atlas": "`atlas`", "timeline": "`timeline`",
          "train": "`train`",
          "session": "session (`--save-session`)", "screenshot": "`--screenshot` (the main window)"}  # fmt: skip

# code: (the test, what it runs: {(row, column)})
SIGNALS = {w for w, _ in writer_signals.CASES}
TESTS = {
    "FD": ("tests/models/test_full_disk.py (a 32 kB tmpfs, `unshare -rm`; `--fsize` where none mounts)",
           {(w, "full disk") for w in full_disk.WRITERS}),
    "W": ("tests/models/test_writer_signals.py (`prlimit --fsize`, a full disk's twin: the write fails at the "
          "limit, the old file stays)", {(w, "full disk") for w in writer_signals.SIGNALLED}),
    "S": ("tests/models/test_writer_signals.py (SIGTERM while paused inside the write; SIGHUP and SIGINT too "
          "for both exports)", {(w, "signals") for w in SIGNALS}),
    "C": ("tests/models/test_command_hostile.py (forks of one process: `prlimit --as` with 1 GiB sparse "
          "inputs, FIFOs, q and k × 1e20, one NaN in a checkpoint or `--weights`)", set(command_hostile.RUNS)),
    "V": ("tests/explorer/test_screenshot_hostile.py (forks of one process: a full tmpfs, SIGTERM inside the "
          "write, `--as`, FIFOs, q and k × 1e20, one NaN in a checkpoint)",
          {(o, {"signal": "signals"}.get(c, c)) for o, c in screenshot_hostile.RUNS}),
    "O": ("tests/models/test_stdout_fails.py (forks of one process: stdout `/dev/full`, one line, exit 2; a "
          "pipe whose reader has gone, a quiet exit 141)", set(stdout_fails.RUNS)),
}  # fmt: skip
NOT_APPLICABLE = {
    **{(o, c): "print and write no file (nothing to fill a disk or interrupt)" for o in PRINTS
       for c in ("full disk", "signals")},
    **{(o, c): "reads no file (it trains from its seed)" for o in command_hostile.READS_NOTHING
       for c in ("overflowing weights", "NaN checkpoint", "FIFO")},
    ("window atlas", "NaN checkpoint"): "holds metrics, not weights: a NaN is an undefined metric, an empty cell",
}  # fmt: skip


# Round 4 (issue 50): the cases beside the outputs, each the test that runs it (file, test function).
BESIDE = {
    "every stage × a long length (16,384 tokens) under a memory cap (2 GB)":
        ("tests/models/test_every_stage_long.py", "test_every_stage_of_16384_tokens_is_drawn_in_2_gb"),
    "a neighbour strip at 16,384 tokens under a memory cap":
        ("tests/models/test_reduce_strips.py", "test_a_neighbour_strip_at_16384_tokens_is_drawn_under_a_memory_cap"),
    "a long stage's bands given back when freed (the window's heap)":
        ("tests/models/test_heap.py", "test_a_pass_over_64_bands_of_16_mib_grows_by_a_few_bands_not_all_of_them"),
    "a long output stage's weights a block of rows at a time":
        ("tests/models/test_long_output_rows.py", "test_a_long_output_stage_asks_a_block_of_rows_weights_at_a_time"),
    "no job left running when the window's process ends":
        ("tests/explorer/test_exit_joins_jobs.py",
         "test_the_exit_waits_for_a_job_still_running_and_processes_events_meanwhile"),
    "`why --row` of 3,000 keys in O(n · d)":
        ("tests/models/test_why_memory.py", "test_a_cell_split_with_its_row_of_3000_keys_never_holds_an_n_by_n_matrix"),
    "a session whose embeddings are too wide, refused from the zip's header":
        ("tests/models/test_headers_first.py",
         "test_a_session_whose_embeddings_are_too_wide_is_refused_from_the_header"),
    "an `.npy` of the wrong width, refused from its header":
        ("tests/models/test_headers_first.py", "test_export_of_a_wide_embeddings_file_is_refused_from_its_header"),
    "stdout full (`/dev/full`) or closed (a reader gone), every output":
        ("tests/models/test_stdout_fails.py", "test_stdout_that_cannot_be_written_is_one_line_or_a_quiet_exit"),
    "`--force` over a tampered manifest":
        ("tests/models/test_force_signatures.py", "test_force_over_a_tampered_manifest_never_removes_the_users_file"),
    "API calls with wrong types":
        ("tests/models/test_api_wrong_types.py", "test_a_hostile_value_in_any_argument_is_a_result_or_one_line"),
}  # fmt: skip


def beside() -> list[str]:
    return ["", "| Case beside the outputs (issue 50) | Test |", "| --- | --- |",
            *(f"| {case} | `{path}::{name}` |" for case, (path, name) in BESIDE.items())]  # fmt: skip


def test_each_case_beside_the_outputs_is_a_test_that_exists():
    missing = [f"{path}::{name}" for path, name in BESIDE.values()
               if f"def {name}(" not in (ROOT / path).read_text(encoding="utf-8")]  # fmt: skip
    assert missing == [], missing


def cell(row: str, column: str) -> str:
    codes = [code for code, (_, cells) in TESTS.items() if (row, column) in cells]
    return " ".join(codes) or ("—" if (row, column) in NOT_APPLICABLE else "")


def label(row: str) -> str:
    return LABELS.get(row, f"`--{row}`".replace("--window ", "--"))


def render() -> str:
    head = ["| Output | " + " | ".join(COLUMNS) + " |", "|" + " --- |" * (len(COLUMNS) + 1)]
    rows = [f"| {label(r)} | " + " | ".join(cell(r, c) for c in COLUMNS) + " |" for r in ROWS]
    legend = [f"- {code}: {what}" for code, (what, _) in TESTS.items()]
    reasons = []
    for why in dict.fromkeys(NOT_APPLICABLE.values()):
        names = dict.fromkeys(label(o).split(" (")[0] for (o, _), w in NOT_APPLICABLE.items() if w == why)
        reasons.append(f"- —: {', '.join(names)} {why}")
    return "\n".join([BEGIN, *head, *rows, "", *legend, *reasons, *beside(), END])


def test_every_output_meets_every_hostile_case():
    empty = [(r, c) for r in ROWS for c in COLUMNS if not cell(r, c)]
    assert empty == [], f"no test runs these: {empty}"
    both = [(r, c) for (r, c) in NOT_APPLICABLE if any((r, c) in cells for _, cells in TESTS.values())]
    assert both == [], f"said not to apply, yet tried: {both}"
    unknown = {cell for _, cells in TESTS.values() for cell in cells} - {(r, c) for r in ROWS for c in COLUMNS}
    assert unknown == set(), f"tests of outputs or cases the matrix does not list: {unknown}"


def test_the_outputs_are_main_pys_commands():
    """Every command of main.py has an output here (export three: one layer, all layers, an
    encoder-decoder's), and the window's session; the commands that write nothing are the ones
    main.py says print."""
    sys.path.insert(0, str(ROOT))
    import main

    commands = {o.split("-")[0] if o != "all-layers" and not o.startswith("encdec") else "export"
                for o in COMMAND_OUTPUTS if o != "session"}  # fmt: skip
    assert commands == set(main.COMMANDS)


def test_the_page_holds_the_matrix_the_tests_run():
    text = DOC.read_text(encoding="utf-8")
    found = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), text, re.S)
    assert found is not None and found.group(0) == render(), "run python tests/models/test_hardening_matrix.py"


if __name__ == "__main__":
    text = DOC.read_text(encoding="utf-8")
    found = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), text, re.S)
    DOC.write_text(text.replace(found.group(0), render()) if found else text + "\n" + render() + "\n", encoding="utf-8")
