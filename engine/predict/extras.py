"""What the methods beyond the paper's (issue 42: fused kernels, FP8) did where they were measured.

Their time model (engine/predict/terms.py: FP8's peak ratio x FP8_EFFICIENCY, the fused loss's traffic) is an
assumption. Once a method has been measured beside the same setting without it (same model, GPU, count, machines,
interconnect and paper methods), the ratio of the two measured times is evidence, and it is used in place of the
assumption: a prediction with the method is the prediction without it x that ratio. Measured on 1, 2 and 4 x H200
(2026-11-27), the ratios were far from the assumption: fused (the loss kernel only, under torch.compile) x0.98-1.02
days, fp8 x0.82-0.90 alone and x0.83-0.89 under FSDP (once every block compiled). A cell measured again is
represented by its latest rows (as findings and scaling take it): the engine's methods changed between
measurements (fused's kernels under compile; FSDP's compile per block), and a later row supersedes.

Which ratios a prediction takes, closest first, of the same kind of setting only (sharded or not, offloaded or not):
this very cell measured; then the pairs that share its model or its GPU type, pooled (a method's ratio depends on
both: the model's share of linear FLOPs and its vocabulary, the card's FP8 peak and bandwidth); then every pair.
Held out by cell (`predict --validate`, 2026-11-28: 21 configurations), this model's pairs alone put 18 within 15%
(median 6.0%); the same model on the same card first, 19; all pairs pooled, 20; this model or this card pooled, 21
(median 4.9%). Its band spans the ratios it took
(x0.95 below the lowest and x1.05 above the highest for the cell itself; x0.85 and x1.2 where carried to another
cell), on top of the prediction's own band. A kind nobody measured keeps the assumption. fp8 under FSDP takes
the pairs whose weights were gathered the way the engine now gathers them (in float8 since 2026-11-28, in 16 bits
with CPU offload) wherever any were measured.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from engine.data.space import Methods, capped, gathered_in_float8
from engine.data.store import provenance_view
from engine.predict.memory import methods_of

MARGIN_SAME = (0.95, 1.05)  # a ratio measured on this model: its run-to-run spread
MARGIN_BORROWED = (0.85, 1.2)  # a ratio borrowed from other models: how far models differed, and more


@dataclass(frozen=True)
class Pair:
    """One method measured beside the same setting without it."""

    model: str
    gpu: str
    num_gpus: int
    nodes: int
    methods: Methods  # the setting with the method
    days: float  # its measured median
    base_days: float  # the same setting's without the method
    gather: str = ""  # fp8 under FSDP: how its weights were gathered ('float8' or '16-bit'); '' otherwise

    @property
    def extras(self) -> tuple[str, ...]:
        return self.methods.extras

    @property
    def label(self) -> str:
        return self.methods.label

    @property
    def ratio(self) -> float:
        return self.days / self.base_days

    def words(self) -> str:
        gathered = f" ({self.gather} gathers)" if self.gather else ""
        return f"{self.model} {self.num_gpus}x{self.gpu} {self.label}{gathered} x{self.ratio:.2f}"


@dataclass(frozen=True)
class Taken:
    """The ratio a prediction takes, and from which pairs."""

    ratio: float
    low: float
    high: float
    pairs: tuple[Pair, ...]
    how: str  # which tier of evidence (take)

    def words(self, extras: Sequence[str]) -> str:
        return (f"{'+'.join(extras)}: measured x{self.ratio:.2f} the days of the same setting without it "
                f"({self.how}: {'; '.join(p.words() for p in self.pairs[:4])}"
                f"{'; ...' if len(self.pairs) > 4 else ''}), in place of the assumed effect; "
                f"band x{self.low:.2f}-x{self.high:.2f}")


def _cell(row: Mapping[str, Any], methods: Methods) -> tuple:
    return (row.get("model"), row.get("gpu"), int(row.get("num_gpus") or 1), int(row.get("num_nodes") or 1),
            row.get("interconnect") or "", row.get("training_run") or "", methods.label)


def _kind(methods: Methods) -> tuple[bool, bool]:
    """What a ratio carries over between: sharded or not, offloaded or not (an offloaded step is another
    balance of GPU, PCIe and CPU work, which no unoffloaded pair says anything about)."""
    return methods.sharding != "none", methods.offloading


def measured_pairs(rows: Iterable[Mapping[str, Any]]) -> list[Pair]:
    """Every measured setting with fused or fp8 whose setting without them was measured on the same cell (same
    model, GPU, count, machines, interconnect and training run; rows of the engine before its causal-mask fix,
    and rows timed under a micro-batch cap, left out), each setting by its latest row."""
    days: dict[tuple, list[float]] = {}
    meta: dict[tuple, Methods] = {}
    newest: dict[tuple, str] = {}
    for r in rows:
        if r.get("source") != "measured" or not r.get("feasible") or r.get("failure_kind") or not r.get("days"):
            continue
        if capped(r):
            continue  # timed below the micro-batch that fits: another step than its setting's (floors.py's evidence)
        try:
            m = methods_of(r)
            if provenance_view(r.get("provenance")).get("causal_mask") == "dense mask":
                continue  # the engine before its causal-mask fix: another, slower step
        except Exception:  # noqa: BLE001 - a row this version cannot read is no evidence
            continue
        gather = ""
        if m.fp8 and m.fsdp:  # how its weights were gathered: rows of one cell gathered otherwise are another cell
            gather = "float8" if gathered_in_float8(provenance_view(r.get("provenance")).get("fp8")) else "16-bit"
        key = _cell(r, m) + (gather,)
        when = str(r.get("created_at") or "")
        if key in newest and when < newest[key]:
            continue
        if key not in newest or when > newest[key]:  # a later measurement supersedes; rows of one moment stay
            days[key] = []
        newest[key] = when
        days[key].append(float(r["days"]))
        meta[key] = m
    out = []
    for key, values in days.items():
        m = meta[key]
        if not m.extras:
            continue
        base = replace(m, fused=False, fp8=False)
        base_key = key[:-2] + (base.label, "")
        if base_key not in days:
            continue
        out.append(Pair(key[0], key[1], key[2], key[3], m, statistics.median(values), statistics.median(days[base_key]),
                        key[-1]))
    return sorted(out, key=lambda p: (p.extras, p.model, p.gpu, p.num_gpus, p.label))


def take(pairs: Sequence[Pair], methods: Methods, model_id: str, gpu_id: str = "", num_gpus: int = 0,
         nodes: int = 1) -> Taken | None:
    """The ratio for `methods`' extras on this cell, closest evidence first: this very cell measured (its
    run-to-run margin), else the pairs of this model or this GPU type, else any, of the same kind of setting
    (sharded or not, offloaded or not; a wider margin); None where nothing of that kind was measured (the
    assumption stands).
    fp8 under FSDP takes the pairs whose weights were gathered as the engine now gathers them (float8 on the GPU,
    Methods.fp8_gathered_in_float8) where there are any: on 4 x H100, gathered in 16 bits, fp8 measured x1.08-1.10
    the days of 16 bits; gathered in float8, x0.82 (Pythia-6.9B) and x1.06 (Pythia-2.8B)."""
    kind = [p for p in pairs if p.extras == methods.extras and _kind(p.methods) == _kind(methods)]
    if methods.fp8 and methods.fsdp:
        want = "float8" if methods.fp8_gathered_in_float8 else "16-bit"
        kind = [p for p in kind if p.gather == want] or kind
    tiers = (([p for p in kind if (p.model, p.gpu, p.num_gpus, p.nodes, p.label)
               == (model_id, gpu_id, num_gpus, nodes, methods.label)], "this cell, measured", MARGIN_SAME),
             ([p for p in kind if p.model == model_id or p.gpu == gpu_id],
              "this model or this card, other cells", MARGIN_BORROWED),
             (kind, "other models on other cards, the same kind of setting", MARGIN_BORROWED))
    for chosen, how, margin in tiers:
        if chosen:
            ratios = [p.ratio for p in chosen]
            return Taken(statistics.median(ratios), min(ratios) * margin[0], max(ratios) * margin[1],
                         tuple(chosen), how)
    return None
