"""What the time model is fitted on and how: measured (or plausible paper) rows reduced to basis rows, one
per configuration; the least-squares roofline fit per architecture and kernel group (engine/predict/terms.py
says what each term is); the error band from leave-one-out errors (engine/predict/validate.py)."""

from __future__ import annotations


from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from engine.data import formulas, space
from engine.data.errors import PlannerError
from engine.data.links import HOST_STAGED
from engine.data.presets import Presets
from engine.data.space import Methods
from engine.predict import memory
from engine.predict.memory import shape
from engine.predict.terms import (DEFAULT_BANDWIDTH_FRACTION, MAX_BANDWIDTH_FRACTION, MAX_COMPUTE_FRACTION, arch_of,
                                  comm_bytes, compute_flops_per_sample, compute_peak_flops, dense_causal_mask_of, group_of,
                                  host_bytes, json_field, link_bytes_per_s, optimizer_bytes, pcie_gbs, recompute,
                                  traffic_terms)

# --- basis rows and fits ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BasisRow:
    """One measured (or plausible paper) configuration, reduced to what the fits use."""

    trial_id: str
    source: str
    model: str
    gpu: str
    num_gpus: int
    methods: Methods
    group: str
    arch: str  # the model's architecture (config class): fits and bands are per architecture
    family: str  # transformer | mamba | convnext: the fallback for an architecture nobody measured
    per_sample_s: float  # pass time per sample, less modelled communication and host copies
    compute_s: float  # per sample at 100% of the peak
    memory_s: float  # per sample at 100% of the bandwidth
    update_s: float | None
    update_bytes: float
    micro_batch: int | None  # the largest the engine's search fitted
    days: float
    host_pass_s: float = 0.0  # offloading's CPU <-> GPU copies of one pass at the full PCIe rate
    timed_micro_batch: int | None = None
    host_heap: bool = False  # FSDP offload run with glibc's heap settings (engine.data.space.HOST_MALLOC_ENV)

    @property
    def cell(self) -> tuple[str, str, int]:
        return (self.model, self.gpu, self.num_gpus)

    def label(self) -> str:
        src = "" if self.source == "measured" else f" {self.source}"
        return f"{self.model}/{self.num_gpus}x{self.gpu} {self.methods.label}{src} {self.trial_id[:8]}"


def basis_row(row: Mapping[str, Any], presets: Presets) -> BasisRow | None:
    """A stored trial as a basis row, or None when it cannot serve: not feasible, flagged implausible,
    settings unread, no pass time, or an architecture or GPU the presets do not know."""
    if not row.get("feasible") or row.get("days") is None or row.get("failure_kind"):
        return None
    if row.get("plausibility") not in (None, "ok"):
        return None
    if row.get("source") not in ("measured", "paper-table1", "paper-table4"):
        return None
    if space.capped(row):
        # timed below the micro-batch that fits (`bench --max-micro-batch`): what a pass costs beside its work
        # at small micro-batches (engine/predict/floors.py), not the per-sample rate a fit is of
        return None
    if memory.beyond_the_paper(row):
        return None  # fused kernels or FP8: not the bf16 engine the fits describe
    if json_field(row.get("provenance"), "fsdp_reduce_dtype"):
        return None  # a probe's trial (engine.bench.steppers.PROBE_REDUCE_16BIT): not the engine's method
    try:
        model, gpu = presets.model(row["model"]), presets.gpu(row["gpu"])
        s = shape(model)
    except PlannerError:
        return None
    if row.get("interconnect") in ("sockets", "network", HOST_STAGED):
        # Another machine's links emulated on this one. Their twins over the machine's own links say what the
        # GPU computes; what they add over those twins calibrates the communication's exposed share
        # (engine/predict/comm.py). (A host-staged row's update hid its all-reduce behind the last backward: its
        # time cannot be taken apart at the 22-24 GB/s scripts/nccl_probe.py measured host-staged.)
        return None
    settings = ("free_lunch", "activation_checkpointing", "sharding", "offloading")
    if any(row.get(k) is None for k in settings):
        return None  # a paper cell whose settings Appendix J does not let us read: unknown methods
    try:
        methods = memory.methods_of(row)
    except PlannerError:
        return None  # a setting this version does not know: not a basis
    n = int(row["num_gpus"]) * int(row.get("num_nodes") or 1)
    if not space.is_valid(methods, n):
        return None
    peak = compute_peak_flops(gpu, model, methods)
    if peak is None:
        return None
    # Plausible against the peak this model's math runs at (TF32 for fp32 models), not only the 16-bit one.
    # A row's days are for the steps it was run (or predicted) for; the model here may be the same model on a
    # run of another length (engine/data/runs.py): its step is the same, its days scale with the steps.
    steps = int(row.get("steps") or model.training.steps)
    if formulas.implied_mfu(model.flops_per_step * steps, row["days"], n, peak) > MAX_COMPUTE_FRACTION:
        return None
    comm_pass, comm_update = comm_bytes(model, methods, n)
    host_pass, host_update = host_bytes(model, methods, n)
    # Offloading's copies stay in the pass: how fast they really go is fitted from these rows apart.
    overhead_pass = comm_pass / link_bytes_per_s(gpu, n)
    per_gpu_batch = model.training.batch_size / n
    if row["source"] == "measured":
        if not row.get("pass_s") or not row.get("micro_batch"):
            return None
        per_sample = (row["pass_s"] - overhead_pass) / row["micro_batch"]
        # The optimizer alone: under DDP the engine adds the step's all-reduce to update_s.
        update = json_field(row.get("provenance"), "optimizer_update_s") or row.get("update_s")
    else:  # the paper gives days only: spread the step over the GPU's share of the batch
        step = row["days"] * formulas.SECONDS_PER_DAY / steps
        accum = row.get("grad_accum") or 1
        per_sample = (step - accum * overhead_pass) / per_gpu_batch
        update = None
    if per_sample <= 0:
        return None
    k = recompute(model, methods)
    return BasisRow(
        trial_id=str(row.get("trial_id") or ""), source=row["source"], model=model.id, gpu=gpu.id, num_gpus=n,
        methods=methods, group=group_of(model, methods, dense_causal_mask_of(row, model, methods)),
        arch=arch_of(model), family=s.family,
        per_sample_s=per_sample,
        compute_s=k * compute_flops_per_sample(model) / peak,
        memory_s=sum(traffic_terms(model, methods).values()) / (gpu.memory_bandwidth_gbs * 1e9),
        update_s=update, update_bytes=optimizer_bytes(model, methods, n) / (gpu.memory_bandwidth_gbs * 1e9),
        host_pass_s=host_pass / (pcie_gbs(gpu) * 1e9), timed_micro_batch=row.get("micro_batch"),
        # The largest micro-batch the search fitted (the timing may have halved it to fit compiled).
        micro_batch=json_field(row.get("provenance"), "max_micro_batch_searched") or row.get("micro_batch"),
        days=row["days"] * model.training.steps / steps,
        # exactly the engine's glibc settings: a user's own value for any of them is another run
        host_heap=json_field(row.get("provenance"), "host_malloc") == space.HOST_MALLOC_ENV,
    )


def distinct(basis: Iterable[BasisRow]) -> list[BasisRow]:
    """One row per configuration (source, cell, setting, kernel group): a configuration measured several
    times (on other days, or a search repeated) enters as its median-days measurement (the lower of the
    middle two), so no configuration weighs more in a fit or a calibration because it was measured more
    often. A setting measured again after an engine fix (a dense causal mask, then none) is two: each
    stays in its own group rather than averaging the old engine with the new."""
    groups: dict[tuple, list[BasisRow]] = {}
    for b in basis:
        groups.setdefault((b.source, b.cell, b.methods, b.group), []).append(b)
    out = []
    for rows in groups.values():
        rows = sorted(rows, key=lambda b: b.days)
        out.append(rows[(len(rows) - 1) // 2])
    return out


@dataclass(frozen=True)
class Fit:
    """per-sample pass = x_c x compute_s + x_m x memory_s, for one architecture and kernel group."""

    arch: str
    group: str
    x_c: float
    x_m: float
    rows: tuple[BasisRow, ...]
    note: str = ""

    @property
    def compute_fraction(self) -> float:
        return 1 / self.x_c

    @property
    def bandwidth_fraction(self) -> float:
        return 1 / self.x_m

    def per_sample(self, compute_s: float, memory_s: float) -> float:
        return self.x_c * compute_s + self.x_m * memory_s


def fit_rows(arch: str, group: str, rows: Sequence[BasisRow]) -> Fit | None:
    """Least squares on relative error, bounded so neither fraction exceeds its physical cap. One row (or
    rows that cannot tell the two terms apart) pins x_c with the default bandwidth fraction."""
    if not rows:
        return None
    lo_c, lo_m = 1 / MAX_COMPUTE_FRACTION, 1 / MAX_BANDWIDTH_FRACTION
    # Weighted normal equations: minimise sum ((x_c c + x_m m) / t - 1)^2.
    a = [(r.compute_s / r.per_sample_s, r.memory_s / r.per_sample_s) for r in rows]
    scc = sum(c * c for c, _ in a)
    smm = sum(m * m for _, m in a)
    scm = sum(c * m for c, m in a)
    sc, sm = sum(c for c, _ in a), sum(m for _, m in a)
    det = scc * smm - scm * scm
    note = ""
    if len(rows) >= 2 and det > 1e-9 * scc * smm:
        x_c = (sc * smm - sm * scm) / det
        x_m = (sm * scc - sc * scm) / det
        if x_c < lo_c or x_m < lo_m:  # a bound binds: fix that one and solve the other
            if x_m < lo_m:
                x_m = lo_m
                x_c = max(lo_c, (sc - x_m * scm) / scc)
            else:
                x_c = lo_c
                x_m = max(lo_m, (sm - x_c * scm) / smm) if smm > 0 else lo_m
    else:
        x_m = 1 / DEFAULT_BANDWIDTH_FRACTION
        x_c = max(lo_c, (sc - x_m * scm) / scc)
        note = f"one basis row: bandwidth fraction assumed {DEFAULT_BANDWIDTH_FRACTION:.0%}"
    return Fit(arch, group, x_c, x_m, tuple(rows), note)


@dataclass(frozen=True)
class Band:
    """Where the truth probably lies around a prediction: the spread of leave-one-out errors."""

    low_factor: float  # days_low = days x low_factor
    high_factor: float
    errors: tuple[float, ...]  # signed (predicted / actual - 1) of the validation
    what: str

    def __post_init__(self) -> None:
        # A band always holds its own prediction. Where every validated error has one sign (e.g. ViT's
        # predictions all ran fast), the errors alone would put the band wholly above or below the
        # point ("33.2 days (41.3-46.6)"), which no reader can act on: the band then starts at the point.
        object.__setattr__(self, "low_factor", min(self.low_factor, 1.0))
        object.__setattr__(self, "high_factor", max(self.high_factor, 1.0))

    @classmethod
    def from_errors(cls, errors: Sequence[float], what: str) -> "Band":
        if len(errors) < 3:
            return cls(0.5, 2.0, tuple(errors), f"{what}: fewer than 3 validated cells, so a wide 0.5x-2x band")
        # actual = predicted / (1 + e): the most over-predicted case bounds below, the most under above.
        return cls(1 / (1 + max(errors)), 1 / (1 + min(errors)), tuple(errors), what)


