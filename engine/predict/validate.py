"""How good the predictions are: leave-one-cell-out validation (each measured cell predicted from every
other cell, memory calibration included), the error band per architecture it gives, and the report
`tui-planner predict --validate` prints."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from engine.data import space
from engine.data.errors import PlannerError
from engine.data.links import own_links
from engine.data.runs import on_run
from engine.data.presets import Presets
from engine.predict import calibration, memory
from engine.predict import intervals as iv
from engine.predict.fit import Band, BasisRow, basis_row
from engine.predict.generations import base_fit, load_calibration
from engine.predict.predictor import Predictor
from engine.predict.terms import dense_causal_mask_of, group_of

# --- validation ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One held-out configuration: what the others predict for it."""

    model: str
    gpu: str
    num_gpus: int
    label: str
    source: str
    actual_days: float
    predicted_days: float | None
    actual_micro_batch: int | None
    predicted_micro_batch: int | None
    reason: str = ""
    measurements: int = 1  # a configuration measured several times: actual_days is their median

    @property
    def error(self) -> float | None:
        return None if self.predicted_days is None else self.predicted_days / self.actual_days - 1


@dataclass(frozen=True)
class Validation:
    checks: tuple[Check, ...]
    cells: int
    what: str

    @property
    def errors(self) -> list[float]:
        return [c.error for c in self.checks if c.error is not None]

    @property
    def missed(self) -> list[Check]:
        """Held-out configurations that ran but got no prediction (called infeasible, or no basis left)."""
        return [c for c in self.checks if c.predicted_days is None]

    @property
    def median_abs(self) -> float | None:
        e = self.errors
        return statistics.median(abs(x) for x in e) if e else None

    @property
    def worst_abs(self) -> float | None:
        e = self.errors
        return max(abs(x) for x in e) if e else None

    def best_of_cell(self) -> dict[tuple[str, str, int], float]:
        """Each cell's (model, GPU, count) error on its best setting: the fastest predicted against the fastest
        measured."""
        out = {}
        by_cell: dict[tuple, list[Check]] = {}
        for c in self.checks:
            by_cell.setdefault((c.model, c.gpu, c.num_gpus), []).append(c)
        for cell, checks in by_cell.items():
            pred = [c.predicted_days for c in checks if c.predicted_days is not None]
            if pred:
                out[cell] = min(pred) / min(c.actual_days for c in checks) - 1
        return out

    def best_of_cell_errors(self) -> list[float]:
        return list(self.best_of_cell().values())


class _Memo:
    """basis_row for these presets, once per row (by its trial id; a row without one is not memoized)."""

    def __init__(self, presets: Presets):
        self.presets, self.seen = presets, {}

    def __call__(self, row: Mapping[str, Any]) -> BasisRow | None:
        key = row.get("trial_id")
        if not key:
            return basis_row(row, self.presets)
        if key not in self.seen:
            self.seen[key] = basis_row(row, self.presets)
        return self.seen[key]


def leave_one_out(rows: Sequence[Mapping[str, Any]], presets: Presets, source: str = "measured",
                  archs: Iterable[str] | None = None) -> Validation:
    """Hold out each cell (model x GPU x count) with `source` rows, predict each of its configurations
    from every other row (fits and memory calibration redone without it; every measurement of the cell, on
    any day, is held out with it), compare with what it holds. A configuration measured more than once
    counts once, against the median of its measurements."""
    rows = [dict(r) for r in rows]
    wanted = set(archs) if archs is not None else None
    memo = _Memo(presets)
    targets = []
    for r in rows:
        b = memo(r)
        if b is None or not r["source"].startswith(source):
            continue
        if wanted is not None and b.arch not in wanted:
            continue
        targets.append((r, b))
    by_config: dict[tuple, list[tuple[dict, BasisRow]]] = {}
    for r, b in targets:
        by_config.setdefault((b.cell, b.methods, b.group), []).append((r, b))  # an engine fix: two
    cells = sorted({b.cell for _, b in targets})
    checks = []
    for cell in cells:
        others = [r for r in rows if (r["model"], r["gpu"], int(r["num_gpus"]) * int(r.get("num_nodes") or 1)) != cell]
        # as in use: paper rows only for an unmeasured architecture
        predictor = Predictor(others, presets, basis_of=memo)
        for (c, methods, _), same in by_config.items():
            if c != cell:
                continue
            same = sorted(same, key=lambda x: x[1].days)
            r, b = same[(len(same) - 1) // 2]
            p = predictor.predict(b.model, b.gpu, b.num_gpus, methods,
                                  dense_causal_mask=b.group == "compiled-mask")
            checks.append(Check(b.model, b.gpu, b.num_gpus, methods.label, r["source"],
                                statistics.median(x[1].days for x in same), p.days if p.feasible else None,
                                b.micro_batch, p.micro_batch, p.reason, len(same)))
    repeated = sum(1 for c in checks if c.measurements > 1)
    what = (f"leave-one-cell-out over {len(checks)} distinct {source} configurations in {len(cells)} cells"
            + (f" ({repeated} measured more than once, {len(targets)} measurements: each counts once, "
               f"at the median of its measurements)" if repeated else ""))
    return Validation(tuple(checks), len(cells), what)


def bands_for(rows: Sequence[Mapping[str, Any]], presets: Presets, for_arch: str | None = None) -> dict[str, Band]:
    """The error band per architecture: from measured leave-one-out where it is measured, else from
    leave-one-out over its plausible paper rows. With `for_arch` (a predictor for one model), only that
    architecture's where it is measured: an unmeasured one takes its family's, which needs them all."""
    rows = [dict(r) for r in rows]
    basis = [b for b in (basis_row(r, presets) for r in rows) if b is not None]
    measured = {b.arch for b in basis if b.source == "measured"}
    archs = {b.arch for b in basis}
    if for_arch is not None and for_arch in measured:
        archs = {for_arch}
    out = {}
    for arch in sorted(archs):
        source = "measured" if arch in measured else "paper"
        v = leave_one_out(rows, presets, source, archs=[arch])
        where = sorted({c.gpu for c in v.checks})
        what = f"{source} leave-one-out, {len(v.errors)} configurations in {v.cells} cells on {', '.join(where)}"
        if source == "measured" and len(where) == 1:
            what += " (other GPU generations add their own band, from published measurements)"
        out[arch] = Band.from_errors(v.errors, what)
    return out


def held_out_cases(rows: Sequence[Mapping[str, Any]], presets: Presets) -> list[iv.Case]:
    """The calibrated intervals' cases (engine/predict/intervals.py): every held-out configuration under each
    scheme, with its kind of extrapolation: cells, architectures, GPU types and an architecture's GPU counts
    held out whole, each configuration classified by what was left when it was predicted. The measurements
    timed under a micro-batch cap are targets too, each predicted at its cap: they are what says how wide a
    pass its floor sets is (intervals.FLOOR_BOUND)."""
    rows = [dict(r) for r in rows]
    memo = _Memo(presets)
    basis = [(r, memo(r)) for r in rows]
    measured = [(r, b) for r, b in basis if b is not None and b.source == "measured"]
    targets: dict[tuple, list[_Target]] = {}
    for r, b in measured:
        targets.setdefault((b.cell, b.methods, b.group, None), []).append(_Target(b.arch, b.model, b.gpu, b.num_gpus,
                                                                                  b.days))
    for t, methods, group in _capped_targets(rows, presets):
        targets.setdefault(((t.model, t.gpu, t.num_gpus), methods, group, t.cap), []).append(t)

    def key(r: Mapping[str, Any]) -> tuple[str, str, int]:
        return (r["model"], r["gpu"], int(r["num_gpus"]) * int(r.get("num_nodes") or 1))

    arch_of_model = {b.model: b.arch for _, b in measured}
    groups: list[tuple[str, Any]] = []
    groups += [("cell", c) for c in sorted({b.cell for _, b in measured})]
    groups += [("architecture", a) for a in sorted({b.arch for _, b in measured})]
    gpus = sorted({b.gpu for _, b in measured})
    if len(gpus) > 1:
        groups += [("gpu", g) for g in gpus]
    groups += [("count", (a, n)) for a, n in sorted({(b.arch, b.num_gpus) for _, b in measured})
               if len({bb.num_gpus for _, bb in measured if bb.arch == a}) > 1]

    def out_of(scheme: str, g: Any, r: Mapping[str, Any]) -> bool:
        m, gpu, n = key(r)
        a = arch_of_model.get(m)
        if scheme == "cell":
            return (m, gpu, n) == g
        if scheme == "architecture":
            return a == g and r.get("source") == "measured"
        if scheme == "gpu":
            return gpu == g and r.get("source") == "measured"
        return (a, n) == g and r.get("source") == "measured"

    cases = []
    for scheme, g in groups:
        held = [r for r in rows if out_of(scheme, g, r)]
        if not held:
            continue
        others = [r for r in rows if not out_of(scheme, g, r)]
        predictor = Predictor(others, presets, basis_of=memo)
        ev = predictor.evidence
        held_keys = {key(r) for r in held if r.get("source") == "measured"}
        # a row timed under a cap probes the floor: held out only where other probes remain to fit one (every
        # probe is on H200 hosts, so the H200 held out takes the floor with it and would test no floor at all)
        probes_left = any(space.capped(r) and r.get("source") == "measured" for r in others)
        for (cell, methods, group, cap), same in targets.items():
            if cell not in held_keys or (cap and not probes_left):
                continue
            b = same[0]
            p = predictor.predict(b.model, b.gpu, b.num_gpus, methods, dense_causal_mask=group == "compiled-mask",
                                  max_micro_batch=cap)
            if not p.feasible or not p.days:
                continue
            actual = statistics.median(x.days for x in same)
            kind = iv.kind_name(ev.evidence(b.arch, b.gpu, b.num_gpus), methods.offloading)
            label = methods.label + (f" (micro-batch at most {cap})" if cap else "")
            cases.append(iv.Case(scheme, kind, b.arch, b.model, b.gpu, b.num_gpus, label, p.days, actual,
                                 floor_bound=iv.floor_bound(p.terms.get("floor_lift")),
                                 floor_elsewhere=bool(p.terms.get("floor_elsewhere"))))
    return cases


@dataclass(frozen=True)
class _Target:
    """A measured configuration held out and predicted: its cell, its days, the cap it was timed under."""

    arch: str
    model: str
    gpu: str
    num_gpus: int
    days: float
    cap: int | None = None


def _read(r: Mapping[str, Any], presets: Presets) -> tuple[Any, Any, int] | None:
    """A measured row's model and methods as these presets read them, and its GPUs in all; None for a row they
    cannot read, or one of its model on another run (another step)."""
    try:
        model = presets.model(r["model"])
        presets.gpu(r["gpu"])
        methods = memory.methods_of(r)
    except PlannerError:
        return None
    if not on_run(r, model):
        return None
    return model, methods, int(r["num_gpus"]) * int(r.get("num_nodes") or 1)


def _capped_targets(rows: Sequence[Mapping[str, Any]], presets: Presets) -> list[tuple[_Target, Any, str]]:
    """The measured rows timed under a micro-batch cap (no basis row: engine/predict/fit.py keeps them out of
    the fits) that a predictor can be asked for: on the machine's own links, the paper's methods."""
    out = []
    for r in rows:
        cap = space.cap_of(r)
        if (cap is None or r.get("source") != "measured" or not r.get("feasible") or r.get("failure_kind")
                or not r.get("days") or r.get("plausibility") not in (None, "ok")
                or not own_links(r) or memory.beyond_the_paper(r)):
            continue
        read = _read(r, presets)
        if read is None or not space.is_valid(read[1], read[2]):
            continue  # unreadable, the model on another run of it (another step), or a setting this count cannot have
        model, methods, n = read
        group = group_of(model, methods, dense_causal_mask_of(r, model, methods))
        out.append((_Target(memory.arch_of(model), r["model"], r["gpu"], n, float(r["days"]), cap), methods, group))
    return out



def build_predictor(rows: Sequence[Mapping[str, Any]], presets: Presets, use_paper: bool = True,
                    generations: bool = True, for_model: str | None = None) -> Predictor:
    """A predictor over these rows with its error bands, and the factors and bands of the GPU generations
    our measurements are not on (fitted to published measurements, engine/predict/generations.py). With
    `for_model`, one that predicts that model only (its bands alone are worked out: quicker)."""
    arch = None
    if for_model is not None:
        try:
            arch = memory.arch_of(presets.model(for_model))
        except PlannerError:
            arch = None
    calibrated = iv.load()
    # With calibrated intervals (data/external/intervals.json, scripts/build_db.py) the per-architecture bands are not used.
    p = Predictor(rows, presets, use_paper=use_paper,
                  bands=None if calibrated is not None else bands_for(rows, presets, for_arch=arch))
    p.intervals = calibrated
    if generations:
        base = base_fit(p)
        if base is not None:
            p.generations = load_calibration(presets, base)
    return p



# The measured leave-one-out's target, on each cell's best setting (what a ranking is made of).
TARGET_MEDIAN, TARGET_WORST = 0.15, 0.40


def _summary(v: Validation) -> dict[str, Any]:
    best = v.best_of_cell_errors()
    over = {f"{m} {n}x{g}": e for (m, g, n), e in v.best_of_cell().items() if abs(e) > TARGET_WORST}
    mb = [c for c in v.checks if c.predicted_micro_batch is not None and c.actual_micro_batch]
    return {
        "what": v.what, "cells": v.cells, "errors": v.errors, "median_abs": v.median_abs, "worst_abs": v.worst_abs,
        "best_errors": best,
        "best_median_abs": statistics.median(abs(e) for e in best) if best else None,
        "best_worst_abs": max(abs(e) for e in best) if best else None,
        "target": {"median_below": TARGET_MEDIAN, "none_above": TARGET_WORST, "cells_above": over,
                   "met": bool(best) and statistics.median(abs(e) for e in best) < TARGET_MEDIAN and not over},
        "missed": [f"{c.model} {c.num_gpus}x{c.gpu} {c.label}: {c.reason}" for c in v.missed],
        "micro_batch_checked": len(mb),
        "micro_batch_agree": sum(1 for c in mb if c.predicted_micro_batch == c.actual_micro_batch),
        "checks": [{"model": c.model, "gpu": c.gpu, "num_gpus": c.num_gpus, "label": c.label, "source": c.source,
                    "measurements": c.measurements,
                    "actual_days": c.actual_days, "predicted_days": c.predicted_days, "error": c.error,
                    "actual_micro_batch": c.actual_micro_batch, "predicted_micro_batch": c.predicted_micro_batch,
                    "reason": c.reason} for c in v.checks],
    }


EXTRAS_TARGET = 0.15  # issue 42: predictions of the methods beyond the paper within 15% of their measurements


def extras_leave_one_out(rows: Sequence[Mapping[str, Any]], presets: Presets) -> dict[str, Any]:
    """The methods beyond the paper's (fused, fp8; engine/predict/extras.py) held out by cell: each measured
    configuration with them, by its latest row (as the predictor takes them: the engine's methods changed between
    measurements), predicted from every other row, its whole cell held out (the setting without the method too,
    so the ratio comes from other cells), against what was measured. fp8 under FSDP is checked where its weights
    were gathered as the engine gathers them today; older rows are named, not checked."""
    from engine.data.space import gathered_in_float8
    from engine.data.store import provenance_view

    latest: dict[tuple, dict] = {}
    skipped = []
    for r in rows:
        if (r.get("source") != "measured" or not memory.beyond_the_paper(r) or not r.get("feasible")
                or r.get("failure_kind") or not r.get("days") or space.cap_of(r) is not None or not own_links(r)):
            continue
        read = _read(r, presets)
        if read is None:
            continue
        _, methods, n = read
        key = (r["model"], r["gpu"], n, methods.label)
        if key not in latest or str(r.get("created_at") or "") > str(latest[key][0].get("created_at") or ""):
            latest[key] = (r, methods)
    checks = []
    held: dict[tuple, Any] = {}  # a predictor per held-out cell, for all of that cell's configurations
    for (model_id, gpu, n, label), (r, methods) in sorted(latest.items(), key=lambda kv: kv[0]):
        prov = provenance_view(r.get("provenance"))
        if prov.get("causal_mask") == "dense mask":
            skipped.append(f"{model_id} {n}x{gpu} {label}: the engine before its causal-attention fix")
            continue
        if methods.fp8 and methods.fsdp and gathered_in_float8(prov.get("fp8")) != methods.fp8_gathered_in_float8:
            skipped.append(f"{model_id} {n}x{gpu} {label}: its weights were gathered otherwise than the engine "
                           "gathers them today")
            continue
        cell = (model_id, gpu, n)
        if cell not in held:  # as a user gets it: the calibrated intervals, the generations' factors
            held[cell] = build_predictor([x for x in rows if (x["model"], x["gpu"], int(x["num_gpus"])
                                                              * int(x.get("num_nodes") or 1)) != cell], presets)
        try:
            p = held[cell].predict(model_id, gpu, n, methods)
        except PlannerError as exc:
            skipped.append(f"{model_id} {n}x{gpu} {label}: {exc}")
            continue
        error = p.days / float(r["days"]) - 1 if p.feasible and p.days else None
        taken = p.terms.get("extras_measured") or {}
        checks.append({"model": model_id, "gpu": gpu, "num_gpus": n, "label": label, "actual_days": float(r["days"]),
                       "predicted_days": p.days if p.feasible else None, "low": p.days_low, "high": p.days_high,
                       "error": error, "inside": (error is not None and p.days_low is not None
                                                  and p.days_low <= float(r["days"]) <= p.days_high),
                       "how": taken.get("how") or "the assumption (terms.py)", "reason": p.reason})
    errors = [c["error"] for c in checks if c["error"] is not None]
    within = sum(1 for e in errors if abs(e) <= EXTRAS_TARGET)
    return {"what": f"fused and fp8 held out by cell: {len(checks)} configurations measured with them",
            "checks": checks, "target": EXTRAS_TARGET, "within": within, "count": len(errors),
            "inside": sum(1 for c in checks if c["inside"]),
            "median_abs": statistics.median(abs(e) for e in errors) if errors else None,
            "met": bool(errors) and within == len(errors), "skipped": skipped}


def validation_report(rows: Sequence[Mapping[str, Any]], presets: Presets) -> dict[str, Any]:
    """What `predict --validate` prints: measured leave-one-out (the target), the memory calibration,
    and the checks against the paper's plausible rows (cross-GPU; the paper's own timing is optimistic)."""
    rows = [dict(r) for r in rows]
    report: dict[str, Any] = {"measured": _summary(leave_one_out(rows, presets, "measured"))}
    lines = [c.describe() for c in calibration.calibrate(rows, presets).values()]
    predictor = Predictor(rows, presets)
    ratios = []
    for r in rows:
        if r.get("source") == "measured" and r.get("peak_memory_gb") and r.get("micro_batch") and r.get("days"):
            try:
                model = presets.model(r["model"])
                cal = calibration.kappa_for(model, predictor.calibrations)
                n = int(r["num_gpus"]) * int(r.get("num_nodes") or 1)
                need = memory.need(model, memory.methods_of(r), n, r["micro_batch"], cal.kappa).total_bytes / 1e9
            except PlannerError:
                continue
            ratios.append(need / r["peak_memory_gb"])
    if ratios:
        lines.append(f"need at the measured micro-batch / measured peak (compiled run): median {statistics.median(ratios):.2f}, "
                     f"range {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} rows (eager search needs more)")
    report["memory"] = lines
    basis = [b for b in (basis_row(r, presets) for r in rows) if b is not None]
    measured = sorted({b.arch for b in basis if b.source == "measured"})
    cross = []
    if measured:
        v = leave_one_out(rows, presets, "paper-table1", archs=measured)
        s = _summary(v)
        s.update(title=f"paper Table 1, plausible rows, {', '.join(measured)}",
                 note="predicted from the measured rows: other GPUs and counts; the paper's unsynchronized "
                      "timer makes its days optimistic, so positive errors are expected")
        cross.append(s)
    for arch in sorted({b.arch for b in basis} - set(measured)):
        v = leave_one_out(rows, presets, "paper", archs=[arch])
        s = _summary(v)
        s.update(title=f"{arch} (no measurement: paper basis)",
                 note="leave-one-out over the paper's plausible rows; its band for predictions")
        cross.append(s)
    report["cross"] = cross
    report["published"] = published_report(rows, presets, predictor)
    report["intervals"] = interval_report(rows, presets, predictor, report["published"])
    report["extras"] = extras_leave_one_out(rows, presets)
    report["skip"] = calibration.replay_skips(rows, presets)
    report["skip_today"] = calibration.replay_skips(rows, presets, as_ran=False)
    return report



def interval_report(rows: Sequence[Mapping[str, Any]], presets: Presets, predictor: Predictor,
                    published: Mapping[str, Any]) -> dict[str, Any]:
    """The calibrated intervals (engine/predict/intervals.py): the held-out cases per kind of extrapolation
    (cells, architectures, GPU types and GPU counts held out whole), the width each kind gets, and how many
    cases fall inside the interval they would have been given; a kind off the stated level by more than the
    tolerance (with enough cases) is named, and so is every architecture measured in one cell only."""
    cases = held_out_cases(rows, presets)
    cal = iv.calibrate(cases, predictor.evidence)
    kinds = iv.coverage(cases, predictor.evidence)
    pub = published.get("interval_coverage", [])
    failing = [k for k in kinds + pub if k["off"]]
    few = [k for k in kinds + pub if k["cases"] < iv.MIN_CASES]
    return {
        "level": iv.LEVEL, "tolerance": iv.TOLERANCE, "min_cases": iv.MIN_CASES, "cases": len(cases),
        "kinds": kinds, "published": pub, "failing": [k["kind"] for k in failing], "few": [k["kind"] for k in few],
        "met": not failing,
        "widths": {k: math.exp(2 * w) for k, w in cal.widths.items()},
        "single_cell": {a: math.exp(2 * w) for a, w in cal.single_cell.items()},
        "by_arch": iv.by_arch(cases),
        "shipped": (lambda s: s.to_json() if s is not None else None)(iv.load()),
    }


def published_report(rows: Sequence[Mapping[str, Any]], presets: Presets, predictor: Predictor) -> dict[str, Any]:
    """The GPU generations' validation on published measurements (data/external): each group of rows predicted
    from a fit without it, per source and per generation; each generation predicted as if nobody had
    measured it; the published ratio of two GPUs' speeds against the predicted one."""
    from engine.data.external import load
    from engine.predict import generations as gen

    base = gen.base_fit(predictor)
    if base is None:
        return {"rows": 0, "why": "no measured transformer to predict published rows from"}
    data = load(gpu_ids=set(presets.gpus))
    terms = gen.all_terms(data, presets, base)
    if not terms:
        return {"rows": 0, "why": "no usable published row"}
    full = gen.fit(terms, cycles=20)
    held = gen.leave_group_out(terms, full)
    far = gen.leave_generation_out(terms, full)
    ratios = gen.ratio_checks(held)
    # the generations' own widths, each group checked against the widths of the other sources' rows (held out
    # by group), and each generation predicted as if nobody had measured it against the other generations'
    coverage = (iv.published_coverage(held, lambda c: f"{c.generation} (published rows)", lambda c: c.row.source)
                + iv.published_coverage(far, lambda c: "generation nobody measured", lambda c: c.generation,
                                        widest=True))
    left: dict[str, int] = {}
    for _, why in data.left_out:
        left[why] = left.get(why, 0) + 1
    return {
        "interval_coverage": coverage,
        "rows": len(terms), "sources": {s.id: {"use": s.use, "note": s.note, "why_not": s.why_not}
                                        for s in data.sources.values()},
        "left_out": left,
        "by_source": gen.summary(held, lambda c: c.row.source),
        "by_generation": gen.summary(held, lambda c: c.generation),
        "extrapolated": gen.summary(far, lambda c: f"{c.generation} (as {c.factors_from})"),
        "ratios": {"count": len(ratios),
                   "median_abs": statistics.median(abs(r["error"]) for r in ratios) if ratios else None,
                   "worst_abs": max(abs(r["error"]) for r in ratios) if ratios else None,
                   "within_20": sum(1 for r in ratios if abs(r["error"]) <= 0.2), "checks": ratios},
        "relative": gen.relative_speeds(held),
        "factors": {g: {"compute": full.kc[g], "attention": full.ka[g], "memory": full.km[g], "rows": full.rows[g]}
                    for g in sorted(full.kc)},
        "cards": {c: {"compute": f, "rows": full.card_rows.get(c, 0)} for c, f in sorted(full.card.items())
                  if f != 1.0},
        # a card without rows that takes the factor of the card on its chip (the preset's same_chip_as)
        "borrowed": {g.id: g.same_chip_as for g in sorted(presets.gpus.values(), key=lambda g: g.id)
                     if g.same_chip_as and full.card_source(g.id, g.same_chip_as) == g.same_chip_as},
        "attention": full.attention, "exposed": full.exposed, "source_factors": full.source,
        "base_fit": {"x_c": base.x_c, "x_m": base.x_m},
        "checks": [{"row": c.row.label, "generation": c.generation, "predicted_s": c.predicted_s,
                    "published_s": c.published_s, "error": c.error} for c in held],
    }
