"""`bench --step-up`: the micro-batch search runs uncompiled (the paper's method); a compiled setting is measured
once more at twice that micro-batch, compiled, where its peak leaves room, and the faster is the row. Real trial
processes on the CPU with a compiled tiny model; the uncompiled search's out-of-memory is a fault hook, as a CPU
has no compiled-versus-eager memory gap to find."""

from dataclasses import replace

import pytest

from conftest import FIXTURES
from engine.bench import events as ev
from engine.bench.launcher import run_trial
from engine.bench.trial import step_up_blocked, step_up_estimate_gb
from engine.data import space
from engine.data.presets import load_presets

TINY = str(FIXTURES / "tiny")


def _spec(**kw):
    base = dict(key="k", model="tiny-neox", gpu="cpu", num_gpus=1, methods=space.FREE_LUNCH, device="cpu",
                preset_paths=(TINY,), compile=True, tf32=False, repetitions=3, max_repetitions=3, warmup=1,
                step_up=True)
    base.update(kw)
    return ev.TrialSpec(**base)


def test_a_compiled_trial_steps_up_past_its_uncompiled_search_and_keeps_the_faster(tmp_path):
    out = run_trial(_spec(fault="eager-oom-above-4"), tmp_path / "a", 240, lambda e: None)
    r = out.result
    assert out.status == "measured" and r["max_micro_batch"] == 4  # what the uncompiled search fitted
    up = r["step_up"]
    assert up["micro_batch"] == 8 and up["from_micro_batch"] == 4 and up["outcome"] in ("faster", "slower")
    kept = 8 if up["outcome"] == "faster" else 4
    assert r["micro_batch"] == kept and r["grad_accum"] == 16 // kept
    assert r["step_s"] == pytest.approx(r["pass_s"] * r["grad_accum"] + r["update_s"])  # the kept one's own timings
    other = up["step_s_at_from"] if kept == 8 else up["step_s"]
    assert r["step_s"] <= other  # the faster of the two


def test_a_step_up_that_runs_out_of_memory_is_recorded_and_the_row_stays(tmp_path):
    # Compiled, twice the size does not fit either: the out-of-memory is recorded and the row stays where it was.
    oom = run_trial(_spec(fault="oom-above-4"), tmp_path / "b", 240, lambda e: None).result
    assert oom["status"] == "measured" and oom["micro_batch"] == 4
    assert oom["step_up"]["outcome"] == "out of memory" and oom["step_up"]["micro_batch"] == 8


def test_the_step_up_compares_the_setting_with_itself_compiles_afresh_and_keeps_the_faster(monkeypatch):
    """_step_up with a stand-in for the measurement: which of the two it keeps, that the sweep's best other row
    (beat_step_s) cannot cut the larger micro-batch short, that Dynamo is reset before it compiles again (else the
    batch dimension compiles dynamic), and that an out-of-memory keeps the first."""
    from engine.bench import trial

    resets = []
    monkeypatch.setattr(trial, "fresh_compile", lambda: resets.append(1))
    model = load_presets((TINY,)).model("tiny-neox")  # a batch of 16: accumulation 4 at 4, 2 at 8
    spec = _spec(beat_step_s=0.5)  # the sweep's best other row: faster than either
    first = {"pass_s": 0.5, "update_s": 0.1, "stopped_early": "from the first"}  # step 2.1 s
    asked = []

    def measure(mb, s, larger={"pass_s": 0.8, "update_s": 0.1}):  # step 1.7 s
        asked.append((mb, s.beat_step_s))
        return dict(larger)

    result = {"max_micro_batch": 4}
    micro, kept = trial._step_up(spec, model, result, first, 4, True, False, measure)
    assert asked == [(8, pytest.approx(2.1))] and resets == [1]
    assert (micro, kept) == (8, {"pass_s": 0.8, "update_s": 0.1})  # the larger's own, nothing of the first's
    assert result["step_up"]["outcome"] == "faster" and result["step_up"]["step_s"] == pytest.approx(1.7)
    slow = {}
    assert trial._step_up(spec, model, slow, first, 4, True, False,
                          lambda mb, s: measure(mb, s, {"pass_s": 1.2, "update_s": 0.1}))[0] == 4
    assert slow["step_up"]["outcome"] == "slower"

    def oom(mb, s):
        raise MemoryError("out of memory")

    short = {}
    assert trial._step_up(spec, model, short, first, 4, True, False, oom) == (4, first)
    assert short["step_up"]["outcome"] == "out of memory"


def test_a_step_up_is_not_tried_where_it_cannot_help_and_says_why():
    model = load_presets((TINY,)).model("tiny-neox")  # a batch of 16
    spec = _spec()
    blocked = lambda **kw: step_up_blocked(**{**dict(spec=spec, model=model, measured={}, micro=4, searched=4,  # noqa: E731
                                                     compile_on=True, several=False), **kw})
    assert blocked() is None
    assert "uncompiled" in blocked(compile_on=False)
    assert "already ran out of memory at micro-batch 8" in blocked(micro=4, searched=8)
    assert "above the cap of 16" in blocked(micro=16, searched=16)
    assert "above the cap of 4" in blocked(spec=replace(spec, max_micro_batch=4))
    assert "one GPU only" in blocked(several=True)
    # The estimate: what is held between steps stays, the rest doubles.
    assert step_up_estimate_gb(71.1, 22.0) == pytest.approx(120.2)
    room = {"peak_memory_gb": 71.1, "held_memory_gb": 22.0, "device_memory_gb": 150.0}
    assert blocked(measured=room) is None
    assert "estimated 120.2 GB at micro-batch 8" in blocked(measured={**room, "device_memory_gb": 85.0})


def test_what_a_step_up_came_to_is_said_in_a_sentence():
    from engine.bench.sweep import step_up_words

    base = {"micro_batch": 32, "from_micro_batch": 16, "step_s_at_from": 16.0, "step_s": 15.5}
    assert step_up_words({**base, "outcome": "faster"}) == (
        "stepped up to micro-batch 32, compiled (-3.1% a step); the search fitted 16 uncompiled")
    assert step_up_words({**base, "step_s": 17.0, "outcome": "slower"}) == (
        "micro-batch 32, compiled, was slower (+6.2% a step): kept 16")
    assert "ran out of memory: kept 16" in step_up_words({"micro_batch": 32, "from_micro_batch": 16,
                                                          "outcome": "out of memory"})
    assert step_up_words({"micro_batch": 32, "outcome": "not tried", "why": "estimated 168.2 GB"}) == (
        "micro-batch 32 not tried: estimated 168.2 GB")
    assert step_up_words(None) is None and step_up_words({"micro_batch": 32}) is None


def test_the_bench_flag_reaches_every_trial(tmp_path):
    from engine.bench.sweep import SweepRequest, plan

    presets = load_presets((TINY,))
    req = SweepRequest(model="tiny-neox", methods="free-lunch", device="cpu", presets=(TINY,), step_up=True,
                       db=str(tmp_path / "r.duckdb"))
    specs = plan(req, presets, "cpu")
    assert specs and all(s.step_up for s in specs)
    assert ev.TrialSpec.from_json(specs[0].to_json()).step_up is True


def test_an_export_of_a_stepped_up_row_says_the_micro_batch_needs_compiling():
    """The shipped row: Llama-3.2-1B fused on 1 x H200 stepped up to 32 (its uncompiled search fitted 16); the
    Trainer trained the export at 32 compiled (data/verified/). Its notes say what to run without compiling. A
    shared file's step_up that is not a smaller whole micro-batch says nothing."""
    import json

    from engine.data.paths import shipped_db
    from engine.data.store import Store
    from engine.recipe import export as recipe

    presets = load_presets()
    with Store.open(shipped_db()) as s:
        choice = recipe.pick(s, presets, "llama-3.2-1b", "h200", 1, trial_id="8baa9f96aa6f420dac3fc808d26e71c8")
    row = choice.row
    assert (row["micro_batch"], row["grad_accum"]) == (32, 16)
    r = recipe.build(choice, presets, shipped_db())
    assert r.training_args["per_device_train_batch_size"] == 32 and r.training_args["torch_compile"] is True
    assert any("measured compiled (bench --step-up)" in n and "run 16 x 32 instead" in n for n in r.notes)
    model = presets.model("llama-3.2-1b")
    for forged in ("16", True, 64, 0, None, 3, 8):  # (3, 8: no half of 32, which the engine's step-up always is)
        prov = {"step_up": {"outcome": "faster", "from_micro_batch": forged, "micro_batch": 32}}
        notes: list[str] = []
        recipe.training_args({**row, "provenance": json.dumps(prov)}, model, "cuda", notes)
        assert not any("step-up" in n for n in notes)
    notes = []
    other = {"step_up": {"outcome": "faster", "from_micro_batch": 16, "micro_batch": 64}}  # not this row's size
    recipe.training_args({**row, "provenance": json.dumps(other)}, model, "cuda", notes)
    assert not any("step-up" in n for n in notes)
