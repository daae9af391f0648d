"""The guided search (engine/bench/guide.py): predict every combination first, measure the fastest predicted
first, leave unrun what cannot beat the best measured even at its band's low end; its cost kept per sweep."""

import datetime as dt
import json
import re

import duckdb
from engine.bench import events as ev
from engine.bench.guide import Guess, Guide, exhaustive_cells, guide_for, replay
from engine.bench.sweep import SweepRequest, run_sweep
from engine.data import store as store_mod
from engine.data.paths import shipped_db
from engine.data.presets import load_presets
from engine.data.store import SCHEMA_VERSION, Store

from conftest import TINY


def _guide(**days):
    """A guide from label -> (days, low, high), or label -> None for 'predicted not to run'."""
    out = {}
    for label, d in days.items():
        label = label.replace("_offload", "+offload").replace("_", "-")
        out[label] = (Guess(label, False, reason="does not fit") if d is None
                      else Guess(label, True, d[0], d[1], d[2], micro_batch=8))
    return Guide(out, basis="test")


def test_the_guide_orders_by_predicted_time_and_leaves_what_cannot_win():
    g = _guide(naive=(100, 80, 150), free_lunch=(40, 36, 60), ckpt=(48, 39, 70), zero3_offload=None)
    assert g.order(["naive", "zero3+offload", "other", "ckpt", "free-lunch"]) == [
        "free-lunch", "ckpt", "naive", "zero3+offload", "other"]
    assert g.why_not("ckpt", None) is None  # nothing measured yet: measure
    assert g.why_not("ckpt", 40.0, "free-lunch") is None  # its band reaches 39 < 40: it could still win
    why = g.why_not("naive", 40.0, "free-lunch")
    assert why.startswith("cannot win") and "80 days" in why and "40 days measured (free-lunch)" in why
    assert "predicted 100 days (80-150)" in why
    assert g.why_not("zero3+offload", 1.0) is None and g.why_not("other", 1.0) is None  # no band: measure


def test_a_replay_measures_in_order_and_keeps_the_winner_the_band_allows():
    g = _guide(naive=(100, 80, 150), free_lunch=(40, 36, 60), ckpt=(48, 39, 70))
    r = replay(g, {"naive": 101.0, "free-lunch": 41.0, "ckpt": 38.5})
    assert r.measured == ("free-lunch", "ckpt") and set(r.skipped) == {"naive"}
    assert r.winner == r.exhaustive_winner == "ckpt" and r.same_winner
    # A winner outside its band is lost: the rule is only as safe as the bands (what the replay checks).
    r = replay(g, {"naive": 30.0, "free-lunch": 41.0, "ckpt": 45.0})
    assert r.winner == "free-lunch" and r.exhaustive_winner == "naive" and not r.same_winner


def test_the_guided_rule_keeps_every_shipped_exhaustive_winner():
    """The proof on data: every cell of the shipped database measured over the whole search space, predicted
    without its own rows, replayed under the guided rule, keeps the exhaustive search's winner."""
    presets = load_presets()
    with Store.open(shipped_db(), read_only=True, create=False) as s:
        rows = s.query("SELECT * FROM trials WHERE source <> 'predicted'")
    cells = exhaustive_cells(rows, presets)
    assert len(cells) >= 8 and ("pythia-1b", "h100", 1, 1) in cells and ("pythia-2.8b", "h100", 1, 1) in cells
    measured = total = 0
    for (model, gpu, n, nodes), outcomes in cells.items():
        guide = guide_for(rows, presets, model, gpu, n, num_nodes=nodes)
        assert guide is not None, model
        r = replay(guide, outcomes)
        assert r.same_winner, (model, gpu, n, r)
        assert set(r.measured) | set(r.skipped) == set(outcomes)
        measured, total = measured + len(r.measured), total + len(outcomes)
    assert measured < total / 2  # it leaves most combinations unrun


def test_a_guide_is_made_without_the_cells_own_rows():
    presets = load_presets()
    with Store.open(shipped_db(), read_only=True, create=False) as s:
        rows = s.query("SELECT * FROM trials WHERE source <> 'predicted'")
    own = [r for r in rows if (r["model"], r["gpu"], r["num_gpus"]) == ("pythia-1b", "h100", 1)]
    assert own
    a = guide_for(rows, presets, "pythia-1b", "h100", 1)
    b = guide_for([r for r in rows if r not in own], presets, "pythia-1b", "h100", 1)
    assert a.guesses == b.guesses  # the cell's measurements change nothing: they are left out
    assert a.guesses["free-lunch"].feasible and a.guesses["free-lunch"].days_low < a.guesses["free-lunch"].days


def _request(tmp_path, **kw):
    base = dict(model="tiny-neox", methods="all", only=("naive", "free-lunch", "ckpt"), device="cpu",
                presets=(TINY,), timeout_s=240, compile=False, repetitions=3, warmup=1, db=str(tmp_path / "r.duckdb"))
    base.update(kw)
    return SweepRequest(**base)


def test_a_guided_sweep_measures_the_predicted_fastest_first_and_records_what_it_left(tmp_path):
    """On the CPU nothing predicts (no GPU preset), so the sweep is given its guide; the trials are real.
    Free-lunch is predicted fastest; naive's band cannot reach what free-lunch then measures; checkpointing
    could, but free-lunch already runs the whole batch (dominated, no launch)."""
    guide = _guide(naive=(1e6, 5e5, 2e6), free_lunch=(1.0, 0.0, 2.0), ckpt=(2.0, 0.0, 3.0))
    seen = []
    run_sweep(_request(tmp_path, guide=guide), on_event=seen.append)
    started = [e.label for e in seen if isinstance(e, ev.TrialStarted)]
    assert started == ["free-lunch", "ckpt"]  # ckpt: started and found dominated without a launch
    plan = next(e for e in seen if isinstance(e, ev.SearchGuided))
    assert [label for label, _ in plan.predicted] == ["free-lunch", "ckpt", "naive"]
    assert next(e for e in seen if isinstance(e, ev.SweepStarted)).labels == ("free-lunch", "ckpt", "naive")
    finished = {e.label: e for e in seen if isinstance(e, ev.TrialFinished)}
    assert finished["naive"].status == "cannot-win" and "cannot win" in finished["naive"].message
    assert finished["ckpt"].status == "dominated" and finished["free-lunch"].status == "measured"
    with Store.open(tmp_path / "r.duckdb") as s:
        rows = {r["key"].split("|")[4]: r for r in s.trials()}
        run = s.runs()[-1]
    naive = rows["naive"]
    assert naive["source"] == "predicted" and naive["failure_kind"] == "cannot-win" and naive["days"] is None
    assert naive["days_low"] == 5e5 and naive["days_high"] == 2e6
    assert json.loads(naive["provenance"])["guided"]["predicted_days"] == 1e6
    assert "--exhaustive" in naive["failure_message"]
    assert run["search"] == "guided" and run["trials_run"] == 1 and run["trials_skipped"] == 2 and run["wall_s"] > 0

    again = []  # resumed: what it left stays left, nothing is launched
    run_sweep(_request(tmp_path, guide=guide), on_event=again.append)
    assert not [e for e in again if isinstance(e, ev.TrialStarted)]
    assert {e.label for e in again if isinstance(e, ev.TrialSkipped)} == {"free-lunch", "ckpt", "naive"}

    full = []  # the exhaustive search measures what the guided one left
    run_sweep(_request(tmp_path, exhaustive=True), on_event=full.append)
    assert sorted(e.label for e in full if isinstance(e, ev.TrialStarted)) == ["ckpt", "naive"]
    assert not [e for e in full if isinstance(e, ev.SearchGuided)]
    with Store.open(tmp_path / "r.duckdb") as s:
        assert s.runs()[-1]["search"] == "exhaustive" and s.runs()[-1]["trials_run"] == 2
        assert s.runs()[-2]["trials_run"] == 0 and s.runs()[-2]["trials_skipped"] == 0  # a resume decides nothing


def test_an_older_file_gets_what_its_searches_cost(tmp_path):
    path = tmp_path / "v4.duckdb"
    with Store.open(path) as s:
        pass
    con = duckdb.connect(str(path))
    for col in ("search", "wall_s", "trials_run", "trials_skipped"):
        con.execute(f"ALTER TABLE runs DROP COLUMN {col}")
    con.execute("ALTER TABLE trials DROP COLUMN interconnect")  # v6
    for col in ("fused", "fp8", "numerics"):  # v7
        con.execute(f"ALTER TABLE trials DROP COLUMN {col}")
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    t0 = dt.datetime(2026, 11, 23, 4, 0, 0)
    con.execute("INSERT INTO runs (run_id, source, command, started_at, ended_at, status) VALUES "
                "('a', 'measured', 'bench --model pythia-1b --exhaustive', ?, ?, 'done'), "
                "('b', 'measured', 'bench --model pythia-1b', ?, NULL, 'interrupted')",
                [t0, t0 + dt.timedelta(seconds=90), t0])
    con.execute("INSERT INTO trials (trial_id, run_id, model, gpu, num_gpus, feasible, source, duration_s) VALUES "
                "('1', 'a', 'pythia-1b', 'h100', 1, true, 'measured', 40), "
                "('2', 'a', 'pythia-1b', 'h100', 1, true, 'measured', 0), "
                "('3', 'b', 'pythia-1b', 'h100', 1, true, 'measured', 12)")
    con.close()
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 5
        runs = {r["run_id"]: r for r in s.runs()}
    assert (runs["a"]["search"], runs["a"]["wall_s"], runs["a"]["trials_run"], runs["a"]["trials_skipped"]) == (
        "exhaustive", 90, 1, 1)
    assert runs["b"]["search"] == "pruned" and runs["b"]["wall_s"] is None and runs["b"]["trials_run"] == 1
    assert store_mod.MIGRATIONS[5]  # the migration is the SQL every new file runs too


def test_trials_keep_torch_compiles_caches_in_one_folder(tmp_path, monkeypatch):
    from engine.bench.environment import compile_cache_dir, trial_env

    monkeypatch.delenv("TUI_PLANNER_COMPILE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    env = trial_env({})
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "tui-planner" / "compile" / "inductor")
    assert env["TRITON_CACHE_DIR"].startswith(str(compile_cache_dir()))
    assert trial_env({"TORCHINDUCTOR_CACHE_DIR": "/mine"})["TORCHINDUCTOR_CACHE_DIR"] == "/mine"  # the user's wins


def test_bench_help_teaches_the_guided_search():
    import argparse

    from tui_planner import bench

    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    text = " ".join(p.format_help().split())
    assert "By default the search is guided" in text and "band's low end" in text
    assert p.parse_args(["--model", "m"]).exhaustive is False


def test_results_summary_shows_each_search_and_what_it_left_unrun(capsys):
    """The shipped database holds the guided and the exhaustive search of Pythia-1B on one H100
    (2026-11-24): the summary says what each cost and the same winner."""
    from tui_planner.cli import main

    assert main(["results", "--summary", "--model", "pythia-1b", "--gpu", "h100", "--num-gpus", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "guided search:" in out and "1 trial run, 12 left unrun" in out
    assert "exhaustive search:" in out and "13 trials run" in out and "in 4 parts" in out
    # free-lunch, or the loss kernel of liger measured beside it on 2026-11-27 (the same maths, 0.2% apart)
    assert re.search(r"winner (free-lunch|fused) \d+ x \d+ 40\.\d 54% \+0%", out)


def test_a_new_search_of_a_measured_cell_is_guided_by_its_measurement():
    """Issue 39: Pythia-160M on one H100 was predicted at 10.0 days before a search that measured 8.4; the shipped
    database holds the cell. A new search of it starts from what is measured, not from the leave-out prediction."""
    presets = load_presets()
    with Store.open(shipped_db(), read_only=True, create=False) as s:
        rows = s.query("SELECT * FROM trials WHERE source <> 'predicted'")
    own = [r for r in rows if (r["model"], r["gpu"], r["num_gpus"]) == ("pythia-160m", "h100", 1)
           and r["source"] == "measured" and r["feasible"] and r["days"] and r["free_lunch"]
           and not r["activation_checkpointing"] and r["sharding"] == "none" and not r["offloading"]]
    assert own
    blind = guide_for(rows, presets, "pythia-160m", "h100", 1)
    seen = guide_for(rows, presets, "pythia-160m", "h100", 1, use_measured=True)
    fl = seen.guesses["free-lunch"]
    assert fl.measured and not blind.guesses["free-lunch"].measured
    days = sorted(r["days"] for r in own)
    assert days[0] <= fl.days <= days[-1]  # the measured median, not the prediction
    assert abs(fl.days - blind.guesses["free-lunch"].days) > 0.01 * fl.days
    assert fl.days_low < fl.days < fl.days_high and "measured already" in fl.text()
    assert seen.basis.startswith("measured already")
    # a cell nobody measured is guided the same either way
    a = guide_for(rows, presets, "pythia-160m", "h200", 1)
    b = guide_for(rows, presets, "pythia-160m", "h200", 1, use_measured=True)
    assert a.guesses == b.guesses


def test_a_host_staged_search_is_not_guided_by_the_own_links_measurements(tmp_path):
    """Pythia-1B on 4 x H200 is measured over NVLink in the shipped database: a new NVLink search starts from
    those measurements, a host-staged one (no peer access) is predicted, its traffic through host memory
    costed, never guessed at the NVLink times."""
    import shutil

    from engine.bench.sweep import _guide_for, plan

    presets = load_presets()
    db = tmp_path / "mine.duckdb"
    shutil.copy(shipped_db(), db)
    got = {}
    with Store.open(db, read_only=False) as store:
        for staged in (False, True):
            req = SweepRequest(model="pythia-1b", num_gpus=4, device="cuda", db=str(db), no_p2p=staged,
                               only=("fsdp2",))
            specs = plan(req, presets, "h200")
            got[staged] = _guide_for(req, presets, "h200", store, specs, set(), {}, lambda e: None).guesses["fsdp2"]
    assert got[False].measured and not got[True].measured
    assert "predicted" in got[True].text() and got[True].days != got[False].days
