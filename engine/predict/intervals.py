"""A stated, calibrated interval for every prediction: how far the truth lies from the point, by the KIND of
extrapolation the prediction makes, from held-out errors of that same kind.

A prediction's kind is what its evidence was (engine/predict/predictor.py classifies it):

    this GPU, this count   the architecture is measured on this GPU at this GPU count (another model or cell)
    this GPU, other count  ... on this GPU, never at this count
    another GPU            ... measured, never on this GPU
    family only            the architecture is not measured: the fit of the other measured architectures of its
                           family (a transformer from the transformers)
    + offloaded            the setting offloads to the host (its copies and CPU update are calibrated apart)
    floor-bound            whatever the evidence: the pass is set by its floor more than its work (a small
                           micro-batch: engine/predict/floors.py lifts it by more than FLOOR_LIFT), where the
                           host's issue and the collectives, not the GPU's work, decide the time. Its cases are
                           pooled apart (they would widen every kind they sit in) and it is never narrower than
                           the evidence's own kind. The capped measurements (`bench --max-micro-batch`) are its
                           cases too, each predicted at its cap.

The errors of each kind come from holding out whole groups, never one row: each cell (model x GPU x count);
each architecture (all its cells: its predictions are then 'family only'); each GPU type (all cells on it:
'another GPU'); each architecture's GPU count (all its cells at that count: 'other count'). Each held-out
configuration is classified by what was left when it was predicted. A GPU generation our measurements are not
on adds its own held-out error (published rows each predicted without its group, or, for a generation with
none, each generation predicted from another: engine/predict/generations.py), in quadrature.

The interval is symmetric in log around the point, so the point is its median: days x exp(+-w), w the
LEVEL quantile of |log(predicted / measured)| over the kind's held-out cases (at rank (n + 1) x LEVEL,
interpolated, so it holds for about LEVEL of new cases on average: conformal_width). A kind with fewer than MIN_CASES
cases takes the next wider kind's width. An architecture measured in one cell only takes at least the width its own
held-out errors show (ConvNeXt, Mamba: no sibling to borrow from). Coverage is checked honestly: each case against a
width worked out without its own model's cases.

The cases come from engine/predict/validate.py (held_out_cases: it holds out ~50 groups); scripts/build_db.py
works the widths out and writes them beside the published rows' calibration (data/external/intervals.json),
where every predictor reads them. No torch here.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

LEVEL = 0.80  # the stated level: 80% of outcomes fall inside the interval
MIN_CASES = 8  # fewer cases than this: the kind takes the next wider kind's width
TOLERANCE = 0.10  # a kind whose coverage is off by more than this (with MIN_CASES cases) is reported as failing
FILE = "intervals.json"  # in data/external/ beside fitted.json (the wheel carries both), by scripts/build_db.py

THIS_COUNT, OTHER_COUNT, OTHER_GPU, FAMILY = "this GPU, this count", "this GPU, other count", "another GPU", "family only"
EVIDENCE = (THIS_COUNT, OTHER_COUNT, OTHER_GPU, FAMILY)  # narrowest first: a kind short of cases takes the next
OFFLOADED = " + offloaded"
FLOOR_BOUND = "floor-bound"  # pooled across the evidence kinds: a pass its floor sets (engine/predict/floors.py)
FLOOR_LIFT = 1.2  # floor-bound: the floor lifts the pass by more than this over its work (at W = F: 1.26)


def floor_bound(lift: Any) -> bool:
    """Whether a pass its floor lifts this much over its work (floors.py; a stored figure may be anything) is set
    by its floor: the one rule the predictor, the held-out cases and the ranking's advice read."""
    return isinstance(lift, (int, float)) and lift > FLOOR_LIFT


# Where a kind has no cases at all and nothing wider does: a wide guess, said as such.
UNCALIBRATED_W = math.log(2.0)


def kind_name(evidence: str, offloading: bool) -> str:
    return evidence + (OFFLOADED if offloading else "")


@dataclass(frozen=True)
class Evidence:
    """What a predictor's measured rows cover: per architecture, the (GPU, count) cells and the GPUs."""

    cells: frozenset[tuple[str, str, int]]  # (arch, gpu, num_gpus) measured
    models: Mapping[str, frozenset[tuple[str, int]]] = field(default_factory=dict)  # arch -> {(model, gpu-count)}

    @classmethod
    def of(cls, basis: Iterable[Any]) -> "Evidence":
        return cls(frozenset((b.arch, b.gpu, b.num_gpus) for b in basis if b.source == "measured"))

    def evidence(self, arch: str, gpu: str, num_gpus: int) -> str:
        mine = [(g, n) for a, g, n in self.cells if a == arch]
        if not mine:
            return FAMILY
        if (gpu, num_gpus) in mine:
            return THIS_COUNT
        if any(g == gpu for g, _ in mine):
            return OTHER_COUNT
        return OTHER_GPU

    def arch_cells(self, arch: str) -> int:
        return sum(1 for a, _, _ in self.cells if a == arch)


def conformal_width(abs_log_errors: Sequence[float], level: float = LEVEL) -> float | None:
    """The width w such that a new case's |log error| is within w with probability `level`: the order statistic
    at rank (n + 1) x level of n cases, between two ranks interpolated (past the largest: the largest x 1.25).
    None with no case.

    A new case falls under the k-th smallest of n exchangeable cases with probability k / (n + 1), so the
    whole rank ceil((n + 1) x level) covers AT LEAST `level` and, with few cases, much more: 8 / 9 = 89% from 8
    cases for an 80% interval. Interpolating at the exact rank (Hyndman and Fan's type 6 quantile) covers about
    `level` on average, which is what the interval states, and gives up the guarantee of at least `level`."""
    e = sorted(abs_log_errors)
    if not e:
        return None
    p = (len(e) + 1) * level
    if p > len(e):
        return e[-1] * 1.25
    k = max(1, math.floor(p))
    if k >= len(e):
        return e[-1]
    return e[k - 1] + (p - k) * (e[k] - e[k - 1])


@dataclass(frozen=True)
class Case:
    """One held-out configuration: how it was held out, what kind of extrapolation predicted it, its error."""

    scheme: str  # cell | architecture | gpu | count
    kind: str
    arch: str
    model: str
    gpu: str
    num_gpus: int
    label: str
    predicted_days: float
    actual_days: float
    floor_bound: bool = False  # its pass was set by its floor (FLOOR_LIFT): pooled in FLOOR_BOUND
    floor_elsewhere: bool = False  # ... and its floor was never seen on its GPU type: widened as another GPU's

    @property
    def group(self) -> str:
        """The kind whose width it calibrates: its own, or the pooled floor-bound one."""
        return FLOOR_BOUND if self.floor_bound else self.kind

    @property
    def log_error(self) -> float:
        return math.log(self.predicted_days / self.actual_days)


@dataclass
class Intervals:
    """The width per kind, per single-cell architecture, and where they come from."""

    widths: dict[str, float]  # kind -> w (log)
    cases: dict[str, int]  # kind -> held-out cases it was estimated on
    single_cell: dict[str, float] = field(default_factory=dict)  # arch measured in one cell -> its own width
    level: float = LEVEL
    note: str = ""

    def width(self, evidence: str, offloading: bool, floor_bound: bool = False,
              floor_elsewhere: bool = False) -> tuple[float, str]:
        """(w, the kind whose cases set it): this kind's, else the next wider kind's with enough cases; a
        floor-bound prediction the wider of that and the floor-bound cases' (a wide guess, "", short of them),
        and where its floor was never seen on its GPU type (`floor_elsewhere`), that with another GPU's width in
        quadrature: the floor's host and links are that GPU's, and no probe of them says how it transfers."""
        w, k = self._evidence_width(evidence, offloading)
        if floor_bound:
            if self.cases.get(FLOOR_BOUND, 0) >= MIN_CASES and FLOOR_BOUND in self.widths:
                wf, kf = self.widths[FLOOR_BOUND], FLOOR_BOUND
            else:
                wf, kf = UNCALIBRATED_W, ""
            if floor_elsewhere:
                wf = math.hypot(wf, self._evidence_width(OTHER_GPU, offloading)[0])
            if wf > w:
                return wf, kf
        return w, k

    def _evidence_width(self, evidence: str, offloading: bool) -> tuple[float, str]:
        order = EVIDENCE[EVIDENCE.index(evidence):]
        names = ([kind_name(e, True) for e in order] if offloading else []) + [kind_name(e, False) for e in order]
        for k in names:
            if self.cases.get(k, 0) >= MIN_CASES and k in self.widths:
                w = self.widths[k]
                if offloading and not k.endswith(OFFLOADED):
                    # no offloaded kind with enough cases: the plain kind's, at least its offloaded cases' spread
                    w = max([w] + [self.widths[n] for n in names if n.endswith(OFFLOADED) and n in self.widths])
                return w, k
        return UNCALIBRATED_W, ""

    def for_prediction(self, arch: str, evidence: str, offloading: bool, lift: float = 1.0,
                       floor_elsewhere: bool = False) -> tuple[float, str]:
        """The width for one prediction and the words for it (`lift`: how far its floor raises its pass;
        `floor_elsewhere`: its floor was never seen on this GPU type)."""
        bound = floor_bound(lift)
        w, k = self.width(evidence, offloading, bound, floor_elsewhere)
        kind = kind_name(evidence, offloading)
        elsewhere = (" and, the floor never measured on this GPU type, its links or offloaded, another GPU's width "
                     "in quadrature (a widening no held-out case checks: every probe of the floor is on H200s)"
                     if floor_elsewhere else "")
        if bound and k in (FLOOR_BOUND, ""):
            what = (f"{kind}, floor-bound: its pass is {lift:.2f}x its GPU work (a small micro-batch: the host's "
                    "issue and the collectives set it), so "
                    + (f"the {self.level:.0%} interval of the floor-bound held-out cases ({self.cases[k]})" if k else
                       f"a wide {math.exp(w):.1f}x guess (fewer than {MIN_CASES} floor-bound held-out cases)")
                    + elsewhere)
        elif not k:
            what = f"{kind}: no held-out case of this kind or a wider one, so a wide {math.exp(w):.1f}x guess"
        else:
            what = (f"{self.level:.0%} interval for '{kind}'"
                    + (f" (from '{k}', {self.cases[k]} held-out cases)" if k != kind else f" ({self.cases[k]} held-out cases)"))
            if bound:
                what += f"; floor-bound (its pass {lift:.2f}x its GPU work), this kind the wider"
        own = self.single_cell.get(arch)
        if own is not None and own > w:
            w = own
            what += f"; {arch} is measured in one cell only: as wide as its own held-out errors (x{math.exp(own):.2f})"
        return w, what

    def to_json(self) -> dict:
        return {"level": self.level, "widths": self.widths, "cases": self.cases, "single_cell": self.single_cell,
                "note": self.note}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Intervals":
        return cls({k: float(v) for k, v in d["widths"].items()}, {k: int(v) for k, v in d["cases"].items()},
                   {k: float(v) for k, v in d.get("single_cell", {}).items()}, float(d.get("level", LEVEL)),
                   str(d.get("note", "")))


# --- held-out cases (engine/predict/validate.py: held_out_cases makes them) ---------------------------------------


def _dedupe(cases: Sequence[Case]) -> list[Case]:
    """A configuration predicted the same way (same kind, same figure) under two schemes counts once."""
    seen, out = set(), []
    for c in cases:
        k = (c.kind, c.floor_bound, c.model, c.gpu, c.num_gpus, c.label, round(c.predicted_days, 6))
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out


def calibrate(cases: Sequence[Case], evidence: "Evidence | None" = None) -> Intervals:
    """The width per kind from its cases; a single-cell architecture's own width from its held-out cases."""
    cases = _dedupe(cases)
    by_kind: dict[str, list[float]] = {}
    for c in cases:
        by_kind.setdefault(c.group, []).append(abs(c.log_error))
    widths = {k: conformal_width(v) for k, v in by_kind.items()}
    single = {}
    if evidence is not None:
        for arch in sorted({c.arch for c in cases}):
            if evidence.arch_cells(arch) == 1:
                own = [abs(c.log_error) for c in cases if c.arch == arch and not c.floor_bound]
                w = conformal_width(own)
                if w is not None:
                    single[arch] = w
    return Intervals({k: w for k, w in widths.items() if w is not None}, {k: len(v) for k, v in by_kind.items()},
                     single, note=f"{len(cases)} held-out configurations (cells, architectures, GPU types and GPU "
                                  f"counts held out whole)")


def coverage(cases: Sequence[Case], evidence: "Evidence | None" = None) -> list[dict[str, Any]]:
    """Per kind: how many held-out cases fall inside the interval they would have been given, each case's
    width worked out without any case of its own model (so a model never calibrates its own interval)."""
    cases = _dedupe(cases)
    out = []
    for kind in sorted({c.group for c in cases}, key=_kind_order):
        mine = [c for c in cases if c.group == kind]
        inside, widths = 0, []
        for c in mine:
            rest = [x for x in cases if x.model != c.model]
            iv = calibrate(rest)
            ev, off = _split(c.kind)
            w, _ = iv.width(ev, off, c.floor_bound, c.floor_elsewhere)
            widths.append(w)
            inside += abs(c.log_error) <= w
        cov = inside / len(mine)
        own_w = conformal_width([abs(c.log_error) for c in mine])
        out.append({"kind": kind, "cases": len(mine), "inside": inside, "coverage": cov,
                    "median_width": math.exp(2 * statistics.median(widths)),  # high / low
                    "width": math.exp(2 * own_w) if own_w is not None else None,
                    "archs": sorted({c.arch for c in mine}),
                    "off": len(mine) >= MIN_CASES and abs(cov - LEVEL) > TOLERANCE})
    return out


def by_arch(cases: Sequence[Case]) -> list[dict[str, Any]]:
    """Per architecture: its held-out cases' median and worst |error|: where the wide intervals come from."""
    cases = _dedupe(cases)
    out = []
    for arch in sorted({c.arch for c in cases}):
        e = [abs(math.exp(c.log_error) - 1) for c in cases if c.arch == arch]
        out.append({"arch": arch, "cases": len(e), "median_abs": statistics.median(e), "worst_abs": max(e)})
    return out


def _split(kind: str) -> tuple[str, bool]:
    return (kind[: -len(OFFLOADED)], True) if kind.endswith(OFFLOADED) else (kind, False)


def _kind_order(kind: str) -> tuple[int, bool]:
    if kind == FLOOR_BOUND:
        return (len(EVIDENCE) + 1, False)
    ev, off = _split(kind)
    return (EVIDENCE.index(ev) if ev in EVIDENCE else len(EVIDENCE), off)


# --- the file ------------------------------------------------------------------------------------------------


def path(folder: Path | None = None) -> Path:
    from engine.data.paths import external_dir

    return Path(folder or external_dir()) / FILE


def load(folder: Path | None = None) -> Intervals | None:
    try:
        return Intervals.from_json(json.loads(path(folder).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(iv: Intervals, folder: Path | None = None) -> Path:
    """Beside and renamed into place: a reader meanwhile sees the old file or the new one."""
    target = path(folder)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(iv.to_json(), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return target


def generation_width(errors: Sequence[float]) -> float | None:
    """A GPU generation's own width from its published rows' held-out errors (predicted / published - 1)."""
    return conformal_width([abs(math.log(1 + e)) for e in errors if e > -1])


def unmeasured_generation_width(errors_by_generation: Mapping[str, Sequence[float]]) -> float | None:
    """The width for a generation nobody measured: the widest of the measured generations' own widths when each
    is predicted from another (pooled, the generation with most rows would set it, and one predicted from a
    far generation, A100 from Hopper, falls outside: 63% of the held-out generations' rows inside, against
    83% for the widest)."""
    ws = [w for w in (generation_width(e) for e in errors_by_generation.values()) if w is not None]
    return max(ws) if ws else None


def published_coverage(checks: Sequence[Any], kind_of, group_of, widest: bool = False) -> list[dict[str, Any]]:
    """Coverage of the GPU generations' own widths on published rows (engine/predict/generations.py's held-out
    checks): per kind (`kind_of(check)`), each check against the width of the same kind's checks outside its
    group (`group_of(check)`: its source, or its generation), so no source calibrates itself. widest: the
    width is the widest of the other groups' own (unmeasured_generation_width), not their pooled errors'."""
    out = []
    kinds: dict[str, list[Any]] = {}
    for c in checks:
        kinds.setdefault(kind_of(c), []).append(c)
    for kind, mine in sorted(kinds.items()):
        inside, widths = 0, []
        for c in mine:
            if widest:
                by: dict[str, list[float]] = {}
                for x in mine:
                    if group_of(x) != group_of(c):
                        by.setdefault(group_of(x), []).append(x.error)
                w = unmeasured_generation_width(by)
            else:
                w = generation_width([x.error for x in mine if group_of(x) != group_of(c)])
            if w is None:
                continue
            widths.append(w)
            inside += abs(math.log(1 + c.error)) <= w
        if not widths:  # every case is of one group: nothing outside it to calibrate on
            out.append({"kind": kind, "cases": 0, "inside": 0, "coverage": None, "median_width": None,
                        "width": None, "off": False, "groups": sorted({group_of(c) for c in mine}), "rows": len(mine)})
            continue
        cov = inside / len(widths)
        own = generation_width([c.error for c in mine])
        out.append({"kind": kind, "cases": len(widths), "inside": inside, "coverage": cov,
                    "median_width": math.exp(2 * statistics.median(widths)),
                    "width": math.exp(2 * own) if own is not None else None,
                    "off": len(widths) >= MIN_CASES and abs(cov - LEVEL) > TOLERANCE})
    return out
