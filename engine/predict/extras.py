"""What the methods beyond the paper's (issue 42: fused kernels, FP8) did where they were measured.

Their time model (engine/predict/terms.py: FP8's peak ratio x FP8_EFFICIENCY, the fused loss's traffic) is an
assumption. Once a method has been measured beside the same setting without it (same model, GPU, count, machines,
interconnect and paper methods), the ratio of the two measured times is evidence, and it is used in place of the
assumption: a prediction with the method is the prediction without it x that ratio. Measured on 1 and 2 x H200
(2026-11-27), the ratios were far from the assumption: fused kernels under torch.compile were slower (x1.07-1.12
days), fp8 faster alone (x0.82-0.90) and slower under FSDP-3 (x1.49).

Which ratios a prediction takes, closest first: the same model with the same kind of setting (sharded or not),
then any model with that kind of setting, then any. Its band spans the ratios it took (x0.95 below the lowest,
x1.05 above the highest; wider where borrowed from other models), on top of the prediction's own band.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from engine.data.space import Methods
from engine.predict.memory import methods_of

MARGIN_SAME = (0.95, 1.05)  # a ratio measured on this model: its run-to-run spread
MARGIN_BORROWED = (0.85, 1.2)  # a ratio borrowed from other models: how far models differed, and more


@dataclass(frozen=True)
class Pair:
    """One method measured beside the same setting without it."""

    model: str
    gpu: str
    num_gpus: int
    extras: tuple[str, ...]
    sharded: bool
    label: str  # the setting with the method, e.g. 'fp8+fsdp3'
    ratio: float  # days with the method / days without it (both measured medians)
    days: float
    base_days: float

    def words(self) -> str:
        return f"{self.model} {self.num_gpus}x{self.gpu} {self.label} x{self.ratio:.2f}"


@dataclass(frozen=True)
class Taken:
    """The ratio a prediction takes, and from which pairs."""

    ratio: float
    low: float
    high: float
    pairs: tuple[Pair, ...]
    how: str  # 'this model' | 'other models, same kind of setting' | 'other models'

    def words(self, extras: Sequence[str]) -> str:
        return (f"{'+'.join(extras)}: measured x{self.ratio:.2f} the days of the same setting without it "
                f"({self.how}: {'; '.join(p.words() for p in self.pairs[:4])}"
                f"{'; ...' if len(self.pairs) > 4 else ''}), in place of the assumed effect; "
                f"band x{self.low:.2f}-x{self.high:.2f}")


def _cell(row: Mapping[str, Any], methods: Methods) -> tuple:
    return (row.get("model"), row.get("gpu"), int(row.get("num_gpus") or 1), int(row.get("num_nodes") or 1),
            row.get("interconnect") or "", methods.label)


def measured_pairs(rows: Iterable[Mapping[str, Any]]) -> list[Pair]:
    """Every measured setting with fused or fp8 whose setting without them was measured on the same cell."""
    days: dict[tuple, list[float]] = {}
    meta: dict[tuple, Methods] = {}
    for r in rows:
        if r.get("source") != "measured" or not r.get("feasible") or r.get("failure_kind") or not r.get("days"):
            continue
        try:
            m = methods_of(r)
        except Exception:  # noqa: BLE001 - a row this version cannot read is no evidence
            continue
        key = _cell(r, m)
        days.setdefault(key, []).append(float(r["days"]))
        meta[key] = m
    out = []
    for key, values in days.items():
        m = meta[key]
        if not m.extras:
            continue
        base = replace(m, fused=False, fp8=False)
        base_key = key[:-1] + (base.label,)
        if base_key not in days:
            continue
        d, b = statistics.median(values), statistics.median(days[base_key])
        out.append(Pair(key[0], key[1], key[2], m.extras, m.sharding != "none", m.label, d / b, d, b))
    return sorted(out, key=lambda p: (p.extras, p.model, p.gpu, p.num_gpus, p.label))


def take(pairs: Sequence[Pair], methods: Methods, model_id: str) -> Taken | None:
    """The ratio for `methods`' extras on `model_id`, closest evidence first; None where nothing was measured."""
    same_extras = [p for p in pairs if p.extras == methods.extras]
    if not same_extras:
        return None
    sharded = methods.sharding != "none"
    kind = [p for p in same_extras if p.sharded == sharded]
    for chosen, how, margin in (([p for p in kind if p.model == model_id], "this model", MARGIN_SAME),
                                (kind, "other models, same kind of setting", MARGIN_BORROWED),
                                (same_extras, "other models", MARGIN_BORROWED)):
        if chosen:
            ratios = [p.ratio for p in chosen]
            return Taken(statistics.median(ratios), min(ratios) * margin[0], max(ratios) * margin[1],
                         tuple(chosen), how)
    return None
