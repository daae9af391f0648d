"""The headless commands as a user types them."""

import json
import subprocess
import sys

from conftest import ROOT
from tui_planner.cli import main


def test_help_teaches_the_tool():
    out = subprocess.run([sys.executable, "-m", "tui_planner", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0
    for needle in ("presets", "results", "examples:", "implausible", "--presets", "~/.config/tui-planner"):
        assert needle in out.stdout


def test_results_json_rows(capsys):
    assert main(["results", "--model", "pythia-1b", "--gpu", "h100", "--source", "paper-*", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 8
    for key in ("model", "gpu", "num_gpus", "days", "mfu", "source", "plausibility", "free_lunch",
                "activation_checkpointing", "sharding", "offloading", "micro_batch", "grad_accum"):
        assert key in rows[0]
    best = [r for r in rows if r["source"] == "paper-table1" and r["num_gpus"] == 1][0]
    assert best["days"] == 34 and best["plausibility"] == "implausible"


def test_results_csv_and_table(capsys):
    assert main(["results", "--gpu", "a100", "--num-gpus", "8", "--source", "paper-table1", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("model,gpu,num_gpus") and len(lines) == 1 + 9
    assert main(["results", "--model", "pythia-160m", "--gpu", "rtx3090"]) == 0
    out = capsys.readouterr().out
    assert "!!" in out and "impossible" in out


def test_presets_listing(capsys):
    assert main(["presets", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "pythia-6.9b" in data["models"] and data["gpus"]["h100"]["paper_price"]["usd"] == 30000
    assert data["gpus"]["h100"]["form_factor"] == "sxm" and data["systems"]["hgx8"]["gpu_models"] == ["h100"]
    assert data["electricity"]["usd_per_kwh"] > 0 and data["electricity"]["date"]


def test_presets_footer_shows_the_tables_a_price_goes_in(capsys):
    """Issue 41, item 17: the footer's [gpus.ID.price] / [systems.ID.price] were read as markup and vanished
    ('or  /  in a presets file')."""
    assert main(["presets", "--kind", "prices"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "or [gpus.ID.price] / [systems.ID.price] in a presets file" in out


def test_rank_says_above_its_table_why_a_measured_cell_is_not_an_option(capsys, monkeypatch):
    """Issue 41, item 17: one H100 SXM, measured, is no option (no system sold takes one): said above the
    options, not after every price a hundred lines down."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["rank", "--model", "pythia-1b", "--budget", "50000"]) == 0
    above = " ".join(capsys.readouterr().out.split(" GPUs ")[0].split())  # before the table's header
    assert "measured, not an option (no system sold takes them):" in above
    assert "1 x h100 (measured): h100 goes 4 or 8 to a system" in above


def test_default_prints_a_summary(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "paper-table1" in out and "read-only" in out


def test_db_info_and_migrate(tmp_path, capsys):
    from engine.data.store import Store

    path = tmp_path / "mine.duckdb"
    Store.open(path).close()
    assert main(["db", "migrate", str(path)]) == 0
    assert main(["db", "info", str(path)]) == 0
    from engine.data.store import SCHEMA_VERSION

    assert f"schema v{SCHEMA_VERSION}" in capsys.readouterr().out
    assert main(["results", "--db", str(tmp_path / "missing.duckdb")]) == 2


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = next(line for line in readme.splitlines() if "pytest" in line and line.startswith("python3 -m venv"))
    assert command in ci
