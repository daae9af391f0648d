"""Calibrating the memory model on what the sweeps found, and skipping what cannot fit.

Each measured row says "micro-batch b fitted and 2b did not" (the engine searches powers of two until
out-of-memory), which brackets kappa (engine/predict/memory.py); the calibration takes the middle of the
range every row allows, per architecture. The sweep (engine/bench/sweep.py) uses a trusted calibration to
skip combinations that cannot fit or cannot win; `replay_skips` says what that would have saved on the
shipped sweeps. No torch here.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from engine.data.errors import PlannerError
from engine.data.presets import Gpu, Model, Presets
from engine.data.space import Methods, capped
from engine.data.store import provenance_view
from engine.predict.memory import (Need, activation_terms, arch_of, beyond_the_paper, capacity_bytes, gb, methods_of,
                                   micro_batches, need, shape, static_terms)

@dataclass(frozen=True)
class Calibration:
    """kappa for one architecture (or, as a fallback, a family): the middle of the range the measured
    fits allow."""

    scope: str  # an architecture ('GPTNeoX') or a family ('transformer family')
    kappa: float
    low: float  # every row agrees kappa > low ...
    high: float  # ... and kappa <= high (when low < high)
    rows: int
    conflicts: int = 0  # rows whose bracket misses the chosen kappa
    basis: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        if not self.rows:
            return f"kappa {self.kappa:g} for {self.scope} (uncalibrated: no measured fits)"
        if self.low < self.high:
            rng = f"{self.low:.2f}-{self.high:.2f}"
        elif _near_miss(self.low, self.high):
            rng = f"{self.high:.3f}-{self.low:.3f}, within the {FIT_TOLERANCE:.0%} a fit boundary is sharp,"
        else:
            rng = "no common range"
        extra = f", {self.conflicts} rows disagree" if self.conflicts else ""
        return f"kappa {self.kappa:.2f} for {self.scope} ({rng} from {self.rows} measured fits{extra})"

    @property
    def trusted(self) -> bool:
        """Calibrated on this architecture's own fits, all agreeing: safe to skip trials with."""
        return self.rows > 0 and self.conflicts == 0 and not self.scope.endswith(" family")


def fit_bracket(row: Mapping[str, Any], presets: Presets) -> tuple[float, float] | None:
    """The kappa range one measured row allows: its searched micro-batch b fitted (kappa <= hi) and,
    unless b was the largest candidate, 2b did not (kappa > lo). None when the row says nothing."""
    if row.get("source") != "measured" or row.get("gpu") not in presets.gpus or beyond_the_paper(row):
        return None  # (fused kernels or FP8: another memory than the one kappa is calibrated for)
    if capped(row):
        return None  # its search stopped at the cap asked for (`bench --max-micro-batch`), not where memory ran out
    try:
        model = presets.model(row["model"])
        s = shape(model)
    except PlannerError:
        return None
    prov = provenance_view(row.get("provenance"))
    searched = whole(prov.get("max_micro_batch_searched"))  # (a results file may hold anything there)
    failed_at = None  # a micro-batch that ran out of memory, when that is all the row says
    if row.get("failure_kind") == "oom" and not searched:
        failed_at = oom_micro_batch(row)
        if failed_at is None:
            return None
    elif row.get("failure_kind") == "dominated" and not searched:
        # The search started above a dominance floor and the first size tried did not fit.
        found = _DOES_NOT_FIT.search(row.get("failure_message") or "")
        if not found:
            return None
        failed_at = whole(int(found.group(1)))
        if failed_at is None:
            return None
    elif not (row.get("feasible") and row.get("days")):
        return None
    searched = searched or whole(row.get("micro_batch"))
    if searched is None and failed_at is None:
        return None
    try:
        methods = methods_of(row)
        gpu = presets.gpu(row["gpu"])
    except PlannerError:
        return None  # a setting this version does not know (or a GPU no preset has): no evidence for kappa
    n = int(row["num_gpus"]) * int(row.get("num_nodes") or 1)
    cap = capacity_bytes(gpu)
    stat = sum(static_terms(model, methods, n).values())
    act = sum(activation_terms(model, methods).values())
    if act <= 0 or s is None:
        return None
    candidates = micro_batches(model, n)
    if failed_at is not None:
        return ((cap - stat) / (failed_at * act), math.inf)
    hi = math.inf if gradients_freed(row, methods) else (cap - stat) / (searched * act)
    nxt = searched * 2
    lo = (cap - stat) / (nxt * act) if nxt in candidates else 0.0
    if methods.sharding == "none" and n > 1 and row.get("compile"):
        # Compiled DDP stops below what its own peak says fits (Pythia-1B, 2026-11-27: 4 x H100 fitted 8 at
        # 46.7 GB allocated and not 16, which 4 x H200 ran at 71.3 GB; 2 and 4 x H200 fitted 16, not 32): something
        # the memory model does not hold (DDP's graph split by bucket under torch.compile, the allocator's
        # reserve). Until it does, such a row says what fitted, not where the fit ends.
        lo = 0.0
    return (lo, hi) if lo > 0 or hi < math.inf else None


def gradients_freed(row: Mapping[str, Any], methods: Methods) -> bool:
    """A row timed before the engine held the gradients between accumulated passes (2026-11-24; rows since
    record `gradients_held`): each pass followed an update that freed them, so its micro-batch fitting says
    nothing about a training step, whose passes 2..N run with the gradients on the GPU (Pythia-6.9B naive
    'fitted' one H200 at 137 GB that way; with them held it does not). Only where the engine's own steppers
    hold them on the GPU: DeepSpeed keeps its own, and FSDP with offloading keeps them in host memory.
    That it did not fit twice the micro-batch still holds."""
    if "gradients_held" in provenance_view(row.get("provenance")) or int(row.get("grad_accum") or 1) <= 1:
        return False
    return not (methods.deepspeed or (methods.fsdp and methods.offloading))


_DOES_NOT_FIT = re.compile(r"does not fit micro-batch (\d+)")
_FITS_NO_MORE = re.compile(r"fits micro-batch (\d+), no more than (\S+)")


def _recorded_floor(row: Mapping[str, Any]) -> tuple[int, str] | None:
    """The dominance floor a sweep recorded for a trial it called dominated, from its message."""
    if row.get("failure_kind") != "dominated":
        return None
    text = row.get("failure_message") or ""
    found = _FITS_NO_MORE.search(text)
    if found:
        return int(found.group(1)), found.group(2)
    found = _DOES_NOT_FIT.search(text)
    if found and int(found.group(1)) >= 2:
        return int(found.group(1)) // 2, "a combination with fewer methods"
    return None


# How sharp a measured fit boundary is: the allocator's rounding and fragmentation move the largest
# batch that fits by a little, so brackets that miss each other by under 2% still agree. (Pythia-160M on
# one H100: checkpointing + ZeRO-3 + offload did not fit micro-batch 64, putting kappa above 0.972, while
# checkpointing + ZeRO-1 + offload fitting 32 puts it at most 0.969.)
FIT_TOLERANCE = 0.02


def _near_miss(low: float, high: float) -> bool:
    """Brackets whose lower bound passes the upper by less than a fit boundary is sharp: they agree."""
    return low <= high * (1 + FIT_TOLERANCE)


def calibrate(rows: Iterable[Mapping[str, Any]], presets: Presets) -> dict[str, Calibration]:
    """kappa from the measured rows' micro-batch brackets, per architecture ('GPTNeoX', 'ViT', ...) and,
    for architectures nobody measured, per family ('transformer family'): the geometric middle of the
    range they all allow; when they disagree, the median of their middles."""
    by_scope: dict[str, list[tuple[float, float, str]]] = {}
    for r in rows:
        b = fit_bracket(r, presets)
        if b is None:
            continue
        model = presets.model(r["model"])
        for scope in (arch_of(model), f"{shape(model).family} family"):
            by_scope.setdefault(scope, []).append((b[0], b[1], str(r.get("trial_id", ""))[:8]))
    out = {}
    for scope, brackets in by_scope.items():
        lo = max(b[0] for b in brackets)
        hi = min(b[1] for b in brackets)
        if lo < hi:
            kappa = _middle(lo, hi)
        elif _near_miss(lo, hi):
            kappa = _middle(hi, lo)  # they miss each other by less than a fit boundary is sharp
        else:
            # They disagree: take the kappa the most brackets allow, so one wrong row (the memory model's
            # miss on one model) flags itself as the conflict instead of moving kappa for every model.
            lo, hi = _widest_agreement(brackets)
            kappa = _middle(lo, hi) if lo < hi else _middle(hi, lo)
        t = 1 + FIT_TOLERANCE
        conflicts = sum(1 for a, b, _ in brackets if not (a / t < kappa <= b * t))
        out[scope] = Calibration(scope, kappa, lo, hi, len(brackets), conflicts, tuple(t for *_, t in brackets))
    return out


def _widest_agreement(brackets: list[tuple[float, float, str]]) -> tuple[float, float]:
    """The bounds of the largest set of brackets that one kappa satisfies (within the fit tolerance);
    among equally large sets, the one with the smallest kappa."""
    t = 1 + FIT_TOLERANCE
    # How many brackets each candidate satisfies, counted by bisection over their sorted ends instead of
    # a pass over every bracket per candidate (the predictor calibrates once per held-out cell: quadratic
    # was a third of `predict`'s time). A bracket that no kappa satisfies (a/t >= b*t) is left out of the
    # count, so that every bracket counted below k (b*t < k) is also counted above (a/t < k).
    open_ = [x for x in brackets if x[0] / t < x[1] * t]
    lows = sorted(x[0] / t for x in open_)
    highs = sorted(x[1] * t for x in open_)
    best_k, most = None, 0
    for k in sorted({b * t for _, b, _ in brackets if b < math.inf} | {a * t * 1.0001 for a, _, _ in brackets}):
        n = bisect.bisect_left(lows, k) - bisect.bisect_left(highs, k)  # a/t < k, less b*t < k
        if n > most:
            best_k, most = k, n
    best = [x for x in brackets if x[0] / t < best_k <= x[1] * t] if best_k is not None else brackets
    return max(a for a, _, _ in best), min(b for _, b, _ in best)


def _middle(lo: float, hi: float) -> float:
    if lo > 0 and hi < math.inf:
        return math.sqrt(lo * hi)
    if lo > 0:  # only "did not fit" rows: a little above the least kappa they allow
        return lo * 1.25
    return hi / 1.25  # only "fitted" rows: a little below the most they allow


@dataclass(frozen=True)
class MeasuredOom:
    """A sweep ran out of memory at `micro_batch`: on a GPU with no more memory than that one, the same model and
    setting on as many GPUs, on the same training run, does not fit it either, whatever the memory model says
    (Pythia-6.9B free-lunch 'fits' micro-batch 2 of an H200 by the model; measured, it does not fit 1)."""

    micro_batch: int
    capacity_bytes: float
    label: str  # the setting measured
    where: str  # '1 x H200 141GB SXM (146.9 GB usable, 2026-11-27)'
    run: str = ""  # the row's training run (batch x sequence, precision, optimizer): another run, other memory
    fitted: int = 0  # the uncompiled search's largest fit, when this is the size above it that it tried

    @property
    def text(self) -> str:
        if self.fitted:
            return (f"{self.label} fitted micro-batch {self.fitted} and not {self.micro_batch} in the uncompiled "
                    f"micro-batch search on {self.where}")
        return f"{self.label} measured out of memory at micro-batch {self.micro_batch} on {self.where}"


_OOM_AT = re.compile(r"at micro-batch (\d+)")


def whole(value: Any) -> int | None:
    """A micro-batch read from a row (a results file may hold anything): a whole number of at least 1, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value) if value >= 1 else None


def oom_micro_batch(row: Mapping[str, Any]) -> int | None:
    """The micro-batch an out-of-memory row ran out at, as its message says ('out of memory at micro-batch 1',
    '... while measuring at micro-batch 4'); 1 when it names none (the row's own micro-batch is what its search
    fitted); None when it names one that is no micro-batch (0: a results file's nonsense, no evidence)."""
    found = _OOM_AT.search(str(row.get("failure_message") or ""))
    return whole(int(found.group(1))) if found else 1


class MeasuredOoms:
    """Every measured out-of-memory, by (model, setting, GPUs in all): a trial's ('oom'), the size above the largest
    its uncompiled search fitted (the engine doubles until one does not fit: engine/bench/trial.py), and the sizes
    its compiled measurement ran out at before it measured a smaller one (`measure_oom`). Beside them, what the same
    keys measured running: a feasible row of the same model and setting on the same run at that micro-batch or more,
    on a GPU with no more memory (another engine version, another allocator), contradicts an out-of-memory, and
    the memory model decides. FP8 and fused kernels change the memory (FP8's compiled peaks measured 16-29% below
    its 16-bit twin's in 10 of 11 pairs): each setting counts its own rows only."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], presets: Presets):
        self.ooms: dict[tuple[str, Methods, int], list[MeasuredOom]] = {}
        self.ran: dict[tuple[str, Methods, int], list[tuple[float, int, str]]] = {}
        for r in rows:
            if r.get("source") != "measured" or r.get("gpu") not in presets.gpus:
                continue
            try:
                methods = methods_of(r)
                n = int(r.get("num_gpus") or 1) * int(r.get("num_nodes") or 1)
            except (PlannerError, TypeError, ValueError):
                continue
            gpu = presets.gpu(r["gpu"])
            key = (str(r.get("model")), methods, n)
            cap = capacity_bytes(gpu)
            prov = provenance_view(r.get("provenance"))
            when = str(prov.get("measured_at") or r.get("created_at") or "")[:10]
            where = f"{n} x {gpu.name} ({gb(cap)} usable" + (f", {when}" if when else "") + ")"
            run = str(r.get("training_run") or "")
            add = lambda mb, fitted=0: self.ooms.setdefault(key, []).append(  # noqa: E731
                MeasuredOom(mb, cap, methods.label, where, run, fitted))
            if r.get("failure_kind") == "oom":
                at = oom_micro_batch(r)
                if at:
                    add(at)
                continue
            ran = whole(r.get("micro_batch"))
            if not (r.get("feasible") and r.get("days") and ran):
                continue
            if not gradients_freed(r, methods):  # timed with its gradients freed: not a training step's fit
                self.ran.setdefault(key, []).append((cap, ran, run))
            measured_oom = [b for b in map(whole, prov.get("measure_oom") or []) if b] \
                if isinstance(prov.get("measure_oom"), list) else []
            if measured_oom:
                add(min(measured_oom))
            # The search's next size, where the search could have tried it: a power of two dividing the GPU's
            # share of the row's own batch, and no cap set on the search (`|max-mb-N`: it stopped there).
            fitted, accum = whole(prov.get("max_micro_batch_searched")), whole(r.get("grad_accum"))
            per_gpu = ran * accum if accum else None
            if fitted and per_gpu and not capped(r) and per_gpu % (fitted * 2) == 0:
                add(fitted * 2, fitted)

    def smallest(self, model_id: str, methods: Methods, num_gpus: int, capacity: float, run: str = ""
                 ) -> MeasuredOom | None:
        """The smallest out-of-memory micro-batch measured for this model and setting on `run` (a row that does
        not say its run counts for any) on a GPU with at least `capacity`, none contradicted."""
        key = (model_id, methods, num_gpus)

        def same_run(other: str) -> bool:
            return not (run and other and other != run)

        ran = [(c, b) for c, b, r in self.ran.get(key, []) if same_run(r)]
        found = [o for o in self.ooms.get(key, [])
                 if capacity <= o.capacity_bytes * (1 + 1e-9) and same_run(o.run)
                 and not any(c <= o.capacity_bytes and b >= o.micro_batch for c, b in ran)]
        return min(found, key=lambda o: o.micro_batch, default=None)


def kappa_for(model: Model, calibrations: Mapping[str, Calibration]) -> Calibration:
    """The model's architecture's calibration, else its family's, else kappa 1 (uncalibrated)."""
    family = f"{shape(model).family} family"
    return calibrations.get(arch_of(model)) or calibrations.get(family) or Calibration(family, 1.0, 0.0, 0.0, 0)


# --- skipping what cannot fit (engine/bench/sweep.py) ----------------------------------------------------------

# A trial is skipped only when even the least memory the measured fits allow (kappa's lower bound)
# overflows the GPU by this much: a wrong skip loses a measurement, a wrong run costs only a minute.
SKIP_MARGIN = 0.10


def skip_reason(model: Model, gpu: Gpu, methods: Methods, num_gpus: int, cal: Calibration | None,
                floor: int | None = None, by: str = "", cap: int | None = None) -> tuple[str, Need] | None:
    """Why a sweep need not run this combination, or None to run it. Two cases: it cannot fit micro-batch
    1; or a combination with a subset of its methods already fits micro-batch `floor` (it only adds
    overhead) and this one cannot fit 2 x floor, so it cannot win. Only with a trusted calibration:
    this architecture's own measured fits, all agreeing."""
    if cal is None or not cal.trusted:
        return None
    kappa = min(cal.low, cal.kappa) if cal.low > 0 else cal.kappa / 2  # the least the fits allow
    usable = capacity_bytes(gpu)
    limit = usable * (1 + SKIP_MARGIN)
    first = need(model, methods, num_gpus, 1, kappa)
    if first.total_bytes > limit:
        return (f"skipped by the memory model: needs at least {gb(first.total_bytes)} at micro-batch 1 "
                f"(static {gb(first.static_bytes)} + activations {gb(first.activation_bytes)}), "
                f"{gb(usable)} usable"), first
    candidates = micro_batches(model, num_gpus)
    if floor and floor * 2 in candidates and (cap is None or floor * 2 <= cap):
        above = need(model, methods, num_gpus, floor * 2, kappa)
        if above.total_bytes > limit:
            return (f"skipped by the memory model: dominated, {by} already runs micro-batch {floor} and this "
                    f"needs at least {gb(above.total_bytes)} at {floor * 2}, {gb(usable)} usable"), above
    return None


def replay_skips(rows: Iterable[Mapping[str, Any]], presets: Presets, as_ran: bool = True) -> dict[str, Any]:
    """What skipping would have saved on measured sweeps: replay each cell's trials in the order they
    ran, kappa calibrated on the other cells only (so a cell never calibrates its own skips). as_ran
    takes each dominated trial's floor from what its sweep recorded; otherwise floors come from today's
    dominance rule (space.is_subset). A skip is 'wrong' when the trial's result denies it: it fitted
    where the model said nothing would (at all, or above the floor), or it beat the combination that was
    to dominate it."""
    from engine.data import space

    rows = [dict(r) for r in rows if r.get("source") == "measured" and r.get("gpu") in presets.gpus]
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["model"], r["gpu"], int(r["num_gpus"]) * int(r.get("num_nodes") or 1)), []).append(r)
    skipped, wrong, total = [], [], 0.0
    for cell, trials in sorted(cells.items()):
        try:
            model = presets.model(cell[0])
            shape(model)
        except PlannerError:
            continue
        others = [r for r in rows if (r["model"], r["gpu"], int(r["num_gpus"]) * int(r.get("num_nodes") or 1)) != cell]
        cal = kappa_for(model, calibrate(others, presets))
        gpu = presets.gpu(cell[1])
        fits: dict[Methods, tuple[int, float]] = {}  # measured: micro-batch, days
        for r in sorted(trials, key=lambda r: r.get("created_at") or 0):
            total += r.get("duration_s") or 0.0
            m = methods_of(r)
            floor, by, by_days = None, "", None
            for other, (mb, days) in fits.items():
                if other != m and space.is_subset(other, m) and (floor is None or mb > floor):
                    floor, by, by_days = mb, other.label, days
            recorded = _recorded_floor(r) if as_ran else None
            if recorded:
                floor, by = recorded
                by_days = next((d for other, (_, d) in fits.items() if other.label == by), None)
            cap = model.training.batch_size // cell[2]
            found = skip_reason(model, gpu, m, cell[2], cal, floor, by, cap)
            if r.get("feasible") and r.get("days") and r.get("micro_batch"):
                fits[m] = (r["micro_batch"], r["days"])
            if found is None:
                continue
            item = {"model": cell[0], "gpu": cell[1], "num_gpus": cell[2], "label": m.label,
                    "duration_s": r.get("duration_s") or 0.0, "outcome": r.get("failure_kind") or "measured",
                    "reason": found[0]}
            skipped.append(item)
            if r.get("feasible") and r.get("days"):
                said_no_fit = skip_reason(model, gpu, m, cell[2], cal, None, "", cap) is not None
                # A dominance skip claims nothing above the floor fits: a measured micro-batch above it denies that.
                fitted_above = floor is not None and (r.get("micro_batch") or 0) > floor
                if said_no_fit or fitted_above or by_days is None or r["days"] < by_days:
                    wrong.append(item)
    saved = sum(s["duration_s"] for s in skipped)
    return {"trials": sum(len(t) for t in cells.values()), "search_s": total, "skipped": skipped,
            "saved_s": saved, "wrong": wrong}
