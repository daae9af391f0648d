"""scripts/app_bench_pilot.py on the CPU: the real app's Benchmark screen, driven by its pilot with the keys a
person presses, through a sweep of the smallest tiny model: the first row, pause, resume and the end, each
screen saved, every check passing (issue 38, item 4). The same script runs on a lent 2- or 4-GPU machine."""

from __future__ import annotations

import importlib.util
import json

from conftest import ROOT


def test_the_app_pilot_drives_a_cpu_sweep_through_pause_and_resume_and_its_checks_pass(tmp_path):
    spec = importlib.util.spec_from_file_location("app_bench_pilot", ROOT / "scripts" / "app_bench_pilot.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "app-pilot"
    # naive and free-lunch: the first row lands, p during the second trial, r resumes both from the database
    code = script.main(["--model", "cpu-tiny-roberta", "--methods", "free-lunch", "--no-compile", "--out", str(out),
                        "--sample-s", "1", "--paused-s", "1", "--time-limit", "240"])
    report = json.loads((out / "pilot.json").read_text())
    failed = [c for c in report["checks"] if not c["passed"]]
    assert code == 0 and report["passed"], report["error"] or failed
    assert [c["check"] for c in report["checks"]] == ["gpus", "progress", "pause", "resume", "database", "processes"]
    assert report["form"] == {"model": "cpu-tiny-roberta", "gpus": 1, "methods": "free-lunch", "device": "cpu",
                              "compile": False, "exhaustive": False, "db": str(out / "app.duckdb")}
    assert sorted(p.name for p in out.glob("*.svg")) == [
        "1-start.svg", "2-mid.svg", "3-paused.svg", "4-resumed.svg", "5-end.svg"]
    assert "pausing after this trial" in report["checks"][2]["pausing_line"][0]
    assert sorted(r["key"].split("|")[4] for r in report["rows"] if r["source"] == "measured") == ["free-lunch", "naive"]
    assert [r["status"] for r in report["runs"] if r["source"] == "measured"] == ["stopped", "done"]
