"""What FSDP's CPU offload costs a pass on several GPUs beyond its copies, as measured.

On one GPU an offloaded FSDP pass costs its GPU work plus part of its PCIe copies (Predictor.host_exposed: about 68%
of them, the rest hidden by prefetch). On several GPUs it costs far more, and the copies do not describe it. Measured
on 2 and 4 x H200 (2026-11-28): Pythia-1B's pass on 2 GPUs took 2.10 s at micro-batch 32, alone on the machine,
where its GPU work is 0.75 s and its copies 0.09 s; ZeRO's offload passes on the same cells came within 5% of their
prediction. Per parameter a GPU holds, beyond the copies' exposed share:

    one GPU          median 0.0 ns, at most 0.5 (44 of 45 passes on H100 and H200; Mamba-2.8B's checkpointed
                     FSDP-3 pass 3.6)
    2 x H200         1.9-3.5 ns (Pythia-410M's two, Pythia-1B, Llama-3.2-1B)
    4 x H200         1.1-1.2 ns (Pythia-1B, Llama-3.2-1B)

Where it goes is not measured (it falls from 2 to 4 GPUs faster than the parameters a GPU holds do). The likely
cause, from PyTorch's source: FSDP2 copies a reduced gradient to the CPU synchronously and adds it there whenever one
is already held (micro-batches 2..N of a step), once per module inside backward, and the engine reduces on every
micro-batch, as the export now has the Trainer do (accelerate's sync_each_batch). Measured since (2026-11-28,
twenty-third session, 2 x H200, Pythia-1B at micro-batch 32: data/probes/fsdp2-offload-h200x2-2026-11-28.jsonl):
such a held pass took 2.27 s, one holding nothing 0.77 s; with glibc keeping freed blocks on its heap the held pass
took 1.34 s (the Trainer's, without them, about 1.2 s), and the engine now runs FSDP offload so, with the host's
fused AdamW and all its cores. Measured again so (twenty-fourth session, 4 x H200 host, 64 cores), not every cell
got faster: Llama-3.2-1B on 2 GPUs went from 52.2 to 32.9 days, Pythia-1B on 2 from 55.2 to
50.7, and Pythia-1B on 4 rose from 16.0 to 18.7. A cell measured with today's engine counts those samples only; one
measured only before says so in every prediction that uses it: off either way. So a prediction
takes the cost per parameter measured at its own GPU count, else at the nearest count measured, and says which: the
median over cells (a cell measured in two settings counts once), on the GPUs and machines they ran on. A count nobody
measured on several GPUs adds nothing beyond the copies (the one-GPU rule) and says that. A step without accumulation
adds nothing either: every measured pass held a gradient from the pass before, which is what makes the copy
synchronous, and a step of one micro-batch holds none. Across machines, and on other GPUs than those measured, the
figure is carried over unchecked, and the note says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sample:
    """One measured FSDP offload pass on several GPUs."""

    cell: tuple  # (model, GPU type, GPU count): samples of one cell count once
    beyond_s: float  # the pass, less its GPU work and the copies' exposed share as on one GPU
    params_held: float  # parameters each GPU holds (the model's / the count)
    host_heap: bool = False  # measured with glibc's heap settings and the host's fused AdamW (2026-11-28 on)

    @property
    def per_param_s(self) -> float:
        return max(0.0, self.beyond_s) / self.params_held


@dataclass
class ShardedOffload:
    """The cost per parameter held beyond the copies: per GPU count measured, per cell (its samples' median)."""

    by_count: dict[int, dict[tuple, float]] = field(default_factory=dict)
    before_heap: set[tuple] = field(default_factory=set)  # cells measured only before the heap settings

    @classmethod
    def of(cls, samples: list[Sample]) -> "ShardedOffload":
        """Per cell, the median of its samples; of today's engine's alone where it has any. (The shipped database
        marks a cell's earlier measurements superseded; a results file of one's own may hold both.)"""
        cells: dict[tuple, dict[bool, list[float]]] = {}
        for s in samples:
            if s.cell[2] > 1 and s.params_held > 0:
                cells.setdefault(s.cell, {}).setdefault(s.host_heap, []).append(s.per_param_s)
        out = cls()
        for cell, by_engine in cells.items():
            now = by_engine.get(True)
            out.by_count.setdefault(cell[2], {})[cell] = statistics.median(now or by_engine[False])
            if not now:
                out.before_heap.add(cell)
        return out

    def nearest(self, num_gpus: int) -> int | None:
        """The measured count nearest `num_gpus` (by ratio; the larger of two as near)."""
        if not self.by_count:
            return None
        return min(self.by_count, key=lambda n: (abs(math.log(n / num_gpus)), -n))

    def per_param_s(self, num_gpus: int, gpu: str = "", nodes: int = 1) -> tuple[float, str]:
        """(seconds per parameter held, a pass, beyond the copies; where the figure comes from): the median over the
        measured cells at `num_gpus`, else at the nearest count measured."""
        if num_gpus <= 1:
            return 0.0, ""
        n = self.nearest(num_gpus)
        if n is None:
            return 0.0, ("no FSDP offload measured on several GPUs: the copies as on one GPU, nothing more "
                         "(measured elsewhere, several GPUs cost 1-4 ns per parameter held beyond them)")
        cells = self.by_count[n]
        value = statistics.median(cells.values())
        where = "this GPU count" if n == num_gpus else f"{n} GPUs, the nearest count measured"
        gpus = sorted({c[1] for c in cells})
        caveats = []
        if gpu and gpu not in gpus:
            caveats.append(f"measured on {'/'.join(gpus)}, not this GPU type")
        if nodes > 1:
            caveats.append("measured on one machine, not across machines")
        before = [c for c in cells if c in self.before_heap]
        if before:
            caveats.append(f"{len(before)} of the {len(cells)} measured only before the engine stepped the host's fused "
                           "AdamW with all its cores and glibc keeping freed blocks on its heap: off either way (measured "
                           "again so on 4 x H200, Llama-3.2-1B on 2 GPUs fell 37%, Pythia-1B on 4 rose 17%)")
        return value, (f"FSDP offload on several GPUs: {value * 1e9:.2f} ns per parameter held beyond the copies, "
                       f"median of {len(cells)} measured cells on {where} "
                       f"({', '.join(f'{c[0]} {c[2]}x{c[1]}' for c in sorted(cells))})"
                       + "".join(f"; {c}" for c in caveats))
