"""Issue 37's findings outside the store, each reproduced as the attacker or the unlucky user met it, with the
safe outcome asserted: a results file's text never acts on the terminal, a hostile last-plan file never stops
the app, the shipped database is never written, a config no model could have is refused naming its key, and
export, launch.sh and the messages say only what is so. docs/faults.md lists them."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from engine.data.store import Run, Store, Trial
from tui_planner.cli import main

# What a shared results file may carry to a terminal: an OSC 52 clipboard write, a clear-screen, a window
# title, a hyperlink, a NUL, a bell, a carriage return, a C1 CSI, a tab.
OSC52 = "\x1b]52;c;dG91Y2ggcHduZWQ=\x07"
CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
HOSTILE = f"a{OSC52}b{CLEAR}c{TITLE}d{LINK}e\x00f\rg\x9b31mh\ti\nj"
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _raw_controls(text: str, allowed: str = "") -> set[str]:
    """The control characters in `text` besides line ends (and `allowed`)."""
    return {c for c in CONTROL.findall(text.replace("\r\n", "\n")) if c != "\n" and c not in allowed}


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory) -> Path:
    """A results file whose every text column a person might see carries terminal escapes."""
    db = tmp_path_factory.mktemp("hostile") / "shared.duckdb"
    with Store.open(db, read_only=False) as store:
        run = Run(source="measured", host=HOSTILE, status="done")
        store.add_run(run)
        store.add_trials([
            Trial(model="pythia-1b", gpu="h100", num_gpus=1, feasible=False, source="measured", run_id=run.run_id,
                  key=HOSTILE, failure_kind=HOSTILE, failure_message=HOSTILE, attention=HOSTILE, kernel=HOSTILE,
                  trial_id=f"t{HOSTILE}"),
            Trial(model=HOSTILE, gpu=HOSTILE, num_gpus=1, feasible=True, source="measured", run_id=run.run_id,
                  days=5.0, mfu=0.3, sharding=HOSTILE, config_source=HOSTILE, provenance=HOSTILE),
        ])
    return db


# --- item 3: no raw control character from a results file reaches a terminal or a CSV ---------------


@pytest.mark.parametrize("form", ["csv", "json", "table"])
def test_results_never_write_a_raw_control_character_from_the_file(hostile_db, capsys, monkeypatch, form):
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["results", "--db", str(hostile_db), "--format", form]) == 0
    out = capsys.readouterr().out
    assert not _raw_controls(out), f"raw control characters in the {form} output: {_raw_controls(out)}"
    if form == "csv":  # a file for a program keeps the data, each control character written out visibly
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(out)))
        assert len(rows) == 2
        shown = rows[0]["failure_message"] or rows[1]["failure_message"]
        assert shown == ("a\\x1b]52;c;dG91Y2ggcHduZWQ=\\x07b\\x1b[2J\\x1b[Hc\\x1b]0;pwned\\x07d\\x1b]8;;https://evil"
                         ".example/\\x1b\\click\\x1b]8;;\\x1b\\e\\x00f\\rg\\x9b31mh\\ti\\nj")
    if form == "json":  # JSON escapes them itself: the exact text comes back
        assert HOSTILE in {r["failure_message"] for r in json.loads(out)}
