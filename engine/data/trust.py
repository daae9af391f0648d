"""No number in a results file from elsewhere is taken on trust: each row's figures are recomputed from its own
timings and shape before anything ranks, fits or shows them.

A row's step is its pass x accumulation + update (when it has them), its days that step x its steps, its MFU the
FLOPs of one step of its run (the model's FLOPs per token, or per image, from the presets, x the batch and
sequence its `training_run` names) over its days' worth of the GPUs' dense peak. A stored figure that disagrees
with the recomputed one by more than 1% is replaced by it (and the row says so in `plausibility`); a row whose
recomputed MFU is above 100% of the peak (an fp8 row: of its FP8 peak, its MFU still against the 16-bit one), whose time is not a positive finite number, or whose FLOPs or GPU
nothing here knows, is refused as the engine refuses its own (feasible false, `failure_kind` 'refused', no
days), with why. No torch here.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping

from engine.data import formulas
from engine.data.generations import fp8_peak_ratio, impossible_mfu, judge

TOLERANCE = 0.01  # a stored figure within 1% of its recomputation stands (rounding, float text)
_RUN = re.compile(r"^(\d+)x(\d+)(px)?\b")


def own_run(model: Any) -> tuple[float, float, float] | None:
    """A model's own run: (training FLOPs per token, or per image; tokens or images a step; steps), from a
    preset Model or the JSON a sweep stored of it; None where it does not say."""
    try:
        if isinstance(model, Mapping):
            t, flops, per_sample = model["training"], model["training_flops"], model.get("seq_len") or 1
            steps, batch = float(t["steps"]), float(t["batch_size"])
        else:
            t, flops, per_sample = model.training, model.training_flops, model.seq_len or 1
            steps, batch = float(t.steps), float(t.batch_size)
        units = batch * float(per_sample)
        return float(flops) / (steps * units), units, steps
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        return None


def run_units(training_run: str | None) -> float | None:
    """Tokens (or images) a step of a run key: '1024x2049 bf16 adamw' -> 1024 x 2049; '4096x224px ...' -> 4096."""
    found = _RUN.match(training_run or "")
    if not found:
        return None
    batch, size, image = int(found.group(1)), int(found.group(2)), bool(found.group(3))
    return float(batch) if image else float(batch * size)


def _finite(x: Any) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _off(stored: float | None, computed: float) -> bool:
    return stored is None or abs(stored - computed) > TOLERANCE * abs(computed)


def recheck(row: dict[str, Any], presets: Any, stored_models: Mapping[tuple[str, str], Any]) -> dict[str, Any]:
    """The row with its figures recomputed (a new dict; the input is left as it is). `presets` gives models and
    GPUs; `stored_models` maps (run_id, model id) to the JSON a sweep stored of its model, used for a model no
    preset names (a config.json of someone's own)."""
    r = dict(row)
    if r.get("gpu") == "cpu" or (r.get("failure_kind") in ("oom", "refused", "memory", "unsupported", "cannot-win",
                                                           "failed", "timeout", "stopped") and r.get("days") is None):
        return r  # nothing timed to check (a CPU run has no peak to compare with)
    fixed: list[str] = []
    step, days = _finite(r.get("step_s")), _finite(r.get("days"))
    pass_s, accum, update = _finite(r.get("pass_s")), _finite(r.get("grad_accum")), _finite(r.get("update_s"))
    if r.get("source") == "measured" and pass_s is not None and accum is not None and update is not None:
        computed = pass_s * accum + update
        if step is None or _off(step, computed):
            fixed.append("step_s")
            step = computed
    steps = _finite(r.get("steps"))
    if step is not None and steps is not None:
        computed = step * steps / formulas.SECONDS_PER_DAY
        if days is None or _off(days, computed):
            if days is not None or r.get("days") is not None:
                fixed.append("days")
            days = computed
    if (r.get("days") is not None and days is None) or any(
            v is not None and v <= 0 for v in (step, days)) or any(
            v is not None and v < 0 for v in (pass_s, update)):
        return _refuse(r, "its time is not a positive finite number")
    if days is None:
        r["mfu"] = None
        return r  # no time claimed (an out-of-memory row, a prediction that does not fit)
    own = own_run(_model(r, presets, stored_models))
    per_unit = own[0] if own else None
    # A row without its run (an older file's, or written by hand) is on its model's own run, as everywhere
    # (Store.fill_training_runs): that run's batch, sequence and steps.
    units = run_units(r.get("training_run")) or (own[1] if own else None)
    if steps is None:
        steps = own[2] if own else None
        if step is not None and steps is not None and days is None:
            days = step * steps / formulas.SECONDS_PER_DAY
    gpu = presets.gpus.get(r.get("gpu")) if r.get("gpu") else None
    n = (_finite(r.get("num_gpus")) or 0) * (_finite(r.get("num_nodes")) or 1)
    if per_unit is None or units is None or steps is None or gpu is None or n < 1:
        why = ("its model's FLOPs are known to no preset" if per_unit is None else
               "its run (batch x sequence) or steps are missing" if units is None or steps is None else
               f"GPU {r.get('gpu')!r} is in no preset" if gpu is None else "its GPU count is not a whole number")
        return _refuse(r, f"its MFU cannot be recomputed ({why})")
    mfu = per_unit * units * steps / (days * formulas.SECONDS_PER_DAY * n * gpu.peak_16bit_flops)
    # An fp8 row's MFU is against the 16-bit peak too; what it cannot pass is its FP8 peak (generations.py).
    fp8 = bool(r.get("fp8"))
    limit, ratio = impossible_mfu(gpu, fp8), fp8_peak_ratio(gpu, fp8)
    stored_mfu = _finite(r.get("mfu"))
    if stored_mfu is not None and not _off(stored_mfu, mfu) and mfu <= limit:
        mfu = stored_mfu  # the same figure (a prediction capped at the line stays at it, not a hair above)
    elif stored_mfu is not None or r.get("mfu") is not None:
        fixed.append("mfu")
    r["step_s"], r["days"], r["mfu"] = step, days, mfu
    found = _RUN.match(r.get("training_run") or "")
    if step and found:
        r["samples_per_s"] = float(found.group(1)) / step
        if not found.group(3):
            r["tokens_per_s"] = units / step
    floor = per_unit * units * steps / (formulas.SECONDS_PER_DAY * n * gpu.peak_16bit_flops * ratio)  # at 100% of the peak
    for k in ("days_low", "days_high"):
        v = _finite(r.get(k))
        r[k] = None if v is None else max(v, floor)
    if mfu > limit:
        if str(r.get("source", "")).startswith("paper"):
            # The paper's own figures above the peak (its timer did not synchronize) are kept and flagged
            # 'impossible', as the shipped database holds them: nothing ranks or fits on such a row.
            r["plausibility"] = "impossible"
            return r
        return _refuse(r, f"{mfu:.0%} of the GPUs' dense 16-bit peak is physically impossible"
                          + (f" (an fp8 row's limit is the FP8 peak, {limit:.0%} of it)" if ratio != 1 else ""))
    # a judgment against today's line, never the file's word: a row above its generation's line reads
    # 'implausible' whatever the file says, and one under a line raised since reads 'ok'
    r["plausibility"] = judge(gpu, mfu, fp8)
    if fixed:
        r["provenance"] = _with_note(r.get("provenance"), fixed)
    return r


def _model(r: Mapping[str, Any], presets: Any, stored: Mapping[tuple[str, str], Any]) -> Any:
    mid = str(r.get("model") or "")
    if mid in presets.models:
        return presets.models[mid]
    base = mid.split("+", 1)[0]  # a preset on a run of its own: pythia-1b+b512s4096 (engine/data/runs.py)
    if base in presets.models:
        return presets.models[base]
    return stored.get((r.get("run_id"), mid))


def _refuse(r: dict[str, Any], why: str) -> dict[str, Any]:
    said = "; ".join(str(x) for x in (r.get("failure_kind"), r.get("failure_message")) if x)
    r.update(feasible=False, failure_kind="refused", days=None, days_low=None, days_high=None, mfu=None,
             plausibility="impossible" if "impossible" in why else None,
             failure_message=f"refused on reading: {why}; the file's own figures are not shown"
                             + (f" (the file said: {said})" if said else ""))
    return r


def _with_note(provenance: Any, fixed: list[str]) -> str:
    try:
        p = json.loads(provenance) if isinstance(provenance, str) and provenance else {}
    except ValueError:
        p = {}
    if not isinstance(p, dict):
        p = {}
    p["recomputed_on_reading"] = fixed
    return json.dumps(p, default=str)


def stored_models(rows: list[tuple[str, str, str]]) -> dict[tuple[str, str], Any]:
    """(run_id, id, content) rows of a file's presets table (kind 'model') -> the parsed JSON of each."""
    out: dict[tuple[str, str], Any] = {}
    for run_id, mid, content in rows:
        try:
            m = json.loads(content)
        except (TypeError, ValueError):
            continue
        if isinstance(m, dict):
            out[(run_id, mid)] = m
    return out
