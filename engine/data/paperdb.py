"""Build the shipped database's paper rows from data/paper/*.csv: Table 1, Table 4 and Appendix J.

Each row carries its source (`paper-table1`, `paper-table4`) and the MFU its days imply, computed with
the presets' training FLOPs and dense 16-bit peaks; a row above 60% is flagged implausible and above
100% impossible: the paper's timer did not synchronize the GPU (reference notes, ANCHOR.md).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import uuid
from pathlib import Path

from engine.data import formulas
from engine.data.presets import Presets
from engine.data.runs import run_columns
from engine.data.store import Run, Store, Trial
from engine.data.generations import judge

PAPER = "Khandelwal et al. (2024), $100K or 100 Days, arXiv 2410.23261"
PAPER_DATE = dt.datetime(2024, 10, 30)
_NS = uuid.UUID("6f1b7a52-2b1c-4c7e-9a55-6d1c1e0f0a01")


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _bool(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text.strip().lower())


def _row_id(key: str) -> str:
    return uuid.uuid5(_NS, key).hex


def paper_trials(data_dir: Path, presets: Presets, run_id: str) -> list[Trial]:
    configs = {(r["model"], r["gpu"], int(r["num_gpus"])): r for r in _rows(data_dir / "paper_appendixJ_optimal_configs.csv")}
    trials: list[Trial] = []
    for table, source, file in (
        ("Table 1", "paper-table1", "paper_table1_optimal_days.csv"),
        ("Table 4", "paper-table4", "paper_table4_naive_days.csv"),
    ):
        for r in _rows(data_dir / file):
            model, gpu, n = presets.model(r["model"]), presets.gpu(r["gpu"]), int(r["num_gpus"])
            note = r.get("note", "") or ""
            if not r["days"] and "unknown" in note:
                continue  # the OCR lost this cell; it is not an infeasible result
            key = f"{model.id}|{gpu.id}|{n}|1|{source}"
            t = Trial(
                model=model.id, gpu=gpu.id, num_gpus=n, feasible=bool(r["days"]), source=source,
                run_id=run_id, trial_id=_row_id(key), key=key, created_at=PAPER_DATE,
                analytic_days=formulas.analytic_days(model.training_flops, n, gpu.peak_16bit_flops),
                **run_columns(model),
            )
            provenance = {"paper": PAPER, "days": table}
            if source == "paper-table4":
                t.free_lunch, t.compile, t.tf32 = False, False, False
                t.activation_checkpointing, t.sharding, t.offloading = False, "none", False
            else:
                t.free_lunch = True
                c = configs.get((model.id, gpu.id, n))
                if c and t.feasible:
                    t.activation_checkpointing = _bool(c["activation_checkpointing"])
                    t.sharding = c["sharding"] or None
                    t.offloading = _bool(c["offloading"])
                    t.micro_batch = int(c["micro_batch_size"]) if c["micro_batch_size"] else None
                    t.grad_accum = int(c["grad_accum_steps"]) if c["grad_accum_steps"] else None
                    t.config_source = "paper-appendixJ"
                    provenance["settings"] = "Appendix J" + (f" (unread cells: {c['note']})" if c["note"] else "")
            if t.feasible:
                t.days = float(r["days"])
                t.step_s = t.days * formulas.SECONDS_PER_DAY / model.training.steps
                t.mfu = formulas.implied_mfu(model.training_flops, t.days, n, gpu.peak_16bit_flops)
                t.plausibility = judge(gpu, t.mfu)
                t.samples_per_s = model.training.batch_size / t.step_s
                if model.seq_len:
                    t.tokens_per_s = t.samples_per_s * model.seq_len
            else:
                t.failure_kind = "infeasible"
                t.failure_message = f"{table}: no result (a dash in the paper: does not fit at any setting)"
            provenance["mfu"] = (
                f"implied: {model.training_flops:.3g} FLOPs ({model.training_flops_source}) / "
                f"(days x 86400 x {n} x {gpu.peak_16bit_tflops} TFLOP/s)"
            )
            t.provenance = json.dumps(provenance)
            trials.append(t)
    return trials


def add_paper(store: Store, data_dir: Path, presets: Presets) -> str:
    """Add the paper's run, trials, prices, machine costs and training FLOPs; returns the run id."""
    run = Run(source="paper", run_id=_row_id("paper-run"), note=PAPER, started_at=PAPER_DATE,
              ended_at=PAPER_DATE, status="published",
              command="scripts/build_db.py (from data/paper/*.csv)")
    store.add_run(run)
    store.add_trials(paper_trials(data_dir, presets, run.run_id))
    store.record_presets(run.run_id, presets)
    # The paper's own prices (2024-09-21) where it priced the GPU, else the preset's dated one.
    priced = [(g.id, g.paper_price or g.price) for g in presets.gpus.values() if g.paper_price or g.price]
    with_prices = [(gid, p.usd, p.date, p.source) for gid, p in priced]
    store.insert("gpu_prices", ("gpu", "usd", "date", "source"), with_prices)
    store.insert("machine_costs", ("num_gpus", "kind", "cost_usd", "source"),
                  [(m.num_gpus, m.kind, m.cost_usd, m.source) for m in presets.machines.values()])
    flops = []
    for m in presets.models.values():
        flops.append((m.id, m.training_flops, m.training_flops_source))
        if m.paper_training_flops:
            flops.append((m.id, m.paper_training_flops, "paper Fig. 9a (not used: see the model preset's note)"))
    store.insert("model_flops", ("model", "training_flops", "source"), flops)
    return run.run_id
