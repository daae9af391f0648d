"""What a measured search found per cell: the arithmetic and the row choices, on a real DuckDB store."""

import datetime as dt
import json

import pytest

from engine.plan.findings import findings
from engine.data.presets import load_presets
from engine.data.store import Store, Trial
from tui_planner.cli import main

T0 = dt.datetime(2026, 11, 23, 12, 0)


def _m(label, days, n=2, minute=0, gpu="h200", failure=None, suffix="", source="measured", **kw):
    parts = label.split("+")
    naive = label == "naive"
    sharding = next((p for p in parts if p not in ("ckpt", "offload", "free-lunch", "naive")), "none")
    return Trial(
        model="pythia-410m", gpu=gpu, num_gpus=n, source=source, feasible=failure is None or failure == "dominated",
        days=days, mfu=None if days is None else 4.0 / days, micro_batch=16, grad_accum=1024 // (16 * n),
        free_lunch=not naive, activation_checkpointing="ckpt" in parts, sharding=sharding,
        offloading="offload" in parts, failure_kind=failure, key=f"pythia-410m|{gpu}|{n}|1|{label}|cuda{suffix}",
        created_at=T0 + dt.timedelta(minutes=minute), **kw)


@pytest.fixture()
def path(tmp_path):
    p = tmp_path / "found.duckdb"
    with Store.open(p) as s:
        s.add_trials([
            _m("naive", 60.0),
            _m("free-lunch", 20.0),
            _m("zero1", 16.0),                       # the winner: 20% less time than free-lunch
            _m("zero2", 18.0),
            _m("ckpt", 30.0, provenance=json.dumps({"causal_mask": "dense mask"})),  # before the fix
            _m("ckpt+zero3+offload", 50.0),          # the worst
            _m("zero3+offload", None, minute=1, failure="oom"),
            _m("fsdp3", 25.0, minute=1),             # measured first ...
            _m("fsdp3", None, minute=2, failure="failed"),  # ... a later crash does not hide that time
            _m("fsdp2", None, minute=1, failure="failed"),
            _m("fsdp2", None, minute=3, failure="timeout"),  # never measured: its latest failure
            _m("zero1", 1.0, minute=5, suffix="|compile-max-autotune"),  # a variant, not the search
            _m("fsdp3+offload", None, failure="memory", source="predicted"),  # the memory model skipped it
            _m("free-lunch", 9.0, n=1, gpu="h100"),
            Trial(model="pythia-410m", gpu="h100", num_gpus=2, source="paper-table1", feasible=True, days=13.0,
                  free_lunch=True, activation_checkpointing=None, sharding="zero1", offloading=False,
                  micro_batch=16, grad_accum=32, key="pythia-410m|h100|2|1|paper-table1"),
        ])
    return p


def _cell(path, **kw):
    with Store.open(path, read_only=True) as s:
        cells = findings(s, model="pythia-410m", gpu="h200", num_gpus=2, **kw)
    assert len(cells) == 1
    return cells[0]


def test_winner_median_worst_and_time_saved(path):
    c = _cell(path)
    assert [e.label for e in c.timed] == ["zero1", "zero2", "free-lunch", "fsdp3", "ckpt", "ckpt+zero3+offload"]
    assert c.winner.label == "zero1" and c.best_memory_saving.label == "zero1"
    assert c.time_saved == pytest.approx(1 - 16 / 20)
    assert c.median.label == "free-lunch"          # 3rd of 6: the faster middle one
    assert c.median_days == pytest.approx((20 + 25) / 2)
    assert c.worst.label == "ckpt+zero3+offload"
    assert c.naive.days == 60.0
    assert [e.label for e in c.dense_mask] == ["ckpt"]
    assert {e.label: e.failure_kind for e in c.not_timed} == {
        "zero3+offload": "oom", "fsdp2": "timeout", "fsdp3+offload": "memory"}
    assert c.space_size == 22 and len(c.never_tried) == 22 - 9 and "ckpt+zero1" in c.never_tried
    assert c.paper is None                          # the paper has no H200 cell


def test_slower_memory_saving_and_a_free_lunch_that_does_not_fit(tmp_path):
    p = tmp_path / "x.duckdb"
    with Store.open(p) as s:
        s.add_trials([_m("free-lunch", 10.0), _m("ckpt", 15.0)])
    c = _cell(p)
    assert c.winner.label == "free-lunch" and c.time_saved == pytest.approx(-0.5)
    with Store.open(p) as s:
        s.add_trials([_m("free-lunch", None, minute=9, failure="oom")])  # re-measured: now out of memory
    c = _cell(p)
    assert c.free_lunch.failure_kind == "oom" and c.time_saved is None and c.winner.label == "ckpt"


def test_the_papers_pick_on_another_gpu(path):
    assert _cell(path, paper_gpu="a100").paper is None  # the paper has no such cell here
    named = _cell(path, paper_gpu="h100")
    c = _cell(path, presets=load_presets())  # the H200 is a Hopper like the H100: its paper cell by default
    assert c.paper == named.paper and c.paper.gpu == "h100"
    assert c.paper.days == 13.0 and c.paper.label == "ckpt?+zero1"
    assert c.paper.matches("zero1") and c.paper.matches("ckpt+zero1")   # checkpointing unread: either
    assert not c.paper.matches("zero2") and not c.paper.matches("zero1+offload")
    assert c.paper_pick_measured.label == "zero1"
    assert c.winner_agrees is True and c.as_dict()["paper"]["winner_agrees"] is True


@pytest.mark.parametrize("paper, why", [
    (dict(days=None, sharding=None, activation_checkpointing=None, offloading=None, feasible=False,
          failure_kind="infeasible"), "could not train it"),
    (dict(days=13.0, sharding=None), "cannot be read"),
    (dict(days=13.0, sharding="fsdp2"), "was not measured here"),
])
def test_no_agreement_claimed_without_a_pick_to_compare(tmp_path, capsys, paper, why):
    p = tmp_path / "p.duckdb"
    row = dict(model="pythia-410m", gpu="h100", num_gpus=2, source="paper-table1", feasible=True, free_lunch=True,
               activation_checkpointing=False, sharding="zero1", offloading=False,
               key="pythia-410m|h100|2|1|paper-table1")
    with Store.open(p) as s:
        s.add_trials([_m("free-lunch", 20.0), _m("zero1", 16.0), Trial(**{**row, **paper})])
    c = _cell(p, paper_gpu="h100")
    assert c.winner_agrees is None and c.paper_pick_measured is None
    assert main(["results", "--db", str(p), "--summary", "--paper-gpu", "h100"]) == 0
    out = capsys.readouterr().out
    assert why in out and "agrees" not in out and "differs" not in out


def test_summary_command(path, capsys):
    assert main(["results", "--db", str(path), "--summary", "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "pythia-410m on 2 x h200: 6 of 22 combinations timed" in out
    assert "-20% time vs free-lunch" in out
    assert "agrees with the paper's pick on h100" in out
    assert "zero3+offload (oom)" in out and "fsdp2 (timeout)" in out and "fsdp3+offload (memory)" in out
    assert "not tried:" in out and max(len(line) for line in out.splitlines()) <= 80
    assert "1 timed with a dense causal mask" in out  # (ckpt is 5th of 6: not a row of its own)
    assert main(["results", "--db", str(path), "--gpu", "h200"]) == 0  # the plain table marks it too
    out = capsys.readouterr().out
    assert "30.0†" in out and "16.0†" not in out and "dense causal mask" in out
    assert main(["results", "--db", str(path), "--summary", "--format", "json"]) == 0
    cells = {(c["gpu"], c["num_gpus"]): c for c in json.loads(capsys.readouterr().out)}
    assert set(cells) == {("h200", 2), ("h100", 1)}
    assert cells[("h200", 2)]["worst"]["label"] == "ckpt+zero3+offload"


def test_host_staged_rows_are_a_cell_of_their_own(path, capsys):
    """A machine without peer access (NCCL_P2P_DISABLE=1, keys ending '|host-staged') is what many PIs buy: its
    winner is not the NVLink cell's, its search is not listed under that cell, and the paper's pick (measured on
    machines with their own links) is not compared with it."""
    from engine.data.store import Run

    with Store.open(path) as s:
        run = Run(source="measured", command="bench --model pythia-410m --gpus 2 --no-p2p --only fsdp2 zero1",
                  search="guided", status="done", started_at=T0, wall_s=120.0)
        s.add_run(run)
        s.add_trials([_m("zero1", 15.0, suffix="|host-staged", interconnect="host-staged", run_id=run.run_id),
                      _m("fsdp2", 21.0, suffix="|host-staged", interconnect="host-staged", run_id=run.run_id)])
    with Store.open(path, read_only=True) as s:
        cells = {c.link: c for c in findings(s, model="pythia-410m", gpu="h200", num_gpus=2, paper_gpu="h100")}
    assert set(cells) == {"", "host-staged"}
    own, staged = cells[""], cells["host-staged"]
    assert own.winner.label == "zero1" and own.winner.days == 16.0  # the NVLink rows alone
    assert staged.winner.label == "zero1" and staged.winner.days == 15.0 and len(staged.timed) == 2
    assert staged.paper is None and own.paper is not None
    assert [x.started_at for x in staged.searches] == [T0]
    assert all(x.started_at != T0 for x in own.searches)  # the host-staged run is not the own cell's search
    assert main(["results", "--db", str(path), "--summary", "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "pythia-410m on 2 x h200, host-staged (no P2P): 2 of 22 combinations timed" in out
    assert "pythia-410m on 2 x h200: 6 of 22 combinations timed" in out
    assert main(["results", "--db", str(path), "--summary", "--format", "json"]) == 0
    links = {(c["gpu"], c["num_gpus"], c["link"]) for c in json.loads(capsys.readouterr().out)}
    assert ("h200", 2, "host-staged") in links and ("h200", 2, "own") in links


def test_summary_refuses_what_it_cannot_do(path, capsys):
    assert main(["results", "--db", str(path), "--summary", "--paper-gpu", "h900"]) == 2
    assert "h900" in capsys.readouterr().err
    assert main(["results", "--db", str(path), "--paper-gpu", "h100"]) == 2
    assert "--summary" in capsys.readouterr().err
    assert main(["results", "--db", str(path), "--summary", "--format", "csv"]) == 2


def test_the_nearest_gpu_of_the_same_architecture_comes_first():
    from engine.plan.findings import _same_architecture

    presets = load_presets()
    assert _same_architecture(presets, "a40")[0] == "a6000"  # the 48 GB twin, not the 24 GB RTX 3090
    assert _same_architecture(presets, "h200")[0] == "h100"  # the SXM module's twin, then the NVL and PCIe cards
    assert set(_same_architecture(presets, "h200")[1:]) == {"h200nvl", "h100nvl", "h100pcie"}
