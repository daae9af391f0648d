"""The micro-batch cap (`predict --max-micro-batch N`, `bench --max-micro-batch N`): a prediction at the largest
micro-batch that fits but at most N, keyed apart from the uncapped one (`|max-mb-N`, as a measured trial under
the same cap is keyed), through the predictor, the stored row, the CLI and the guided search. No GPU, no trial."""

import pytest

from engine import predict
from engine.bench.sweep import SweepRequest, trial_key
from engine.data import space
from engine.data.paths import shipped_db
from engine.data.presets import load_presets
from engine.data.store import Store, evidence_rows
from engine.predict import memory
from engine.predict.stored import predicted_key, trial_of
from tui_planner.cli import main


@pytest.fixture(scope="module")
def presets():
    return load_presets(include_user=False)


@pytest.fixture(scope="module")
def rows(presets):
    """The shipped database's measured and paper rows: what `predict` predicts from (no --db of one's own)."""
    with Store.open(shipped_db(), read_only=True, create=False, presets=presets) as s:
        return evidence_rows([s])


@pytest.fixture(scope="module")
def pythia_1b(rows, presets):
    return predict.build_predictor(rows, presets, for_model="pythia-1b")


def _per_gpu(presets, model_id, n=1):
    return presets.model(model_id).training.batch_size // n


# --- the predictor ------------------------------------------------------------------------------------


def test_a_cap_below_the_fit_lowers_the_micro_batch_and_says_so(pythia_1b, presets):
    free = pythia_1b.predict("pythia-1b", "h100", 1, space.FREE_LUNCH)
    assert free.feasible and free.micro_batch > 2 and free.max_micro_batch is None
    assert not any("as asked" in line for line in free.lines)
    per_gpu = _per_gpu(presets, "pythia-1b")
    assert free.micro_batch * free.grad_accum == per_gpu

    capped = pythia_1b.predict("pythia-1b", "h100", 1, space.FREE_LUNCH, max_micro_batch=2)
    assert capped.feasible and capped.days is not None
    assert capped.micro_batch == 2 and capped.max_micro_batch == 2
    assert capped.grad_accum == per_gpu // 2 == free.grad_accum * free.micro_batch // 2  # the same batch a GPU
    assert f"micro-batch 2: at most 2 as asked ({free.micro_batch} would fit)" in capped.lines
    # its memory is the capped micro-batch's, less than at the one that fits
    assert capped.memory_need_gb < free.memory_need_gb
    assert any(line.startswith("memory at micro-batch 2:") for line in capped.lines)


def test_a_cap_between_candidates_takes_the_largest_candidate_under_it(pythia_1b, presets):
    assert 3 not in memory.micro_batches(presets.model("pythia-1b"), 1)  # powers of two
    p = pythia_1b.predict("pythia-1b", "h100", 1, space.FREE_LUNCH, max_micro_batch=3)
    assert p.micro_batch == 2 and p.max_micro_batch == 3
    assert any(line.startswith("micro-batch 2: at most 3 as asked") for line in p.lines)


def test_a_cap_at_or_above_the_fit_changes_nothing_but_the_record(pythia_1b):
    free = pythia_1b.predict("pythia-1b", "h100", 1, space.FREE_LUNCH)
    for cap in (free.micro_batch, free.micro_batch * 4):
        p = pythia_1b.predict("pythia-1b", "h100", 1, space.FREE_LUNCH, max_micro_batch=cap)
        assert (p.micro_batch, p.grad_accum, p.days) == (free.micro_batch, free.grad_accum, free.days)
        assert p.max_micro_batch == cap
        assert not any("as asked" in line for line in p.lines)


def test_a_whole_cell_is_predicted_under_the_cap(pythia_1b):
    preds = pythia_1b.predict_cell("pythia-1b", "h100", 1, max_micro_batch=2)
    feasible = [p for p in preds if p.feasible]
    assert feasible and all(p.max_micro_batch == 2 for p in preds)
    assert all(1 <= p.micro_batch <= 2 for p in feasible)
    assert any(p.micro_batch == 2 for p in feasible)


# --- the stored row's key -----------------------------------------------------------------------------


def test_a_capped_prediction_is_keyed_apart_as_the_capped_trial_is(pythia_1b, presets):
    assert predicted_key("pythia-1b", "h100", 1, "free-lunch") == "pythia-1b|h100|1|1|free-lunch|predicted"
    assert (predicted_key("pythia-1b", "h100", 1, "free-lunch", max_micro_batch=2)
            == "pythia-1b|h100|1|1|free-lunch|predicted|max-mb-2")
    # 8 GPUs over 2 nodes and a network: GPUs a node, then nodes; the network before the cap
    assert (predicted_key("pythia-1b", "h100", 8, "fsdp3", "ib", 2, 4)
            == "pythia-1b|h100|4|2|fsdp3|predicted|ib|max-mb-4")
    # the measured trial under `bench --max-micro-batch 2` ends the same way
    measured = trial_key(SweepRequest(model="pythia-1b", max_micro_batch=2), "h100", space.FREE_LUNCH)
    assert measured == "pythia-1b|h100|1|1|free-lunch|cuda|max-mb-2"
    assert trial_key(SweepRequest(model="pythia-1b"), "h100", space.FREE_LUNCH) == "pythia-1b|h100|1|1|free-lunch|cuda"

    model, gpu = presets.model("pythia-1b"), presets.gpu("h100")
    capped = pythia_1b.predict("pythia-1b", "h100", 1, space.FREE_LUNCH, max_micro_batch=2)
    t = trial_of(capped, "run", model, gpu)
    assert t.key == "pythia-1b|h100|1|1|free-lunch|predicted|max-mb-2"
    assert (t.micro_batch, t.grad_accum) == (2, capped.grad_accum)
    free = trial_of(pythia_1b.predict("pythia-1b", "h100", 1, space.FREE_LUNCH), "run", model, gpu)
    assert free.key == "pythia-1b|h100|1|1|free-lunch|predicted" and free.trial_id != t.trial_id


# --- the CLI ------------------------------------------------------------------------------------------


def test_predict_writes_the_capped_row_under_its_own_key(tmp_path, capsys):
    db = tmp_path / "x.duckdb"
    assert main(["predict", "--model", "pythia-1b", "--gpu", "h100", "--methods", "free-lunch",
                 "--max-micro-batch", "2", "--write", "--db", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "at most 2 as asked" in out
    with Store.open(db, read_only=True) as s:
        stored = s.trials(source="predicted")
        commands = [r["command"] for r in s.query("SELECT command FROM runs WHERE source = 'predicted'")]
    assert len(stored) == 1
    row = stored[0]
    assert row["key"].endswith("|max-mb-2") and row["key"] == "pythia-1b|h100|1|1|free-lunch|predicted|max-mb-2"
    assert row["micro_batch"] == 2 and row["grad_accum"] == _per_gpu(load_presets(include_user=False), "pythia-1b") // 2
    assert commands and all("--max-micro-batch 2" in c for c in commands)  # what to run again to reproduce it


def test_predict_refuses_a_cap_below_one(capsys):
    assert main(["predict", "--model", "pythia-1b", "--gpu", "h100", "--methods", "free-lunch",
                 "--max-micro-batch", "0"]) == 2
    err = capsys.readouterr().err
    assert "error" in err and "--max-micro-batch" in err and "at least 1" in err


def test_bench_passes_the_cap_into_its_sweep(tmp_path, monkeypatch, capsys):
    from tui_planner import bench
    from tui_planner.cli import _parser

    args = _parser().parse_args(["bench", "--model", "pythia-160m", "--db", str(tmp_path / "x.duckdb"),
                                 "--max-micro-batch", "4"])
    assert args.max_micro_batch == 4
    assert _parser().parse_args(["bench", "--model", "pythia-160m", "--db", "x"]).max_micro_batch is None

    asked: list[SweepRequest] = []
    monkeypatch.setattr(bench, "run_sweep", lambda req, on_event, stop: asked.append(req))  # no trial runs
    assert main(["bench", "--model", "pythia-160m", "--db", str(tmp_path / "x.duckdb"), "--max-micro-batch", "4"]) == 0
    assert [r.max_micro_batch for r in asked] == [4]
    assert trial_key(asked[0], "h100", space.FREE_LUNCH).endswith("|max-mb-4")

    assert main(["bench", "--model", "pythia-160m", "--db", str(tmp_path / "x.duckdb"), "--max-micro-batch", "0"]) == 2
    assert "--max-micro-batch" in capsys.readouterr().err


# --- the guided search --------------------------------------------------------------------------------


def test_a_capped_search_is_guided_at_the_cap_not_by_the_cells_measurements(rows, presets):
    """Pythia-160M on one H100 is measured in the shipped database (at micro-batches above 2): a new search of
    it capped at 2 is predicted at 2, not guessed at what was measured uncapped."""
    from engine.bench.guide import guide_for

    seen = guide_for(rows, presets, "pythia-160m", "h100", 1, use_measured=True)
    assert seen.guesses["free-lunch"].measured and seen.guesses["free-lunch"].micro_batch > 2  # as it stands
    capped = guide_for(rows, presets, "pythia-160m", "h100", 1, use_measured=True, max_micro_batch=2)
    fl = capped.guesses["free-lunch"]
    assert not fl.measured and fl.feasible and fl.micro_batch == 2
    assert not any(g.measured for g in capped.guesses.values())
    assert all(g.micro_batch <= 2 for g in capped.guesses.values() if g.feasible)
    assert not capped.basis.startswith("measured already")
    assert all(p.max_micro_batch == 2 for p in capped.predictions)
