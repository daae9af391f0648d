"""Predictions as store rows: source 'predicted', with their basis, band and derivation; and the
predictions the shipped database holds for every cell no measurement covers."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from typing import Any, Iterable, Mapping, Sequence

from engine.data import formulas, space
from engine.data.presets import Gpu, Model, Network, Presets
from engine.data.runs import run_columns
from engine.predict.memory import MemoryModelError, shape
from engine.predict.predictor import Prediction, Predictor
from engine.predict.terms import arch_of
from engine.data.generations import judge

# --- storing ------------------------------------------------------------------------------------------


PREDICTED_NS = uuid.UUID("2b7c0d4e-8a51-4f6e-b1f3-5d0c9e7a3c11")


def predicted_key(model: str, gpu: str, num_gpus: int, label: str, interconnect: str | None = None,
                  nodes: int = 1, max_micro_batch: int | None = None) -> str:
    """The key of a stored prediction (never a measured trial's: those end in their device): num_gpus in all,
    keyed as a trial is, GPUs a node then nodes. One for GPUs without peer access on a machine that has it
    (`host-staged`), or for nodes joined by a network, ends in that; one at a micro-batch capped as asked ends
    in `|max-mb-N`, as the trial measured so is keyed."""
    return (f"{model}|{gpu}|{num_gpus // nodes}|{nodes}|{label}|predicted"
            + (f"|{interconnect}" if interconnect else "")
            + (f"{space.CAPPED}{max_micro_batch}" if max_micro_batch else ""))


def trial_of(p: Prediction, run_id: str, model: Model, gpu: Gpu, created_at: dt.datetime | None = None,
             interconnect: str | None = None):
    """A prediction as a store row: source 'predicted', its basis, its band and how it was derived."""
    from engine.data.store import Trial

    interconnect = interconnect or p.network
    key = predicted_key(p.model, p.gpu, p.num_gpus, p.methods.label, interconnect, p.nodes, p.max_micro_batch)
    t = Trial(
        model=p.model, gpu=p.gpu, num_gpus=p.num_gpus // p.nodes, num_nodes=p.nodes, interconnect=interconnect,
        feasible=p.feasible, source="predicted", run_id=run_id,
        trial_id=uuid.uuid5(PREDICTED_NS, f"{run_id}|{key}").hex, key=key,
        free_lunch=p.methods.free_lunch, activation_checkpointing=p.methods.activation_checkpointing,
        sharding=p.methods.sharding, offloading=p.methods.offloading, fused=p.methods.fused, fp8=p.methods.fp8,
        compile=space.uses_compile(p.methods, model.compile),
        micro_batch=p.micro_batch, grad_accum=p.grad_accum, pass_s=p.pass_s, update_s=p.update_s,
        step_s=p.step_s, days=p.days, mfu=p.mfu,
        plausibility=judge(gpu, p.mfu, p.methods.fp8),
        analytic_days=formulas.analytic_days(model.training_flops, p.num_gpus, gpu.peak_16bit_flops),
        basis=p.basis or None, days_low=p.days_low, days_high=p.days_high, memory_need_gb=p.memory_need_gb,
        provenance=json.dumps({"predicted": p.terms, "explanation": p.lines,
                               **({"interconnect": interconnect} if interconnect else {})}, default=str),
        **run_columns(model),
    )
    if created_at is not None:
        t.created_at = created_at
    if p.feasible and p.step_s:
        t.samples_per_s = model.training.batch_size / p.step_s
        if model.seq_len:
            t.tokens_per_s = t.samples_per_s * model.seq_len
    else:
        t.failure_kind = "memory" if "does not fit" in p.reason else "unsupported"
        t.failure_message = f"predicted: {p.reason}"
    return t


def measured_cells(rows: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, int]]:
    """Cells with a measured time: those need no prediction (a cell whose every trial failed, a host out
    of memory say, keeps its prediction beside the failures)."""
    return {(r["model"], r["gpu"], int(r["num_gpus"]) * int(r.get("num_nodes") or 1))
            for r in rows if r.get("source") == "measured" and r.get("feasible") and r.get("days")}


def write_predictions(store, preds: Sequence[Prediction], presets: Presets, command: str,
                      run_id: str | None = None, created_at: dt.datetime | None = None,
                      interconnect: str | None = None) -> int:
    """Store predictions as rows of a 'predicted' run; a prediction of the same cell and setting made
    earlier is replaced (the newest basis wins)."""
    from engine.data.store import Run

    if not preds:
        return 0
    when = created_at or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    run = Run(source="predicted", run_id=run_id or uuid.uuid4().hex, command=command, started_at=when,
              ended_at=when, status="done",
              note="engine/predict/: roofline fitted to measured rows, memory model for the micro-batch")
    trials = [trial_of(p, run.run_id, presets.model(p.model), presets.gpu(p.gpu), when, interconnect)
              for p in preds]
    keys = [t.key for t in trials]
    store.con.execute("DELETE FROM trials WHERE source = 'predicted' AND key IN (SELECT unnest(?))", [keys])
    store.add_run(run)
    store.add_trials(trials)
    return len(trials)


def predict_missing(predictor: Predictor, presets: Presets, models: Iterable[str] | None = None,
                    counts: Sequence[int] = (1, 2, 4, 8), best_only: bool = False, nodes: int = 1,
                    network: "Network | None" = None) -> list[Prediction]:
    """Every combination on every GPU preset x count that holds no measured row, for each model with a
    basis; models without one are left out (no prediction without a basis). best_only keeps one row per
    cell: the fastest feasible combination, or, when none fits, the one closest to fitting (it says why).
    nodes > 1: `counts` GPUs a machine, over `nodes` machines joined by `network` (nothing measured there)."""
    measured = measured_cells(predictor.stored) if nodes == 1 else set()
    out: list[Prediction] = []
    for model_id in models or presets.models:
        model = presets.model(model_id)
        try:
            arch = arch_of(model)
            shape(model)
        except MemoryModelError:
            continue
        if not any(b.arch == arch or (b.source == "measured" and b.family == shape(model).family)
                   for b in predictor.basis):
            continue
        for gpu in presets.gpus:
            for per_node in counts:
                n = per_node * nodes
                if model.training.batch_size % n or (model.id, gpu, n) in measured:
                    continue
                cell = predictor.predict_cell(model.id, gpu, n, nodes=nodes, network=network)
                if best_only:
                    fits = [p for p in cell if p.feasible]
                    cell = fits[:1] or sorted(cell, key=lambda p: p.memory_need_gb or math.inf)[:1]
                out.extend(cell)
    return out


