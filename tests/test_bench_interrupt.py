"""`tui-planner bench` as a shell and a job scheduler see it: the commands it prints are quoted (a --db
path with spaces, `$(...)` or brackets copies back as the same path), and SIGTERM (SLURM's scancel) stops
the running trial and ends the command non-zero, saying how to resume, instead of looking finished.

A real sweep of the tiny model on the CPU, in a subprocess, as a person or a batch script runs it.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, TINY
from engine.bench.launcher import descendants
from engine.data.store import Store

ODD_FOLDER = "my runs $(touch pwned) [/]"  # spaces, a command substitution, a closing tag


def bench_argv(db: Path) -> list[str]:
    return ["bench", "--model", "tiny-neox", "--device", "cpu", "--methods", "naive", "--presets", TINY, "--db",
            str(db), "--no-compile", "--repetitions", "3"]


def run_command(words: list[str], **kw) -> subprocess.CompletedProcess:
    """A printed `tui-planner ...` command, run the way a shell would after splitting it."""
    assert words[0] == "tui-planner"
    return subprocess.run([sys.executable, "-m", "tui_planner", *words[1:]], capture_output=True, text=True,
                          cwd=ROOT, timeout=600, **kw)


def printed_command(text: str, after: str) -> list[str]:
    """The command printed after `after` (on its line, or the next), split as a shell splits it."""
    assert after in text, text
    return shlex.split(text.split(after, 1)[1].strip().splitlines()[0])


def test_the_results_command_it_prints_is_quoted(tmp_path):
    folder = tmp_path / ODD_FOLDER
    folder.mkdir(parents=True)  # "[/]" makes two folders: the path reads .../[/]
    db = folder / "r.duckdb"
    out = run_command(["tui-planner", *bench_argv(db)])
    assert out.returncode == 0, out.stderr
    assert "done: 1 measured" in out.stdout
    results = printed_command(out.stdout, "Results: ")
    assert results == ["tui-planner", "results", "--db", str(db), "--model", "tiny-neox"]
    assert not (Path(ROOT) / "pwned").exists() and not (folder / "pwned").exists()
    shown = run_command(results)  # and it runs: the path reached the command whole
    assert shown.returncode == 0 and "tiny-neox" in shown.stdout and "1 trials" in shown.stdout
    with Store.open(db, read_only=True) as s:
        assert [r["status"] for r in s.runs()] == ["done"]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_sigterm_stops_the_trial_exits_143_and_says_how_to_resume(tmp_path):
    db = tmp_path / "my runs" / "r.duckdb"
    db.parent.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "tui_planner", *bench_argv(db)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        trials: list[int] = []
        end = time.time() + 120
        while not trials and time.time() < end and proc.poll() is None:
            time.sleep(0.1)
            trials = [p for p in descendants(proc.pid) if "engine.bench.trial" in _cmdline(p)]
        assert trials, "no trial process started"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, out, err)
    assert "stopped" in out and "interrupted (SIGTERM)" in err and "to resume" in err, (out, err)
    for pid in trials:  # the running trial was killed with the sweep, not left behind
        assert not Path(f"/proc/{pid}").exists() or "engine.bench.trial" not in _cmdline(pid)
    with Store.open(db, read_only=True) as s:
        assert [r["status"] for r in s.runs()] == ["stopped"] and not s.trials(feasible=True)
    resume = printed_command(err, "run the same command again:")
    assert resume == ["tui-planner", *bench_argv(db)]
    again = run_command(resume)
    assert again.returncode == 0, again.stderr
    with Store.open(db, read_only=True) as s:
        assert len(s.trials(feasible=True)) == 1
