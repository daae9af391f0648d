"""What a pass takes at least, however little GPU work it holds: the floor under small micro-batches.

The roofline (engine/predict/predictor.py) makes a pass's time proportional to its micro-batch, plus the
communication it does not hide (engine/predict/comm.py). Measured at small micro-batches it is not: on 4 x H200,
Pythia-6.9B under FSDP-2 takes 0.315 s a pass at micro-batch 1 and 0.362 s at 2, where its GPU work is 0.15 and
0.29 s, and Pythia-1B under DDP 0.069 s at micro-batch 1 against 0.023 s of GPU work (2026-11-28,
docs/measurements.md). Two things a pass cannot go below, whatever its micro-batch:
- its collectives (FSDP's and ZeRO's gathers and reduce-scatters): each layer's must finish before that layer
  runs, and the copies and casts FSDP does around them run on the compute stream (pytorch/pytorch
  _fsdp_collectives.py); k x T, k per kind, fitted, T the collectives' whole buffers at the link's rate (not the
  (N-1)/N a ring sends: Pythia-6.9B's ZeRO-3 pass floors at about 0.6 s on 2 and on 4 H200s alike, where the ring
  share grows 1.5x). ZeRO-3 is a kind apart from ZeRO-1/2 (it gathers every module's weights in every pass,
  through hooks; 1/2 once a step);
- the host issuing a compiled pass's kernels (launches, per-module hooks): c x layers, fitted on rows with no
  collective in the pass (one GPU, DDP). Uncompiled rows set none: the eager rows at small micro-batches are
  their own fits' basis and say nothing apart from it.
The two add: the host issues FSDP's gathers between the layers' kernels, and waits on them. (Their larger alone
was the first form tried: predicted before measuring, it was 36% and 42% too fast on Pythia-2.8B FSDP-2 at
micro-batch 1 and Llama-3.2-1B FSDP-3 at 2 on 2 x H200; the sum, fitted on the same rows, 16% and 26%.)

The pass is the larger of its work W and its floor F, with a soft corner where they meet (two streams of work
that overlap, the step waiting for the longer, and less than perfectly where they are close):

    pass = (W^3 + F^3)^(1/3),   F = c x layers (compiled) + a_kind x layers + k_kind x T

a_kind is what a sharded kind costs the host per layer beyond that, whatever the bytes: DeepSpeed's ZeRO-3 fetches
and releases every module's weights through hooks, uncompiled, and floors at about 20-30 ms a layer on the 4 x H200
host whatever the model's width (Pythia-1B 0.37 s a pass at micro-batch 1 over 16 layers, Pythia-2.8B 0.75 s and
Pythia-6.9B 0.61 s over 32, Qwen2.5-1.5B 0.80 s over 28: 2026-11-28, docs/measurements.md), where its bytes alone
predicted 66-82% too fast. With the rows of 2026-11-28, the 24 floor-bound configurations held out by cell come
within 7.8% (median) and 29% (worst); with the bytes alone (no a), 13% and 519%. The bytes term holds where k was
fitted, over one node's peer links: over a network, host memory or GPUs without peer access the predictor gives it
no bytes (comm.py's overlap holds there), while a and c, the host's, stay; such a prediction, an offloaded one, or
one on a GPU type where the floor never set a pass, is marked as resting on a floor not measured there
(Floors.seen: its interval adds another GPU's width).

At W = 4F the pass is 1.6% above W; at W = F, 26%. c, each a and each k are fitted by least squares on the logarithm of
the measured passes over the predictor's W for the same rows (the machine's own links, no offloading, no
methods beyond the paper's), on a grid; a value no row asks for is 0 and changes nothing, and so are a kind's a and k
whose rows come from fewer than MIN_CELLS cells (a lone cell's misfit of its work is not a floor: with the H200
rows held out, ZeRO-3's k went to the grid's end on one 4 x H100 row and predicted the H200s' 3-4x too slow).
No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from engine.predict.intervals import floor_bound

P = 3  # the soft corner's norm
PER_LAYER_GRID = tuple(i * 1e-4 for i in range(0, 101))  # c: 0 to 10 ms a layer, by 0.1 ms
PER_COMM_GRID = tuple(i * 0.05 for i in range(0, 401))  # k: 0 to 20 x the collectives' time, by 0.05
PER_KIND_LAYER_GRID = tuple(i * 5e-4 for i in range(0, 101))  # a: 0 to 50 ms a layer, by 0.5 ms
# a and k together: every pair on the grids taken 10 and 4 steps at a time, then every pair within those steps of
# the best (one at a time goes astray: the first fitted takes what the other should)
COARSE = 10, 4
MIN_CELLS = 2  # a kind's k from rows of at least this many cells (model x GPU x count), else none


def floored(work_s: float, floor_s: float) -> float:
    """The pass: its work and its floor, the larger with a soft corner ((W^3 + F^3)^(1/3))."""
    if floor_s <= 0:
        return work_s
    return (work_s ** P + floor_s ** P) ** (1 / P)


@dataclass(frozen=True)
class Sample:
    """One measured pass: what the predictor says it takes (work_s, without a floor) and what it took."""

    kind: str  # "ddp", "fsdp", "zero" (ZeRO-1/2), "zero3" or "one" (a single GPU)
    comm_s: float  # the pass's collectives' whole buffers at the link's rate (T); 0 without any
    layers: int
    compiled: bool
    work_s: float
    measured_s: float
    label: str
    cell: str = ""  # model x GPU x count: a kind's k needs MIN_CELLS of them ("": the sample is its own)
    gpu: str = ""  # its GPU type: where the floor was seen (Floors.seen)


@dataclass(frozen=True)
class Floors:
    per_layer_s: float = 0.0  # c: a compiled pass's host time per layer
    per_comm: Mapping[str, float] = field(default_factory=dict)  # k per kind
    per_kind_layer: Mapping[str, float] = field(default_factory=dict)  # a per kind: its host time a layer
    # per kind (its own floor; "" the compiled issue's), the GPU types where it set a measured pass (raised it past
    # its work as far as a floor-bound prediction's, intervals.floor_bound): where that floor was seen at all
    seen: Mapping[str, frozenset] = field(default_factory=dict)
    note: str = "no floor (nothing measured at a micro-batch small enough to show one)"
    samples: int = 0

    def floor_s(self, kind: str, comm_s: float, layers: int, compiled: bool) -> float:
        """F. (The predictor passes comm_s = 0 off one node's peer links, where k was not fitted; a and c are the
        host's and stay.)"""
        return (self.per_comm.get(kind, 0.0) * comm_s + self.per_kind_layer.get(kind, 0.0) * layers
                + (self.per_layer_s * layers if compiled else 0.0))

    def seen_on(self, kind: str, gpu: str) -> bool:
        """Whether this kind's floor (or, for a kind without one, the compiled issue's) was seen on this GPU type."""
        return gpu in self.seen.get(kind if self.per_comm.get(kind) or self.per_kind_layer.get(kind) else "", ())

    def passes(self, s: Sample) -> float:
        """What a measured pass takes by this floor: its work, floored."""
        return floored(s.work_s, self.floor_s(s.kind, s.comm_s, s.layers, s.compiled))

    def words(self, kind: str, comm_s: float, layers: int, compiled: bool) -> str:
        k, c, a = self.per_comm.get(kind, 0.0), self.per_layer_s, self.per_kind_layer.get(kind, 0.0)
        parts = []
        if k and comm_s:
            parts.append(f"{k:.2f} x the collectives' {comm_s:.3f} s = {k * comm_s:.3f} s")
        if a:
            parts.append(f"{a * 1e3:.1f} ms x {layers} layers ({kind}'s host time a layer) = {a * layers:.3f} s")
        if c and compiled:
            parts.append(f"{c * 1e3:.1f} ms x {layers} layers (issuing a compiled pass) = {c * layers:.3f} s")
        return " + ".join(parts)


def _error(samples: Sequence[Sample], floors: "Floors") -> float:
    return sum(math.log(floors.passes(s) / s.measured_s) ** 2 for s in samples)


def _fit_kind(mine: Sequence[Sample], c: float) -> tuple[float, float]:
    """(k, a) for one kind's samples, c held: least squares in log over the two grids (the pass's log written
    out: log((W^3 + F^3)^(1/3)) = log(W^3 + F^3) / 3, the same as floored's)."""
    rows = [(s.work_s ** P, c * s.layers if s.compiled else 0.0, s.comm_s, s.layers, math.log(s.measured_s))
            for s in mine]

    def err(i: int, j: int) -> float:
        k, a = PER_COMM_GRID[i], PER_KIND_LAYER_GRID[j]
        total = 0.0
        for w3, host, comm, layers, measured in rows:
            f = k * comm + a * layers + host
            total += (math.log(w3 + f ** P) / P - measured) ** 2
        return total

    nk, na = len(PER_COMM_GRID), len(PER_KIND_LAYER_GRID)
    sk, sa = COARSE
    i, j = min(((i, j) for i in range(0, nk, sk) for j in range(0, na, sa)), key=lambda ij: (err(*ij), ij))
    i, j = min(((x, y) for x in range(max(0, i - sk), min(nk, i + sk + 1))
                for y in range(max(0, j - sa), min(na, j + sa + 1))), key=lambda ij: (err(*ij), ij))
    return PER_COMM_GRID[i], PER_KIND_LAYER_GRID[j]


def calibrate(samples: Sequence[Sample]) -> Floors:
    """c on the rows with no collective in the pass (compiled), then a and k per kind on that kind's rows, c held."""
    samples = [s for s in samples if s.work_s > 0 and s.measured_s > 0]
    if not samples:
        return Floors()
    plain = [s for s in samples if s.compiled and not s.comm_s]
    c = min(PER_LAYER_GRID, key=lambda v: (_error(plain, Floors(v)), v)) if plain else 0.0
    per_comm: dict[str, float] = {}
    per_kind_layer: dict[str, float] = {}
    for kind in sorted({s.kind for s in samples if s.comm_s}):
        mine = [s for s in samples if s.kind == kind]
        k = a = 0.0
        if len({s.cell or s.label for s in mine}) >= MIN_CELLS:
            k, a = _fit_kind(mine, c)
        per_comm[kind], per_kind_layer[kind] = k, a
    fitted = Floors(c, per_comm, per_kind_layer)
    shown = [s for s in samples if fitted.passes(s) > 1.05 * s.work_s]
    seen: dict[str, set] = {}
    for s in samples:
        # a kind with its own floor is seen where it set one of its rows' passes; the compiled issue ("") where
        # it set a pass of a kind without its own
        if floor_bound(fitted.passes(s) / s.work_s):
            seen.setdefault(s.kind if per_comm.get(s.kind) or per_kind_layer.get(s.kind) else "", set()).add(s.gpu)
    note = (f"fitted on {len(samples)} measured passes ({len(plain)} without collectives): a compiled pass's host "
            f"time {c * 1e3:.1f} ms a layer; collectives x " + ", ".join(f"{k} {v:.2f}" for k, v in per_comm.items())
            + "; per layer " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in per_kind_layer.items())
            + (f"; it raises {len(shown)} of them by more than 5%: " + ", ".join(s.label for s in shown[:6])
               + (", ..." if len(shown) > 6 else "") if shown else ""))
    return Floors(c, per_comm, per_kind_layer, {k: frozenset(v) for k, v in seen.items()}, note, len(samples))
