"""Prediction: the memory model on hand-computed cases, physical bounds, storing and ranking predicted rows,
leave-one-out on a synthetic measured set, the sweep's memory skip, and the predict command's errors."""

import dataclasses
import io
import json
import re
import math
import subprocess
import sys

import duckdb
import pytest

from conftest import FIXTURES, ROOT
from engine.data import formulas, space
from engine.predict import calibration, memory, offload
from engine import predict
from engine.data import store as store_mod
from engine.data.paths import shipped_db
from engine.data.generations import mfu_line
from engine.data.presets import load_presets
from engine.plan.ranking import RankRequest, rank
from engine.data.space import Methods
from engine.data.store import Store, Trial
from tui_planner.cli import main


@pytest.fixture(scope="module")
def presets():
    return load_presets(include_user=False)


@pytest.fixture(scope="module")
def tiny():
    return load_presets([FIXTURES / "tiny" / "tiny.toml"], include_user=False)


# --- memory model -------------------------------------------------------------------------------------


def test_parameter_counts(presets, tiny):
    assert memory.shape(presets.model("pythia-160m")).params == 162_322_944  # published count
    assert memory.shape(presets.model("pythia-1b")).params == 1_011_781_632
    # tiny-neox by hand: untied embeddings 2 x 512 x 32, 2 layers of 4h^2 + 2hi + 9h + i, final LayerNorm 2h
    h, i, layers, v = 32, 128, 2, 512
    assert memory.shape(tiny.model("tiny-neox")).params == 2 * v * h + layers * (4 * h * h + 2 * h * i + 9 * h + i) + 2 * h


def test_static_bytes_per_parameter(presets, tiny):
    psi = memory.shape(presets.model("pythia-1b")).params
    plain = memory.static_terms(presets.model("pythia-1b"), space.FREE_LUNCH, 1)
    # Adam: fp32 weights 4 + fp32 gradients 4 + two fp32 moments 8, + autocast's 16-bit copies 2
    assert sum(plain.values()) == pytest.approx(18 * psi)
    assert plain["Adam moments fp32"] == pytest.approx(8 * psi)
    fp32 = tiny.model("tiny-wide")  # trains in fp32: no autocast copies
    assert sum(memory.static_terms(fp32, space.FREE_LUNCH, 1).values()) == pytest.approx(16 * memory.shape(fp32).params)
    ddp = memory.static_terms(presets.model("pythia-1b"), space.FREE_LUNCH, 2)
    assert sum(ddp.values()) == pytest.approx(22 * psi)  # + DDP's fp32 gradient buckets
    # ZeRO (Rajbhandari et al. 2020): 2 + 2 + 12/N at stage 1, 2 + 14/N at stage 2, 16/N at stage 3
    bucket = 2 * memory.DEEPSPEED_BUCKET_ELEMENTS
    z1 = memory.static_terms(presets.model("pythia-1b"), Methods(sharding="zero1"), 4)
    assert sum(z1.values()) == pytest.approx((2 + 2 + 12 / 4) * psi + bucket)
    z2 = memory.static_terms(presets.model("pythia-1b"), Methods(sharding="zero2"), 4)
    assert sum(z2.values()) == pytest.approx((2 + 14 / 4) * psi + bucket)
    z3 = memory.static_terms(presets.model("pythia-1b"), Methods(sharding="zero3"), 4)
    layers = memory.shape(presets.model("pythia-1b")).layers
    assert sum(z3.values()) == pytest.approx(16 / 4 * psi + 2 * 2 * psi / layers + bucket)
    off = memory.static_terms(presets.model("pythia-1b"), Methods(sharding="zero2", offloading=True), 1)
    assert off["optimizer (master + moments)"] == 0  # on the CPU


def test_activation_bytes_per_sample(presets):
    m = presets.model("pythia-1b")
    s, h, layers, heads, v = 2049, 2048, 16, 8, 50304
    fused = memory.activation_terms(m, space.FREE_LUNCH)
    # Korthikanti et al. 2022: 34 s h per layer with fused attention; the loss keeps 3 fp32 values per logit
    assert sum(fused.values()) == pytest.approx(34 * s * h * layers + 12 * s * v)
    eager = memory.activation_terms(m, space.NAIVE)
    assert sum(eager.values()) - sum(fused.values()) == pytest.approx(6 * heads * s * s * layers)
    ckpt = memory.activation_terms(m, Methods(activation_checkpointing=True))
    assert sum(ckpt.values()) == pytest.approx(2 * s * h * layers + 34 * s * h + 12 * s * v)


def _gpu_with(presets, gib):
    return dataclasses.replace(presets.gpu("h100"), memory_gb=gib)


def test_largest_micro_batch_that_fits(presets):
    m = presets.model("pythia-410m")
    static = sum(memory.static_terms(m, space.FREE_LUNCH, 1).values())
    act = sum(memory.activation_terms(m, space.FREE_LUNCH).values())
    # Exactly room for 8 samples: 8 fits, 16 does not.
    gib = (static + 8 * act) / memory.USABLE_FRACTION / memory.GIB
    assert memory.max_micro_batch(m, _gpu_with(presets, gib * 1.0001), space.FREE_LUNCH, 1) == 8
    assert memory.max_micro_batch(m, _gpu_with(presets, gib * 0.9999), space.FREE_LUNCH, 1) == 4
    assert memory.max_micro_batch(m, _gpu_with(presets, 1), space.FREE_LUNCH, 1) == 0  # not even one


def test_calibration_brackets_kappa_from_measured_fits(presets):
    m = presets.model("pythia-410m")
    gpu = presets.gpu("h100")
    static = sum(memory.static_terms(m, space.FREE_LUNCH, 1).values())
    act = sum(memory.activation_terms(m, space.FREE_LUNCH).values())
    row = _measured(m.id, space.FREE_LUNCH, micro_batch=16, pass_s=1.0)
    lo, hi = calibration.fit_bracket(row, presets)
    cap = memory.capacity_bytes(gpu)
    assert hi == pytest.approx((cap - static) / (16 * act)) and lo == pytest.approx((cap - static) / (32 * act))
    cal = calibration.calibrate([row], presets)["GPTNeoX"]
    assert lo < cal.kappa <= hi and cal.kappa == pytest.approx(math.sqrt(lo * hi)) and cal.conflicts == 0


def test_a_fit_timed_with_the_gradients_freed_bounds_kappa_only_from_below(presets):
    # Before the engine held the gradients between accumulated passes, each timed pass followed an update
    # that freed them: "micro-batch 16 fitted" said nothing about training; "32 did not" still holds.
    row = _measured("pythia-410m", space.FREE_LUNCH, micro_batch=16, pass_s=1.0, grad_accum=4)
    lo, hi = calibration.fit_bracket(row, presets)
    assert hi == math.inf and lo > 0
    held = dict(row, provenance=json.dumps({**json.loads(row["provenance"]), "gradients_held": True}))
    assert calibration.fit_bracket(held, presets) == (lo, pytest.approx(2 * lo))
    once = dict(row, grad_accum=1)  # no accumulation: its update followed its one pass, as in training
    assert calibration.fit_bracket(once, presets)[1] < math.inf
    # DeepSpeed keeps the gradients itself, and FSDP with offloading keeps them in host memory
    for m in (Methods(sharding="zero1", offloading=True), Methods(sharding="fsdp2", offloading=True)):
        assert calibration.fit_bracket(_measured("pythia-410m", m, micro_batch=16, pass_s=1.0, grad_accum=4),
                                       presets)[1] < math.inf
    # the largest micro-batch fitting with the gradients freed: nothing left to say
    top = dict(row, micro_batch=1024, provenance=json.dumps({"max_micro_batch_searched": 1024}))
    assert calibration.fit_bracket(top, presets) is None


def test_the_shipped_measurements_agree_with_one_kappa(presets):
    with Store.open(shipped_db()) as s:
        rows = s.trials(source="measured")
    cal = calibration.calibrate(rows, presets)["GPTNeoX"]
    t = 1 + calibration.FIT_TOLERANCE  # a fit boundary is only this sharp
    assert cal.rows >= 11 and cal.low / t < cal.kappa <= cal.high * t
    # Every Pythia fit agrees but two: Pythia-2.8B free-lunch on one H100, timed with its gradients held,
    # fits micro-batch 2 (65.3 GB at its peak) and not 4, where the memory model puts 4 at 77 GB of the
    # 83.3 usable (docs/measurements.md). And Pythia-6.9B's FSDP-2 on 4 x H100 fitted 2 and not 4 in the uncompiled
    # search (2026-11-28: kappa at least 0.996), which with Pythia-160M's checkpointing + ZeRO-3 + offload, which did
    # not fit 64 on one H100 (at least 0.97), puts kappa at 0.98, over what Pythia-6.9B's ZeRO-1 on 2 x H200, which
    # fitted 4 and not 8, allows (at most 0.93: DeepSpeed holds more than the model counts). (Rows timed with their
    # gradients freed between passes say nothing about what fits in training, only what did not: Pythia-6.9B naive
    # 'fitted' one H200 that way, and conflicted, until it was measured again.)
    disagree = []
    for r in rows:
        b = calibration.fit_bracket(r, presets)
        if b is not None and r["model"].startswith("pythia") and not (b[0] / t < cal.kappa <= b[1] * t):
            disagree.append((r["model"], r["gpu"], memory.methods_of(r).label, r["micro_batch"]))
    assert sorted(disagree, key=str) == [("pythia-2.8b", "h100", "free-lunch", 2),
                                         ("pythia-6.9b", "h200", "zero1", 4)] and cal.conflicts == 2
    assert 0.972 < cal.kappa < 1.0


def test_one_wrong_fit_is_the_conflict_and_does_not_move_kappa():
    agree = [(0.90, 1.10, "a"), (0.95, 1.20, "b"), (0.80, 1.05, "c"), (0.97, 1.30, "d")]
    assert calibration._widest_agreement(agree + [(0.30, 0.60, "outlier")]) == (0.97, 1.05)
    assert calibration._widest_agreement(agree) == (0.97, 1.05)
    assert calibration._widest_agreement([(0.30, 0.60, "x"), (0.9, 1.1, "y"), (0.95, 1.2, "z")]) == (0.95, 1.1)


# --- synthetic measured rows ----------------------------------------------------------------------------

X_C, X_M = 2.5, 2.0  # the synthetic truth: 40% of peak, 50% of bandwidth


def _measured(model_id, methods, micro_batch=None, pass_s=None, gpu="h100", n=1, presets=None, **kw):
    """A measured row; with presets, its pass time comes from the roofline with X_C, X_M."""
    if presets is not None:
        model, g = presets.model(model_id), presets.gpu(gpu)
        micro_batch = micro_batch or memory.max_micro_batch(model, g, methods, n)
        peak = predict.compute_peak_flops(g, model, methods)
        k = 4 / 3 if methods.activation_checkpointing else 1
        compute_s = k * predict.compute_flops_per_sample(model) / peak  # attention's s x s products too
        memory_s = sum(predict.traffic_terms(model, methods).values()) / (g.memory_bandwidth_gbs * 1e9)
        pass_s = micro_batch * (X_C * compute_s + X_M * memory_s)
        accum = model.training.batch_size // (n * micro_batch)
        update_s = 0.01
        step_s = pass_s * accum + update_s
        days = formulas.training_days(step_s, model.training.steps)
        mfu = formulas.mfu(model.flops_per_step, step_s, n, g.peak_16bit_flops)
        kw.update(grad_accum=accum, update_s=update_s, step_s=step_s, days=days, mfu=mfu)
    base = dict(model=model_id, gpu=gpu, num_gpus=n, feasible=True, source="measured", days=kw.pop("days", 10.0),
                free_lunch=methods.free_lunch, compile=methods.free_lunch, activation_checkpointing=methods.activation_checkpointing,
                sharding=methods.sharding, offloading=methods.offloading, micro_batch=micro_batch, pass_s=pass_s,
                update_s=kw.pop("update_s", 0.01), plausibility="ok", key=f"{model_id}|{gpu}|{n}|{methods.label}",
                provenance=json.dumps({"max_micro_batch_searched": micro_batch, "causal_mask": "is_causal flag"}))
    base.update(kw)
    return dataclasses.asdict(Trial(**base))


def _synthetic(presets):
    rows = []
    for model_id in ("pythia-160m", "pythia-410m", "pythia-1b", "pythia-2.8b"):
        for methods in (space.NAIVE, space.FREE_LUNCH):
            rows.append(_measured(model_id, methods, presets=presets))
    return rows


def test_a_measured_out_of_memory_overrules_the_memory_model(presets):
    """Pythia-6.9B free-lunch 'fitted' micro-batch 2 of an H200 by the memory model and ran out of memory at 1 when
    measured (twice): the H200 NVL, with the same memory, was then ranked on it. A measured out-of-memory holds on
    every GPU with no more memory, for the same model, setting, GPU count and training run."""
    ckpt = Methods(activation_checkpointing=True)

    def oom(mb, gpu="h200", methods=ckpt):
        return dict(_measured("pythia-6.9b", methods, micro_batch=mb, gpu=gpu), feasible=False, days=None,
                    pass_s=None, micro_batch=None, failure_kind="oom", provenance=json.dumps({}),
                    failure_message=f"out of memory at micro-batch {mb} ({methods.label})")

    # fits that bound the memory model from both sides (their gradients held), as the shipped sweeps' do: an
    # out-of-memory of one model disagrees with them, and the calibration keeps what most rows say
    rows = [dict(r, provenance=json.dumps({**json.loads(r["provenance"]), "gradients_held": True}))
            for r in _synthetic(presets)]
    free = predict.build_predictor(rows, presets)
    before = {g: free.predict("pythia-6.9b", g, 1, ckpt) for g in ("h200", "h200nvl", "b200")}
    assert all(b.feasible and b.micro_batch >= 8 for b in before.values())

    def mb(extra, gpu="h200nvl", methods=ckpt):
        return predict.build_predictor(rows + extra, presets).predict("pythia-6.9b", gpu, 1, methods)

    held = predict.build_predictor(rows + [oom(4)], presets)
    for gpu in ("h200", "h200nvl"):  # 141 GB both
        got = held.predict("pythia-6.9b", gpu, 1, ckpt)
        assert got.feasible and got.micro_batch == 2 and got.days >= before[gpu].days
        assert any("micro-batch 2, not more: ckpt measured out of memory at micro-batch 4 on 1 x H200" in line
                   for line in got.lines)
    assert held.predict("pythia-6.9b", "b200", 1, ckpt).micro_batch == before["b200"].micro_batch  # more memory
    # FP8 and fused kernels change the memory (FP8's compiled peaks measured below its 16-bit twin's): not carried
    for other in (dataclasses.replace(ckpt, fp8=True), dataclasses.replace(ckpt, fused=True)):
        assert held.predict("pythia-6.9b", "h200", 1, other).micro_batch >= 4
    # at micro-batch 1: does not fit, and says why
    none = mb([oom(1)])
    assert not none.feasible and none.reason.startswith("does not fit: ckpt measured out of memory at micro-batch 1")
    # a measurement that ran it on a GPU with no more memory contradicts the out-of-memory: the model decides...
    ran = _measured("pythia-6.9b", ckpt, micro_batch=4, gpu="h100", presets=presets)
    ran["provenance"] = json.dumps({**json.loads(ran["provenance"]), "gradients_held": True})
    assert mb([oom(4), ran], "h200").micro_batch == before["h200"].micro_batch
    # ... but not one on another training run, nor one timed with its gradients freed between passes
    assert mb([oom(4), dict(ran, training_run="256x512 bf16 adamw")]).micro_batch == 2
    assert mb([oom(4), dict(ran, provenance=json.dumps({"max_micro_batch_searched": 4}))]).micro_batch == 2
    # a search that fitted 2 and not 4 says the same of 4 (the sweep doubles until a size does not fit)...
    fitted = _measured("pythia-6.9b", ckpt, micro_batch=2, gpu="h200", presets=presets)
    searched = mb([fitted])
    assert searched.micro_batch == 2 and any(
        "ckpt fitted micro-batch 2 and not 4 in the uncompiled micro-batch search on 1 x H200" in line
        for line in searched.lines)
    # ... on its own run only, and not where a cap on the search stopped it
    assert mb([dict(fitted, training_run="2048x512 bf16 adamw")]).micro_batch == before["h200nvl"].micro_batch
    assert mb([dict(fitted, key=fitted["key"] + "|max-mb-2")]).micro_batch == before["h200nvl"].micro_batch
    # a compiled measurement that ran out at 8 and measured 4 says 8 does not fit
    relaunched = _measured("pythia-6.9b", ckpt, micro_batch=4, gpu="h200", presets=presets)
    prov = {**json.loads(relaunched["provenance"]), "max_micro_batch_searched": 8, "measure_oom": [8]}
    assert mb([dict(relaunched, provenance=json.dumps(prov), grad_accum=relaunched["grad_accum"])]).micro_batch == 4
    # a results file's nonsense is no evidence and no crash: micro-batch 0, a string, a boolean, a float
    odd = [dict(oom(4), failure_message="out of memory at micro-batch 0"),
           dict(fitted, provenance=json.dumps({"max_micro_batch_searched": "8", "gradients_held": True})),
           dict(fitted, provenance=json.dumps({"max_micro_batch_searched": True, "measure_oom": ["x", 0, None]})),
           dict(fitted, provenance=json.dumps({"max_micro_batch_searched": 2.5, "measure_oom": 4}))]
    for row in odd:
        assert mb([row]).micro_batch >= 2


def test_an_out_of_memory_row_brackets_kappa_at_the_micro_batch_it_names(presets):
    row = dict(_measured("pythia-1b", space.FREE_LUNCH, micro_batch=4, gpu="h100"), feasible=False, days=None,
               micro_batch=None, failure_kind="oom", provenance=json.dumps({}),
               failure_message="out of memory while measuring at micro-batch 4")
    at4 = calibration.fit_bracket(row, presets)
    at1 = calibration.fit_bracket(dict(row, failure_message="out of memory at micro-batch 1"), presets)
    assert at4[1] == at1[1] == math.inf and at4[0] == pytest.approx(at1[0] / 4)
    assert calibration.fit_bracket(dict(row, failure_message="out of memory"), presets) == at1  # unsaid: 1


def test_leave_one_out_on_a_synthetic_measured_set(presets):
    v = predict.leave_one_out(_synthetic(presets), presets, "measured")
    assert v.cells == 4 and len(v.checks) == 8
    # The rows follow one roofline exactly, so every held-out cell is predicted from the others exactly
    # (to the update time, which the synthetic rows fix at 10 ms)...
    assert len(v.errors) >= 7 and v.median_abs < 0.002 and v.worst_abs < 0.002
    # ... except where the memory model, calibrated without that cell, says it does not fit: reported.
    assert len(v.errors) + len(v.missed) == 8
    report = predict.validation_report(_synthetic(presets), presets)
    assert report["measured"]["median_abs"] < 0.002 and len(report["measured"]["missed"]) == len(v.missed)


def test_leave_one_out_reports_errors_when_the_data_disagree(presets):
    rows = _synthetic(presets)
    slow = next(r for r in rows if r["model"] == "pythia-1b" and r["free_lunch"])
    slow["pass_s"] *= 1.5  # one cell 50% slower than the others say
    slow["days"] = formulas.training_days(slow["pass_s"] * slow["grad_accum"] + slow["update_s"], 143_000)
    v = predict.leave_one_out(rows, presets, "measured")
    by = {(c.model, c.label): c for c in v.checks}
    assert by[("pythia-1b", "free-lunch")].error == pytest.approx(1 / 1.5 - 1, rel=0.05)
    assert v.worst_abs >= abs(by[("pythia-1b", "free-lunch")].error) > v.median_abs


def test_a_configuration_measured_twice_counts_once_at_its_median(presets):
    rows = _synthetic(presets)
    again = [dict(r, trial_id=f"again-{i}") for i, r in enumerate(rows) if r["model"] == "pythia-1b"]
    for r in again:  # the same cell measured on another day, 20% slower
        r["pass_s"] *= 1.2
        r["days"] = formulas.training_days(r["pass_s"] * r["grad_accum"] + r["update_s"], 143_000)
    third = [dict(r, trial_id=f"third-{i}") for i, r in enumerate(again)]  # and once more like that
    v = predict.leave_one_out(rows + again + third, presets, "measured")
    assert v.cells == 4 and len(v.checks) == 8  # configurations, not measurements
    one = next(c for c in v.checks if c.model == "pythia-1b" and c.label == "free-lunch")
    assert one.measurements == 3
    assert one.actual_days == pytest.approx(next(r["days"] for r in again if r["free_lunch"]))  # the median
    # In a fit, too, the configuration enters once: its median measurement.
    basis = predict.distinct(b for b in (predict.basis_row(r, presets) for r in rows + again + third) if b)
    assert len(basis) == 8
    b = next(b for b in basis if b.model == "pythia-1b" and b.methods == space.FREE_LUNCH)
    assert b.days == pytest.approx(one.actual_days)
    # Measured again after an engine fix (the old row ran with a dense causal mask): two configurations,
    # each in its own kernel group, never one median of both engines.
    fl = next(r for r in rows if r["model"] == "pythia-1b" and r["free_lunch"])
    masked = dict(fl, trial_id="masked", days=fl["days"] * 1.4, pass_s=fl["pass_s"] * 1.4,
                  provenance=json.dumps({"causal_mask": "dense mask"}))
    both = predict.distinct(b for b in (predict.basis_row(r, presets) for r in rows + [masked]) if b)
    assert len(both) == len(rows) + 1 and {b.group for b in both if b.model == "pythia-1b" and b.methods == space.FREE_LUNCH} \
        == {"compiled", "compiled-mask"}
    v = predict.leave_one_out(rows + [masked], presets, "measured")
    assert sum(1 for c in v.checks if c.model == "pythia-1b" and c.label == "free-lunch") == 2


def test_a_models_residual_comes_from_its_unsharded_rows(presets):
    rows = _synthetic(presets)
    ckpt = Methods(activation_checkpointing=True)
    rows.append(_measured("pythia-410m", ckpt, gpu="h200", n=2, presets=presets))
    for sharding in ("fsdp2", "fsdp3"):  # 25% slower than the time model says: overhead it leaves out
        r = _measured("pythia-410m", Methods(activation_checkpointing=True, sharding=sharding), gpu="h200", n=2,
                      presets=presets)
        comm = predict.comm_bytes(presets.model("pythia-410m"), memory.methods_of(r), 2)[0] / \
            predict.link_bytes_per_s(presets.gpu("h200"), 2)
        r["pass_s"] = 1.25 * r["pass_s"] + comm
        rows.append(r)
    p = predict.Predictor(rows, presets)
    plain = p.predict("pythia-410m", "h100", 1, ckpt)
    sharded = p.predict("pythia-410m", "h200", 4, Methods(activation_checkpointing=True, sharding="fsdp2"))
    # The FSDP rows' unmodelled 25% does not land on the model (a median over all four of its rows would
    # put it above 1); the residual is the model's, the same for every setting.
    assert plain.terms["residual"] < 1.0
    assert sharded.terms["residual"] == pytest.approx(plain.terms["residual"])
    assert "fsdp" not in plain.basis.split("residual")[1]


@pytest.mark.parametrize("speed, own", [(0.5, True), (0.85, False)])
def test_a_sharding_whose_rows_run_another_speed_per_flop_takes_their_residual(presets, speed, own):
    """A mixture of experts ran 2x faster per FLOP under FSDP than under DDP: rows of a sharding family that far
    from the unsharded rows' speed set that family's residual; 15% apart is what the time model leaves out of
    sharding, and the model keeps one residual."""
    rows = _synthetic(presets)
    for sharding in ("fsdp2", "fsdp3"):
        r = _measured("pythia-410m", Methods(free_lunch=True, sharding=sharding), gpu="h200", n=2, presets=presets)
        r["pass_s"] *= speed
        rows.append(r)
    p = predict.Predictor(rows, presets)
    plain = p.predict("pythia-410m", "h100", 1, Methods(free_lunch=True))
    fsdp = p.predict("pythia-410m", "h200", 4, Methods(free_lunch=True, sharding="fsdp3"))
    zero = p.predict("pythia-410m", "h200", 4, Methods(free_lunch=True, sharding="zero2"))
    assert (fsdp.terms["residual"] < 0.75 * plain.terms["residual"]) == own
    assert ("fsdp3" in fsdp.basis.split("residual")[1]) == own
    assert "fsdp" not in zero.basis.split("residual")[1]  # another family: not the FSDP rows


def test_offloading_never_makes_a_shipped_prediction_faster_at_the_same_micro_batch(presets):
    with Store.open(shipped_db()) as s:
        rows = [r for r in s.trials() if r["source"] != "predicted"]
    preds = predict.predict_missing(predict.Predictor(rows, presets), presets)
    by = {(q.model, q.gpu, q.num_gpus, q.methods): q for q in preds}

    def without_offloading(q):  # the same stack; on one GPU, where sharding needs offloading, none of it
        m = dataclasses.replace(q.methods, offloading=False)
        return m if space.is_valid(m, q.num_gpus) else dataclasses.replace(m, sharding="none")

    pairs = [(q, by.get((q.model, q.gpu, q.num_gpus, without_offloading(q))))
             for q in preds if q.methods.offloading and q.feasible]
    same = [(q, o) for q, o in pairs if o is not None and o.feasible and o.micro_batch == q.micro_batch]
    assert len(same) > 1000 and any(q.num_gpus == 1 for q, _ in same)  # the check covers the cells
    faster = [(q.model, q.gpu, q.num_gpus, q.label) for q, o in same if q.days < o.days]
    assert not faster
    # where its own fit put it faster, it is held at the kept setting's step, and its figures agree with each other
    held = [q for q in preds if q.feasible and "held_at" in q.terms]
    assert held and all("offloading never speeds the GPU's work" in q.basis for q in held)
    for q in held:
        assert q.pass_s * q.grad_accum + q.update_s == pytest.approx(q.step_s, rel=1e-9)
        assert q.terms["capped"] == q.capped and (q.days_low is None or q.days_low <= q.days <= q.days_high)


def _offload_row(presets, model_id, methods, update_per_param, exposed, micro_batch=16, latency=0.0):
    """A measured offload row: the roofline's pass plus `exposed` of its copies at 70% of PCIe (and
    `latency` seconds per DeepSpeed layer transfer), and an update of `update_per_param` seconds per parameter."""
    model, g = presets.model(model_id), presets.gpu("h100")
    peak = predict.compute_peak_flops(g, model, methods)
    k = 4 / 3 if methods.activation_checkpointing else 1
    compute_s = k * predict.compute_flops_per_sample(model) / peak
    memory_s = sum(predict.traffic_terms(model, methods).values()) / (g.memory_bandwidth_gbs * 1e9)
    copies = predict.host_bytes(model, methods, 1)[0] / predict.host_bytes_per_s(g)
    pass_s = micro_batch * (X_C * compute_s + X_M * memory_s) + exposed * copies \
        + latency * predict.host_transfers(model, methods)
    update_s = update_per_param * memory.shape(model).params
    accum = model.training.batch_size // micro_batch
    days = formulas.training_days(pass_s * accum + update_s, model.training.steps)
    return _measured(model_id, methods, micro_batch=micro_batch, pass_s=pass_s, update_s=update_s, days=days,
                     grad_accum=accum)


def test_offload_update_and_exposed_copies_are_calibrated_per_implementation(presets):
    zero, fsdp = Methods(sharding="zero2", offloading=True), Methods(sharding="fsdp2", offloading=True)
    rows = _synthetic(presets) + [
        _offload_row(presets, "pythia-410m", zero, 0.5e-9, 1.0, latency=2e-3),
        _offload_row(presets, "pythia-410m", fsdp, 3.0e-9, 0.6),
    ]
    p = predict.Predictor(rows, presets)
    # DeepSpeed's CPU Adam and FSDP's CPU optimizer step are calibrated apart, from their own rows.
    assert p.offload_update_s["zero"] == pytest.approx(0.5e-9, rel=1e-6)
    assert p.offload_update_s["fsdp"] == pytest.approx(3.0e-9, rel=1e-6)
    # FSDP: the share of the copies a pass exposes comes back from the rows (the GPU part follows the fit);
    # DeepSpeed: the copies in full plus a latency per layer transfer.
    assert p.host_exposed["fsdp"] == pytest.approx(0.6, abs=0.02)
    assert p.host_latency_s["zero2"] == pytest.approx(2e-3, rel=0.05)
    assert p.host_latency_s["zero3"] == p.host_latency_s["zero2"]  # no ZeRO-3 row: ZeRO-2's latency
    # On another model, the update scales with its parameters at its implementation's rate...
    psi = memory.shape(presets.model("pythia-1b")).params
    z = p.predict("pythia-1b", "h100", 1, zero)
    f = p.predict("pythia-1b", "h100", 1, fsdp)
    assert z.terms["cpu_update_s"] == pytest.approx(0.5e-9 * psi, rel=1e-6)
    assert f.terms["cpu_update_s"] == pytest.approx(3.0e-9 * psi, rel=1e-6)
    # ... and the pass holds the exposed share of its copies, no more...
    assert f.pass_s - f.terms["compute_part_s"] - f.terms["memory_part_s"] == pytest.approx(
        p.host_exposed["fsdp"] * f.terms["host_pass_bytes"] / f.terms["host_bytes_s"], rel=1e-6)
    # ... or, with DeepSpeed, its copies plus the latency of its own layers' transfers.
    layers = memory.shape(presets.model("pythia-1b")).layers
    assert z.pass_s - z.terms["compute_part_s"] - z.terms["memory_part_s"] == pytest.approx(
        z.terms["host_pass_bytes"] / z.terms["host_bytes_s"] + p.host_latency_s["zero2"] * layers, rel=1e-3)
    # A pass slower than its copies in full can explain says at most 1 (exposed in full), never more.
    slow = _synthetic(presets) + [_offload_row(presets, "pythia-410m", fsdp, 3e-9, 5.0)]
    assert predict.Predictor(slow, presets).host_exposed["fsdp"] == 1.0
    # An implementation nobody measured takes the other's update rate; nothing measured: the assumption.
    only_zero = predict.Predictor(_synthetic(presets) + rows[-2:-1], presets)
    assert only_zero.offload_update_s["fsdp"] == pytest.approx(0.5e-9, rel=1e-6)
    assert predict.Predictor(_synthetic(presets), presets).offload_update_s["fsdp"] == \
        predict.DEFAULT_CPU_ADAM_S_PER_PARAM


def test_fsdp_offload_on_several_gpus_costs_what_its_measured_passes_cost_beyond_the_copies(presets):
    """FSDP's CPU offload on 2 and 4 x H200 cost a pass 1-4 ns per parameter a GPU holds beyond its copies
    (engine/predict/offload.py), on one GPU nearly nothing: the copies' share comes from one GPU's rows, the cost
    beyond them from several GPUs' rows at the count asked for, else the nearest count measured, and ZeRO's
    offload and one GPU take none of it."""
    fsdp, zero = Methods(sharding="fsdp2", offloading=True), Methods(sharding="zero2", offloading=True)
    one = _offload_row(presets, "pythia-410m", fsdp, 3.0e-9, 0.6)
    model, g = presets.model("pythia-410m"), presets.gpu("h100")
    held = memory.shape(model).params / 2
    two = dict(one, num_gpus=2, key="pythia-410m|h100|2|fsdp2+offload", grad_accum=one["grad_accum"] // 2)
    copies = predict.host_bytes(model, fsdp, 2)[0] / predict.host_bytes_per_s(g)
    gpu_work = one["pass_s"] - 0.6 * predict.host_bytes(model, fsdp, 1)[0] / predict.host_bytes_per_s(g)
    two["pass_s"] = gpu_work + 0.6 * copies + 2.0e-9 * held
    two["update_s"] = 3.0e-9 * held
    two["days"] = formulas.training_days(two["pass_s"] * two["grad_accum"] + two["update_s"], model.training.steps)
    p = predict.Predictor(_synthetic(presets) + [one, two], presets)
    assert p.host_exposed["fsdp"] == pytest.approx(0.6, abs=0.02)  # one GPU's row alone: the 2-GPU pass is not copies
    assert p.sharded_offload.per_param_s(2)[0] == pytest.approx(2.0e-9, rel=0.05)
    psi = memory.shape(presets.model("pythia-1b")).params
    on2 = p.predict("pythia-1b", "h100", 2, fsdp)
    assert on2.terms["host_sharded_s"] == pytest.approx(2.0e-9 * psi / 2, rel=0.05)
    assert "this GPU count" in on2.terms["host_sharded_note"]
    assert any(line.startswith("offload on 2 GPUs: +") for line in on2.lines)
    on8 = p.predict("pythia-1b", "h100", 8, fsdp)  # no 8-GPU row: the nearest count's rate, said
    assert on8.terms["host_sharded_s"] == pytest.approx(2.0e-9 * psi / 8, rel=0.05)
    assert "2 GPUs, the nearest count measured" in on8.terms["host_sharded_note"]
    assert on2.pass_s - on2.terms["compute_part_s"] - on2.terms["memory_part_s"] - on2.terms["comm_pass_s"] == \
        pytest.approx(
        p.host_exposed["fsdp"] * on2.terms["host_pass_bytes"] / on2.terms["host_bytes_s"]
        + on2.terms["host_sharded_s"], rel=1e-6)
    assert p.predict("pythia-1b", "h100", 1, fsdp).terms["host_sharded_s"] == 0.0
    assert p.predict("pythia-1b", "h100", 2, zero).terms["host_sharded_s"] == 0.0
    # carried to another GPU type or across machines: the same figure, said to be carried over
    assert "not this GPU type" in p.predict("pythia-1b", "a100", 2, fsdp).terms["host_sharded_note"]
    apart = p.predict("pythia-1b", "h100", 2, fsdp, nodes=2, network=presets.networks["ib-ndr-400"])
    assert "not across machines" in apart.terms["host_sharded_note"] and apart.terms["host_sharded_s"] > 0
    # a step of one micro-batch holds no gradient from a pass before: nothing beyond the copies
    small = presets.model("pythia-1b")
    one_pass = dataclasses.replace(presets, models={**presets.models, "pythia-1b": dataclasses.replace(
        small, training=dataclasses.replace(small.training, batch_size=on2.micro_batch * 2))})
    q = predict.Predictor(_synthetic(one_pass) + [one, two], one_pass).predict("pythia-1b", "h100", 2, fsdp)
    assert q.grad_accum == 1 and q.terms["host_sharded_s"] == 0.0
    # a cell measured in two settings counts once: the median over cells, not over passes
    cells = offload.ShardedOffload.of([offload.Sample(("m", "h100", 2), 1.0, 1e9),
                                       offload.Sample(("m", "h100", 2), 1.2, 1e9),
                                       offload.Sample(("n", "h100", 2), 4.0, 1e9)])
    assert cells.per_param_s(2)[0] == pytest.approx((1.1e-9 + 4.0e-9) / 2)
    assert "median of 2 measured cells" in cells.per_param_s(2)[1]
    assert cells.per_param_s(3)[0] == cells.per_param_s(2)[0] and "nearest count" in cells.per_param_s(3)[1]
    # cells measured only before the heap settings and the host's fused AdamW say so
    assert "2 of the 2 measured only before" in cells.per_param_s(2)[1] and "off either way" in cells.per_param_s(2)[1]
    since = offload.ShardedOffload.of([offload.Sample(("m", "h100", 2), 1.0, 1e9, host_heap=True),
                                       offload.Sample(("n", "h100", 2), 1.0, 1e9, host_heap=False)])
    assert "1 of the 2 measured only before" in since.per_param_s(2)[1]
    # a cell measured both ways counts today's engine's samples only
    both = offload.ShardedOffload.of([offload.Sample(("m", "h100", 2), 2.0, 1e9, host_heap=False),
                                      offload.Sample(("m", "h100", 2), 1.0, 1e9, host_heap=True),
                                      offload.Sample(("n", "h100", 2), 3.0, 1e9, host_heap=False)])
    assert both.by_count[2][("m", "h100", 2)] == pytest.approx(1e-9)
    assert "1 of the 2 measured only before" in both.per_param_s(2)[1]
    now = offload.ShardedOffload.of([offload.Sample(("m", "h100", 2), 1.0, 1e9, host_heap=True)])
    assert "measured before" not in now.per_param_s(2)[1] and now.per_param_s(2)[0] == pytest.approx(1e-9)
    # nothing measured on several GPUs: the copies as on one GPU, and the prediction says so
    alone = predict.Predictor(_synthetic(presets) + [one], presets).predict("pythia-1b", "h100", 2, fsdp)
    assert alone.terms["host_sharded_s"] == 0.0
    assert alone.terms["host_sharded_note"].startswith("no FSDP offload measured on several GPUs")


def test_zero1_offload_copies_gradients_once_per_step(presets):
    m = presets.model("pythia-1b")
    psi = memory.shape(m).params
    z1, z2 = Methods(sharding="zero1", offloading=True), Methods(sharding="zero2", offloading=True)
    assert predict.host_bytes(m, z1, 1) == (0.0, pytest.approx(4 * psi))  # 16-bit gradients out, weights in
    assert predict.host_bytes(m, z2, 1)[0] == pytest.approx(2 * psi)
    assert predict.host_transfers(m, z1) == 0 and predict.host_transfers(m, z2) == memory.shape(m).layers


def test_rows_measured_with_the_dense_causal_mask_form_their_own_group(presets):
    rows = _synthetic(presets)
    old = next(r for r in rows if r["model"] == "pythia-1b" and r["free_lunch"])
    old["provenance"] = json.dumps({"max_micro_batch_searched": old["micro_batch"]})  # no "causal_mask": old engine
    old["pass_s"] *= 1.4
    old["days"] *= 1.4
    b = predict.basis_row(old, presets)
    assert b.group == "compiled-mask"
    naive = next(r for r in rows if r["model"] == "pythia-1b" and not r["free_lunch"])
    assert predict.basis_row(naive, presets).group == "naive"  # eager attention: never masked
    # Checkpointed passes: what the row records decides (a dense mask until the second fix), else old engine.
    ckpt = dict(old, activation_checkpointing=True)
    for recorded, group in (("dense mask", "compiled-mask"), ("is_causal flag", "compiled"), (None, "compiled-mask")):
        prov = {"max_micro_batch_searched": old["micro_batch"]} | ({"causal_mask": recorded} if recorded else {})
        assert predict.basis_row(dict(ckpt, provenance=json.dumps(prov)), presets).group == group, recorded
    flash = dict(ckpt, provenance=json.dumps({"max_micro_batch_searched": old["micro_batch"]}), kernel="flash_attention_2")
    assert predict.basis_row(flash, presets).group == "compiled"  # flash-attn's kernel: no mask to record
    p = predict.Predictor(rows, presets)
    # Today's engine is predicted from today's rows: the old, slower row neither enters the fit nor its residual.
    today = p.predict("pythia-1b", "h200", 2, space.FREE_LUNCH)
    assert today.terms["group"] == "compiled" and today.terms["residual"] == pytest.approx(1.0)
    # Validation predicts the old row as the engine that measured it (the dense-mask group, from the others).
    v = predict.leave_one_out(rows, presets, "measured")
    c = next(c for c in v.checks if c.model == "pythia-1b" and c.label == "free-lunch")
    # The mask group has only this row: held out, nothing says how the old engine ran, so no prediction
    # (today's compiled fit would predict the fixed engine, not the one that measured it).
    assert c.predicted_days is None and "before its causal-attention fix" in c.reason
    other = next(r for r in rows if r["model"] == "pythia-410m" and r["free_lunch"] and r["gpu"] == old["gpu"])
    other["provenance"], other["pass_s"], other["days"] = old["provenance"], other["pass_s"] * 1.4, other["days"] * 1.4
    v = predict.leave_one_out(rows, presets, "measured")
    c = next(c for c in v.checks if c.model == "pythia-1b" and c.label == "free-lunch")
    assert c.predicted_days is not None  # another dense-mask row: the old engine has a fit
    # No row of today's engine at all: the old rows serve, and say so.
    only_old = [dict(r, provenance=json.dumps({})) if r["free_lunch"] else r for r in _synthetic(presets)]
    q = predict.Predictor(only_old, presets).predict("pythia-1b", "h100", 1, space.FREE_LUNCH)
    assert q.feasible and "dense causal mask" in q.terms["fit_note"]


def test_checkpointing_costs_the_presets_recompute_not_a_whole_forward(presets):
    p = predict.Predictor(_synthetic(presets), presets)
    fl = p.predict("pythia-1b", "h200", 1, space.FREE_LUNCH)
    ck = p.predict("pythia-1b", "h200", 1, Methods(activation_checkpointing=True))
    factor = presets.model("pythia-1b").recompute_factor
    assert ck.terms["compute_s_per_sample"] / fl.terms["compute_s_per_sample"] == pytest.approx(factor)
    assert 1 < factor < 4 / 3
    assert any(f"x {factor:.3g} (ckpt's recompute)" in line for line in ck.lines)


def test_checkpointing_copies_the_weights_again_for_the_recomputed_forward(presets):
    m = presets.model("pythia-1b")
    psi = memory.shape(m).params
    fsdp3, ck3 = Methods(sharding="fsdp3", offloading=True), Methods(activation_checkpointing=True, sharding="fsdp3", offloading=True)
    assert predict.host_bytes(m, ck3, 1)[0] - predict.host_bytes(m, fsdp3, 1)[0] == pytest.approx(4 * psi)
    z3 = Methods(sharding="zero3", offloading=True)
    ckz3 = Methods(activation_checkpointing=True, sharding="zero3", offloading=True)
    assert predict.host_bytes(m, ckz3, 1)[0] == pytest.approx(predict.host_bytes(m, z3, 1)[0] * 4 / 3)


def test_predictions_never_exceed_the_cap_on_any_gpu(presets):
    rows = _synthetic(presets)
    for r in rows:  # absurdly fast "measurements" (kept plausible so they serve as a basis)
        r["pass_s"] /= 10
    p = predict.Predictor(rows, presets)
    assert p.fit("GPTNeoX", "compiled").compute_fraction <= predict.MAX_COMPUTE_FRACTION + 1e-12
    seen = 0
    for gpu in presets.gpus:
        for n in (1, 2, 8):
            for pred in p.predict_cell("pythia-1b", gpu, n):
                if pred.feasible:
                    seen += 1
                    line = mfu_line(presets.gpu(gpu))  # each generation's plausibility line
                    assert pred.mfu <= line + 1e-9
                    floor = formulas.analytic_days(presets.model("pythia-1b").training_flops, n,
                                                   presets.gpu(gpu).peak_16bit_flops, line)
                    assert pred.days >= floor * (1 - 1e-9)
    assert seen > 50


def test_what_cannot_fit_is_infeasible_not_slow(presets):
    p = predict.Predictor(_synthetic(presets), presets)
    big = p.predict("pythia-6.9b", "rtx3090", 1, space.FREE_LUNCH)  # 18 B/param x 6.9e9 >> 24 GB
    assert not big.feasible and big.days is None and "does not fit" in big.reason
    assert big.memory_need_gb > big.memory_capacity_gb
    sharded = p.predict("pythia-6.9b", "h100", 8, Methods(sharding="zero3"))
    assert sharded.feasible and sharded.micro_batch >= 1
    bf16 = p.predict("pythia-1b", "v100", 1, space.FREE_LUNCH)  # no bf16 on Volta
    assert not bf16.feasible and "bf16" in bf16.reason
    nobasis = p.predict("mamba-2.8b", "h100", 1, space.FREE_LUNCH)  # no Mamba (nor any SSM) in this basis
    assert not nobasis.feasible and "no basis" in nobasis.reason
    vit = p.predict("vit-large", "h100", 1, space.FREE_LUNCH)  # no ViT row: fitted from other transformers
    assert vit.feasible and "no ViT measurement" in " ".join(vit.lines)


def test_a_prediction_explains_itself_and_scales_with_the_gpu(presets):
    p = predict.build_predictor(_synthetic(presets), presets)
    h100 = p.predict("pythia-1b", "h100", 2, space.FREE_LUNCH)
    b200 = p.predict("pythia-1b", "b200", 2, space.FREE_LUNCH)
    assert b200.days < h100.days  # 2.3x the peak, 2.4x the bandwidth
    assert h100.days_low < h100.days < h100.days_high
    text = "\n".join(h100.lines)
    for word in ("memory at micro-batch", "static", "activations", "compute:", "memory-bound:", "communication",
                 "step =", "MFU", "band"):
        assert word in text
    assert "pythia-" in h100.basis and h100.terms["comm_update_bytes"] > 0  # DDP: one all-reduce per step
    zero3 = p.predict("pythia-1b", "h100", 2, Methods(sharding="zero3"))
    assert zero3.terms["comm_pass_bytes"] > 0  # ZeRO-3 gathers weights on every pass


# --- storing and ranking ---------------------------------------------------------------------------------


def test_predicted_rows_are_stored_with_basis_and_band_and_rank_below_measured(presets, tmp_path):
    rows = _synthetic(presets)
    p = predict.build_predictor(rows, presets)
    preds = p.predict_cell("pythia-1b", "h200", 1) + p.predict_cell("pythia-1b", "h100", 1)
    with Store.open(tmp_path / "mine.duckdb") as s:
        s.add_trials([Trial(**{k: v for k, v in r.items()}) for r in rows])
        assert predict.write_predictions(s, preds, presets, command="test") == len(preds)
        assert predict.write_predictions(s, preds, presets, command="again") == len(preds)  # replaces, no duplicates
        stored = s.trials(source="predicted", gpu="h200", feasible=True)
        assert len(stored) == len([x for x in preds if x.gpu == "h200" and x.feasible])
        best = stored[0]
        assert best["basis"] and "pythia-" in best["basis"]
        assert best["days_low"] < best["days"] < best["days_high"] and best["memory_need_gb"] > 0
        assert json.loads(best["provenance"])["explanation"]
        cells = {(r["gpu"], r["num_gpus"]): r for r in rank(s, RankRequest(model="pythia-1b", budget_usd=1e6), presets)}
    assert cells[("h100", 1)]["source"] == "measured"  # a measurement wins over a prediction of its cell
    assert cells[("h200", 1)]["source"] == "predicted" and cells[("h200", 1)]["days_low"] is not None


def test_a_schema_v2_file_is_migrated_to_carry_predictions(tmp_path):
    path = tmp_path / "v2.duckdb"
    con = duckdb.connect(str(path))
    con.execute(store_mod._SCHEMA_V1)
    con.execute(store_mod.MIGRATIONS[2])
    con.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    con.close()
    with Store.open(path) as s:
        assert s.schema_version == store_mod.SCHEMA_VERSION >= 3
        s.add_trial(Trial(model="pythia-1b", gpu="h200", num_gpus=1, feasible=True, source="predicted", days=40.0,
                          basis="test", days_low=30.0, days_high=50.0))
        assert s.trials()[0]["days_high"] == 50.0


# --- the sweep's memory skip -----------------------------------------------------------------------------


def test_the_sweep_never_skips_on_the_cpu(tiny, tmp_path):
    from engine.bench.sweep import SweepRequest, _memory_calibration

    with Store.open(tmp_path / "s.duckdb") as s:
        assert _memory_calibration(SweepRequest(model="tiny-neox", device="cpu"), tiny, s) is None
        assert _memory_calibration(SweepRequest(model="pythia-1b", memory_skip=False), tiny, s) is None


def test_the_sweep_skips_what_cannot_win_and_runs_the_rest(presets, tmp_path):
    from engine.bench.events import TrialSpec
    from engine.bench.sweep import SweepRequest, _memory_calibration, _memory_skip

    req = SweepRequest(model="pythia-1b")
    with Store.open(tmp_path / "s.duckdb") as s:
        shipped = _memory_calibration(req, presets, s)  # from the shipped measurements
    assert shipped is not None and shipped.rows > 0
    # kappa 1.1-1.3: inside the bracket of the measured Pythia-1B ZeRO-1 + offload trial (fits 16, not 32)
    cal = calibration.Calibration("GPTNeoX", 1.2, 1.1, 1.3, 1)

    def spec(m):
        return TrialSpec(key=f"k|{m.label}", model="pythia-1b", gpu="h100", num_gpus=1, methods=m)

    offload = Methods(sharding="zero1", offloading=True)
    row = _memory_skip(req, spec(offload), presets, cal, 16, "free-lunch", "run")  # free-lunch fits 16
    assert row is not None and row.source == "predicted" and row.failure_kind == "memory" and not row.feasible
    assert "free-lunch" in row.failure_message and row.memory_need_gb > 80
    assert _memory_skip(req, spec(space.FREE_LUNCH), presets, cal, None, "", "run") is None
    assert _memory_skip(req, spec(offload), presets, cal, 1, "free-lunch", "run") is None  # 2 samples fit
    exhaustive = SweepRequest(model="pythia-1b", exhaustive=True)
    assert _memory_skip(exhaustive, spec(offload), presets, cal, 16, "free-lunch", "run") is None


def test_replaying_the_measured_sweeps_never_skips_a_result(presets):
    with Store.open(shipped_db()) as s:
        rows = s.trials(source="measured")
    # With the two Pythia fits the memory model misses (the test above), kappa is not trusted: no skips.
    cal = calibration.calibrate(rows, presets)["GPTNeoX"]
    t = 1 + calibration.FIT_TOLERANCE
    missed = [x for x in rows if x["model"].startswith("pythia") and (b := calibration.fit_bracket(x, presets))
              and not b[0] / t < cal.kappa <= b[1] * t]
    assert len(missed) == 2
    r = calibration.replay_skips(rows, presets)
    assert r["wrong"] == [] and not [x for x in r["skipped"] if x["model"].startswith("pythia")]
    rows = [x for x in rows if all(x is not m for m in missed)]
    r = calibration.replay_skips(rows, presets)
    assert r["trials"] == len(rows) and r["wrong"] == []
    assert 0 <= r["saved_s"] < r["search_s"]
    # The exhaustive 2 x H200 search timed combinations the model calls dominated: each was slower than
    # its dominator. One that had beaten it would make the skip wrong.
    timed = [x for x in r["skipped"] if x["outcome"] == "measured"]
    assert timed and all("dominated" in x["reason"] for x in timed)
    first = timed[0]
    faster = [dict(x, days=x["days"] / 10) if x["model"] == first["model"] and x["gpu"] == first["gpu"]
              and x["num_gpus"] == first["num_gpus"] and memory.methods_of(x).label == first["label"] else x
              for x in rows]
    assert [w["label"] for w in calibration.replay_skips(faster, presets)["wrong"]] == [first["label"]]
    # ... and so would one that fitted above the floor the skip stood on, slower or not.
    bigger = [dict(x, micro_batch=x["micro_batch"] * 4) if x["model"] == first["model"] and x["gpu"] == first["gpu"]
              and x["num_gpus"] == first["num_gpus"] and memory.methods_of(x).label == first["label"] else x
              for x in rows]
    assert [w["label"] for w in calibration.replay_skips(bigger, presets)["wrong"]] == [first["label"]]

    # A trial its sweep called dominated at a floor no memory can reach is skipped, and its time saved.
    ckpt = next(x for x in rows if x["model"] == "pythia-160m" and x["activation_checkpointing"]
                and x["sharding"] == "none" and x["gpu"] == "h100")
    hopeless = {**ckpt, "trial_id": "hopeless", "duration_s": 30.0, "days": None, "step_s": None, "pass_s": None,
                "update_s": None, "mfu": None, "micro_batch": None, "grad_accum": None, "failure_kind": "dominated",
                "failure_message": "dominated: fits micro-batch 512, no more than a measured combination with "
                                   "fewer methods (512)"}
    base = calibration.replay_skips([x for x in rows if x is not ckpt], presets)
    r = calibration.replay_skips([x for x in rows if x is not ckpt] + [hopeless], presets)
    assert r["wrong"] == [] and r["saved_s"] >= base["saved_s"] + 30.0
    assert any(x["label"] == "ckpt" and x["model"] == "pythia-160m" for x in r["skipped"])


# --- the command ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["predict"], "--model"),
    (["predict", "--model", "pythia-1b"], "--gpu"),
    (["predict", "--model", "gpt-5", "--gpu", "h100"], "models.gpt-5"),
    (["predict", "--model", "pythia-1b", "--gpu", "tpu"], "gpus.tpu"),
    (["predict", "--model", "pythia-1b", "--gpu", "h100", "--num-gpus", "3"], "do not divide"),
    (["predict", "--model", "pythia-1b", "--gpu", "h100", "--num-gpus", "0"], "at least 1"),
    (["predict", "--model", "pythia-1b", "--gpu", "h100", "--methods", "zero9"], "no combination"),
    (["predict", "--model", "pythia-1b", "--gpu", "h100", "--all"], "--all"),
    (["predict", "--model", "pythia-1b", "--gpu", "h200", "--write"], "--db FILE"),
    (["predict", "--model", "pythia-1b", "--gpu", "h200", "--write", "--db", str(shipped_db())], "shipped"),
])
def test_bad_input_is_refused_clearly(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error" in err and message in err


def test_predict_command_prints_terms_writes_and_validates(tmp_path, capsys):
    assert main(["predict", "--model", "pythia-1b", "--gpu", "h200", "--num-gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "micro-batch" in out and "basis:" in out and "band" in out and "does not fit" not in out.split("fastest")[0]
    assert "This cell is measured" in out  # the shipped 2 x H200 rows: in its basis, so said so
    assert main(["predict", "--model", "pythia-1b", "--gpu", "a100", "--num-gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "no measurement of this cell" in out and "This cell is measured" not in out
    assert main(["predict", "--model", "pythia-1b", "--gpu", "h200", "--num-gpus", "2", "--methods", "zero1"]) == 0
    assert "no measurement of this cell" not in capsys.readouterr().out
    db = tmp_path / "mine.duckdb"
    assert main(["predict", "--model", "pythia-410m", "--gpu", "l40s", "--num-gpus", "4", "--db", str(db),
                 "--write", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["gpu"] == "l40s" and r["num_gpus"] == 4 for r in rows)
    with Store.open(db, read_only=True) as s:
        stored = s.trials(source="predicted")
    assert len(stored) == len(rows) and all(r["basis"] for r in stored if r["feasible"])
    assert main(["predict", "--validate"]) == 0
    out = capsys.readouterr().out
    assert "median |error|" in out and "worst" in out and "memory model" in out
    # issue 41, item 17: the counts agree (the title's configurations, those predicted, those not), and the
    # target is said to be met or missed, not only printed
    flat = " ".join(out.split())
    total = int(re.search(r"over (\d+) distinct measured configurations", flat).group(1))
    predicted, of = map(int, re.search(r"over the (\d+) of (\d+) configurations predicted", flat).groups())
    assert of == total and predicted == total - flat.count("measured, but not predicted:")
    worst = float(re.search(r"best setting per cell: median [\d.]+%, worst ([\d.]+)%", flat).group(1))
    said = re.search(r"target \(best setting per cell: median < 15%, none > 40%\): (met|missed)", flat).group(1)
    assert worst <= 40 or (said == "missed" and "above 40% (" in flat)


def test_predictions_are_stored_before_anything_is_printed(tmp_path, monkeypatch):
    """`predict --write ... | head` once lost every prediction: they were written after the table, and the closed
    pipe ended the command first. They are the record of what was expected before a cell is measured."""

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    db = tmp_path / "before.duckdb"
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    with pytest.raises(BrokenPipeError):
        main(["predict", "--model", "pythia-410m", "--gpu", "l40s", "--num-gpus", "2", "--db", str(db), "--write",
              "--format", "json"])
    with Store.open(db, read_only=True) as s:
        stored = s.trials(source="predicted")
    assert stored and all(r["gpu"] == "l40s" and r["num_gpus"] == 2 for r in stored)


def test_shipped_database_ranks_predicted_rows_for_gpus_without_data(capsys):
    assert main(["rank", "--model", "pythia-1b", "--budget", "50000", "--deadline", "60", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    h200nvl = next(r for r in rows if r["gpu"] == "h200nvl" and r["num_gpus"] == 1)  # nobody measured one
    assert h200nvl["source"] == "predicted" and h200nvl["days_low"] < h200nvl["days"] < h200nvl["days_high"]
    assert h200nvl["basis"]
    for gpu in ("h100", "h200"):  # both measured on one GPU (data/measured/)
        assert next(r for r in rows if r["gpu"] == gpu and r["num_gpus"] == 1)["source"] == "measured"


def test_help_fits_80_columns():
    import argparse
    import os

    from tui_planner.cli import _parser

    os.environ["COLUMNS"] = "80"
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["predict"].format_help()
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("module", ["engine.predict.memory", "engine.predict"])
def test_prediction_modules_load_neither_torch_nor_textual(module):
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import {module}; "
            "print([m for m in sys.modules if m.split('.')[0] in ('torch', 'textual', 'transformers')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_band_from_errors_of_one_sign_still_holds_its_prediction():
    from engine.predict.fit import Band

    fast = Band.from_errors([-0.3, -0.25, -0.2], "every prediction ran fast")
    assert fast.high_factor == pytest.approx(1 / 0.7) and fast.low_factor == 1.0
    slow = Band.from_errors([0.1, 0.2, 0.3], "every prediction ran slow")
    assert slow.low_factor == pytest.approx(1 / 1.3) and slow.high_factor == 1.0
    both = Band.from_errors([-0.1, 0.2, 0.05], "both ways")
    assert both.low_factor == pytest.approx(1 / 1.2) and both.high_factor == pytest.approx(1 / 0.9)


# --- the methods beyond the paper's (issue 42): fused kernels and FP8 ----------------------------------------


def test_rows_with_fused_or_fp8_feed_no_bf16_fit_calibration_or_overlap(presets):
    """A measured fp8 or fused row (even an absurdly fast one) changes nothing the bf16 engine is fitted on."""
    rows = _synthetic(presets)
    plain = predict.Predictor(rows, presets)
    extra = [_measured("pythia-1b", Methods(fp8=True), micro_batch=32, pass_s=0.01, fp8=True,
                       key="pythia-1b|h100|1|fp8"),
             _measured("pythia-1b", Methods(fused=True), micro_batch=64, pass_s=0.01, fused=True,
                       key="pythia-1b|h100|1|fused", provenance=json.dumps({"max_micro_batch_searched": 64}))]
    assert all(memory.beyond_the_paper(r) for r in extra)
    assert all(predict.basis_row(r, presets) is None for r in extra)
    assert all(calibration.fit_bracket(r, presets) is None for r in extra)
    mixed = predict.Predictor(rows + extra, presets)
    assert len(mixed.basis) == len(plain.basis)
    assert mixed.calibrations.keys() == plain.calibrations.keys()
    assert {k: c.kappa for k, c in mixed.calibrations.items()} == {k: c.kappa for k, c in plain.calibrations.items()}
    a = plain.predict("pythia-1b", "h200", 2, space.FREE_LUNCH)
    b = mixed.predict("pythia-1b", "h200", 2, space.FREE_LUNCH)
    assert (a.days, a.micro_batch) == (b.days, b.micro_batch)
    assert predict.leave_one_out(rows + extra, presets).checks == predict.leave_one_out(rows, presets).checks


def test_fp8_is_infeasible_without_fp8_tensor_cores_and_predicted_on_every_gpu_with_them(presets):
    p = predict.build_predictor(_synthetic(presets), presets, generations=False)
    fp8 = Methods(fp8=True)
    for gpu in presets.gpus.values():
        pred = p.predict("pythia-1b", gpu.id, 1, fp8)
        if not gpu.fp8:
            assert not pred.feasible and pred.days is None and pred.reason.startswith("no FP8 tensor cores"), gpu.id
        elif gpu.bf16 and pred.feasible:
            bf16 = p.predict("pythia-1b", gpu.id, 1, space.FREE_LUNCH)
            # faster, by no more than the FP8/16-bit peak ratio; MFU still against the 16-bit peak
            assert bf16.days / gpu.peak_fp8_tflops * gpu.peak_16bit_tflops <= pred.days < bf16.days, gpu.id
            assert pred.mfu == pytest.approx(formulas.mfu(presets.model("pythia-1b").flops_per_step, pred.step_s, 1,
                                                          gpu.peak_16bit_flops))
            assert pred.micro_batch == bf16.micro_batch  # fp8's memory: as bf16's (an assumption)
    assert p.predict("pythia-1b", "a100", 1, fp8).reason.startswith("no FP8 tensor cores")


def test_fused_drops_the_logits_from_memory_and_fits_a_larger_micro_batch(presets):
    model = presets.model("llama-3.2-1b")  # a 128k vocabulary: the logits are what limits the micro-batch
    plain = memory.activation_terms(model, space.FREE_LUNCH)
    fused = memory.activation_terms(model, Methods(fused=True))
    assert "logits and loss" in plain and "logits and loss" not in fused
    assert sum(fused.values()) < sum(plain.values())
    h100 = presets.gpu("h100")
    assert memory.max_micro_batch(model, h100, Methods(fused=True), 1) > memory.max_micro_batch(model, h100,
                                                                                                space.FREE_LUNCH, 1)


def test_the_extras_widen_the_band_and_their_basis_says_what_is_assumed(presets):
    p = predict.build_predictor(_synthetic(presets), presets)
    base = p.predict("pythia-1b", "h100", 1, space.FREE_LUNCH)
    for m in (Methods(fused=True), Methods(fp8=True), Methods(fused=True, fp8=True)):
        pred = p.predict("pythia-1b", "h100", 1, m)
        assert pred.feasible
        assert pred.days_high / pred.days > base.days_high / base.days  # wider above
        assert pred.days / pred.days_low > base.days / base.days_low  # and below
        for e in m.extras:
            assert f"{e} (" in pred.basis and "assumption" in pred.basis and "unmeasured" in pred.basis
    both = p.predict("pythia-1b", "h100", 1, Methods(fused=True, fp8=True))
    fp8 = p.predict("pythia-1b", "h100", 1, Methods(fp8=True))
    assert both.days_high / both.days > fp8.days_high / fp8.days  # two assumptions: wider than one
    assert "CHANGES NUMERICS" in fp8.basis and "torchtitan" in fp8.basis


def test_an_fp8_rows_limit_is_its_fp8_peak_not_the_16bit_one(presets):
    from engine.data import trust
    from engine.data.generations import impossible_mfu

    h100 = presets.gpu("h100")
    assert impossible_mfu(h100, fp8=True) == pytest.approx(1979 / 989.4)
    assert impossible_mfu(presets.gpu("a100"), fp8=True) == 1.0  # no FP8 peak: the 16-bit one
    model = presets.model("pythia-1b")

    def row(mfu, fp8):
        days = model.training_flops / (mfu * formulas.SECONDS_PER_DAY * h100.peak_16bit_flops)
        return dict(model="pythia-1b", gpu="h100", num_gpus=1, num_nodes=1, feasible=True, source="measured",
                    days=days, steps=model.training.steps, mfu=mfu, fp8=fp8, plausibility=None)

    assert trust.recheck(row(1.4, True), presets, {}).get("failure_kind") != "refused"  # 70% of its FP8 peak
    assert trust.recheck(row(1.4, True), presets, {})["plausibility"] == "implausible"  # past its line, not impossible
    assert trust.recheck(row(1.2, True), presets, {})["plausibility"] == "ok"  # 61% of it: under Hopper's 65%
    assert trust.recheck(row(1.3, False), presets, {}).get("failure_kind") == "refused"  # bf16: above 100%
    assert trust.recheck(row(2.1, True), presets, {}).get("failure_kind") == "refused"  # above the FP8 peak
    assert formulas.plausibility(1.3, 1.2, 2.0) == "implausible" and formulas.plausibility(1.3) == "impossible"


def test_predict_shows_fused_and_fp8_with_extras_and_marks_fp8(capsys):
    assert main(["predict", "--model", "pythia-1b", "--gpu", "h100", "--extras", "fused", "fp8"]) == 0
    out = capsys.readouterr().out
    for label in ("free-lunch", "fused", "fp8≈", "fused+fp8≈"):  # the table's mark, explained under it
        assert re.search(rf"^\s*{re.escape(label)}\s", out, re.M), label
    assert "≈ changes numerics: FP8 matrix products" in out and "MFU" in out  # every column at 80: the mark is short
    assert main(["predict", "--model", "pythia-1b", "--gpu", "a100", "--methods", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "no FP8 tensor cores" in out
    assert main(["predict", "--model", "pythia-1b", "--gpu", "h100", "--format", "json", "--methods", "fp8"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["setting"] == "fp8" and row["changes_numerics"] and row["feasible"]


def test_a_row_knows_whether_it_ran_with_the_heap_settings_and_a_probes_row_is_no_basis(presets):
    """FSDP offload rows: exactly the engine's glibc settings mark a row as run with them (a user's own value is
    another run); a trial run with the probe's 16-bit reduction serves no fit."""
    from engine.predict.fit import basis_row

    with Store.open(shipped_db(), read_only=True) as s:
        row = s.query("SELECT * FROM trials WHERE trial_id = 'bf84c7e1138f475bb26c0d4a93399cbb'")[0]
    prov = json.loads(row["provenance"])  # Pythia-1B FSDP-2 + offload on 2 x H200, 2026-11-28, twenty-fourth session
    assert basis_row(row, presets).host_heap  # measured with them
    before = {k: v for k, v in prov.items() if k != "host_malloc"}
    assert not basis_row({**row, "provenance": json.dumps(before)}, presets).host_heap

    def with_(**extra):
        return basis_row({**row, "provenance": json.dumps({**before, **extra})}, presets)

    assert with_(host_malloc=dict(space.HOST_MALLOC_ENV)).host_heap
    assert not with_(host_malloc={"MALLOC_TRIM_THRESHOLD_": "131072"}).host_heap
    assert with_(fsdp_reduce_dtype="bfloat16") is None
