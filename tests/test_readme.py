"""The README as a newcomer reads it (issue 41, item 17): its Plan capture is what the app shows
(scripts/capture_screens.py writes both it and docs/screens/; one that drifts from the app fails here), its
set-up leaves a shell the bare `tui-planner` commands run in, and its example of a GPU nobody measured is a
cell nobody measured in the shipped database."""

from __future__ import annotations

import difflib
import importlib.util
import shlex

from conftest import ROOT
from engine.data.paths import shipped_db
from engine.data.store import Store
from tui_planner.cli import main

README = (ROOT / "README.md").read_text()


def _script():
    spec = importlib.util.spec_from_file_location("capture_screens", ROOT / "scripts" / "capture_screens.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_the_readmes_plan_capture_is_what_the_app_shows():
    script = _script()
    day, in_readme = script.readme_blocks()["plan"]
    kept = (ROOT / "docs" / "screens" / "plan.txt").read_text()
    assert in_readme == kept, "README.md's Plan capture is not docs/screens/plan.txt: python3 scripts/capture_screens.py"
    now = script.capture(["plan"], day)["plan"]  # the real app at 80x24, prices judged on the capture's day
    assert now == kept, "".join(difflib.unified_diff(kept.splitlines(True), now.splitlines(True), "docs/screens/plan.txt",
                                                     "the app now")) + "\nrun: python3 scripts/capture_screens.py"


def test_the_setup_leaves_a_shell_the_commands_run_in():
    setup = README[README.index("## Set up"):README.index("## A one-minute tour")]
    first = next(line for line in setup.splitlines() if line.startswith("python3 -m venv"))
    assert ". .venv/bin/activate &&" in first and first.endswith("&& tui-planner")
    commands = README[README.index("## Commands"):]
    assert "\ntui-planner " in commands  # the bare commands that shell runs


def test_the_readmes_gpu_nobody_measured_is_a_cell_nobody_measured(capsys):
    line = next(line for line in README.splitlines() if "tui-planner predict" in line and "nobody measured" in line)
    argv = shlex.split(line.split("#")[0])[1:]
    flags = dict(zip(argv[1::2], argv[2::2]))
    with Store.open(shipped_db(), read_only=True) as store:
        measured = store.query("SELECT count(*) AS n FROM trials WHERE source = 'measured' AND model = ? AND gpu = ? "
                               "AND num_gpus * num_nodes = ?", [flags["--model"], flags["--gpu"], int(flags["--num-gpus"])])
    assert measured[0]["n"] == 0, line
    assert main(argv) == 0 and "no measurement of this cell" in " ".join(capsys.readouterr().out.split())
