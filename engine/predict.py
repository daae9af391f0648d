"""Predict training days for a model on a GPU type and count nobody measured, and say how good that is.

The time model is a roofline fitted to measurements (every term below says where it comes from):

    pass_s   = residual x micro_batch x (x_c x compute_s + x_m x memory_s) + comm_s + host_s
      compute_s = k x FLOPs per sample / dense peak        (k with checkpointing: 1 + the preset's
                                                           checkpoint_recompute, what it runs again)
      memory_s  = memory-bound bytes per sample / bandwidth (eager attention scores, logits and loss,
                  elementwise layers: counted per architecture in `traffic_terms`)
      x_c, x_m  = 1 / achieved fraction of peak and of bandwidth, fitted by least squares (relative
                  error) over the basis rows of the same architecture and kernel group (naive
                  eager; free-lunch compiled; free-lunch uncompiled, as ZeRO runs); x_c >= 1/0.6, so no
                  prediction claims more than 60% of the dense peak
      residual  = measured / fitted pass of the same model in the same group on other hardware: its
                  unsharded rows if any, else all (1 if none)
      comm_s    = bytes each GPU sends per pass (reduce-scatter, all-gather: ZeRO, FSDP) / (interconnect
                  per direction x 0.7), added in full (no overlap credit); DDP's one all-reduce per
                  step goes into the update, as the engine times it
      host_s    = e x CPU <-> GPU bytes per pass with offloading / (PCIe per direction x 0.7): e in [0, 1] is
                  the exposed share of the copies (the rest overlaps the GPU's work through prefetch), per
                  implementation (DeepSpeed ZeRO-Offload, FSDP CPU offload), median over measured offload
                  passes of other cells (what they took beyond their GPU work / their copy time); 1 if none
    update_s = x_u x optimizer bytes / bandwidth + per-step communication; with offloading instead the
               parameters each GPU holds x the measured offload update per parameter of that
               implementation (CPU Adam + the copy back: DeepSpeed's vectorized CPU Adam ~0.5 ns/param,
               FSDP's torch.optim.Adam on the CPU ~3 ns/param), median over other cells' offload rows
    step_s   = pass_s x accumulation + update_s;  days = step_s x steps / 86400
    micro_batch = the largest power of two the memory model fits (engine/memory.py); none: infeasible

Basis rows are measured ones (synchronized timings); a configuration measured more than once (the same cell
and setting on other days) enters once, as its median-days measurement. An architecture with no measured rows falls back to the
paper's Table 1/4 rows whose implied MFU is plausible (<= 60%), marked as such: the paper's timer did not
synchronize the GPU, so even those can be optimistic. The error band comes from leave-one-out over the
same basis (`validate`): each measured cell (model x GPU x count) is predicted from all other cells.
No torch here.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import statistics
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from engine.data import formulas, space
from engine import memory
from engine.data.errors import PlannerError
from engine.memory import MemoryModelError, shape
from engine.data.presets import Gpu, Model, Presets
from engine.data.space import Methods

# A prediction never claims more than this share of the dense peak (formulas.IMPLAUSIBLE_MFU: well-tuned
# training reaches 40-55%); nor more than this share of the memory bandwidth.
MAX_COMPUTE_FRACTION = formulas.IMPLAUSIBLE_MFU
MAX_BANDWIDTH_FRACTION = 0.9
# Used where no basis row pins a value down (each use is named in the prediction's explanation).
DEFAULT_BANDWIDTH_FRACTION = 0.7
DEFAULT_UPDATE_BANDWIDTH_FRACTION = 0.5
# NCCL and PCIe copies reach roughly 70% of a link's per-direction rate (an assumption until a
# multi-GPU measurement calibrates it).
LINK_EFFICIENCY = 0.7
# Host link (CPU <-> GPU) where the GPU preset does not name one: the PCIe generation of that
# architecture's SXM boards, x16, per direction, GB/s.
PCIE_X16_GBS = {"3": 15.75, "4": 31.5, "5": 63.0, "6": 121.0}
HOST_PCIE_BY_ARCHITECTURE = {"volta": "3", "turing": "3", "ampere": "4", "ada": "4", "hopper": "5", "blackwell": "5"}
# CPU Adam where no measured offload row says how fast the host is: ~28 bytes of fp32 state read and
# written per parameter at ~10 GB/s of host memory bandwidth (PyTorch's CPU Adam; an assumption).
DEFAULT_CPU_ADAM_S_PER_PARAM = 2.8e-9

# Bytes moved per element, forward + backward, for the memory-bound kernels (counted in traffic_terms).
EAGER_SCORE_TRAFFIC = 54  # QK^T out 2, scale 4, mask 4, fp32 softmax 6, cast 6, AV in 2; backward ~30
LOGIT_TRAFFIC = 40  # 16-bit logits, fp32 upcast, log-softmax, its gradient, cast back, lm_head reads
LAYER_ELEMENTWISE_TRAFFIC = 70  # per s.h per layer: 2 LayerNorms, GELU on 4h, residual adds, rotary
MAMBA_SCAN_TRAFFIC = 36  # per token per expanded channel: conv1d, selective scan, gating, fwd + bwd
CONVNEXT_BLOCK_TRAFFIC = 3 * memory.CONVNEXT_BLOCK_TENSORS  # each tensor written, read back, its gradient
# Optimizer update, per parameter on the GPU: fused Adam reads weights, gradients and two moments
# (16 bytes) and writes weights and moments (12); clipping reads the gradients again (4).
ADAM_UPDATE_BYTES = 32

GROUPS = ("naive", "compiled", "uncompiled", "compiled-mask")
GROUP_WORDS = {"naive": "naive (eager attention, no compile)", "compiled": "free-lunch, compiled",
               "uncompiled": "free-lunch without compile (ZeRO / non-compilable models)",
               "compiled-mask": "free-lunch, compiled, dense causal mask (engine before its 2026-11-23 fixes)"}


class PredictError(PlannerError):
    """A prediction cannot be made as asked; the message says why and what would make it possible."""


# --- the model's pieces -------------------------------------------------------------------------------


arch_of = memory.arch_of  # fits, bands and calibrations are per architecture: 'GPTNeoX', 'ViT', ...


def group_of(model: Model, methods: Methods, dense_causal_mask: bool = False) -> str:
    """The kernel group: naive; compiled; uncompiled. `dense_causal_mask` names passes that ran with a
    dense causal mask: compiled causal LMs got a dense (batch, 1, s, s) mask from transformers before the
    engine's fixes, so SDPA ran cuDNN over every block instead of flash's causal half ("compiled-mask";
    see dense_causal_mask_of). Predictions are for today's engine: "compiled"."""
    if not methods.free_lunch:
        return "naive"
    if not space.uses_compile(methods, model.compile):
        return "uncompiled"
    return "compiled-mask" if dense_causal_mask and could_get_dense_causal_mask(model, methods) else "compiled"


def could_get_dense_causal_mask(model: Model, methods: Methods) -> bool:
    """Compiled SDPA in a causal LM: where transformers built a dense causal mask before the engine's fixes
    (without checkpointing until 2026-11-23 04:00 UTC; with it, which runs without a cache and so looks for
    packed sequences, until 2026-11-23 09:30 UTC)."""
    return (model.objective == "causal-lm" and space.uses_compile(methods, model.compile)
            and model.attention == "sdpa")


def dense_causal_mask_of(row: Mapping[str, Any], model: Model, methods: Methods) -> bool:
    """Whether a measured row ran with the dense causal mask: its provenance says what SDPA got
    ("causal_mask", recorded since the first fix); a row that records nothing had one if it ran SDPA (or
    is too old to say which kernel ran)."""
    if row.get("source") != "measured" or not could_get_dense_causal_mask(model, methods):
        return False
    text = row.get("provenance")
    try:
        prov = json.loads(text) if isinstance(text, str) else (text or {})
    except ValueError:
        prov = {}
    if isinstance(prov, dict) and "causal_mask" in prov:
        return prov["causal_mask"] != "is_causal flag"
    kernel = row.get("kernel")
    return kernel is None or str(kernel).startswith("sdpa")  # flash-attn's own kernel never had the mask


def compute_peak_flops(gpu: Gpu, model: Model, methods: Methods) -> float | None:
    """The dense tensor peak the model's math runs at: 16-bit for fp16/bf16; TF32 for fp32 with free-lunch
    (TF32 is part of it). fp32 without TF32 runs on CUDA cores, whose peak the presets do not hold."""
    if memory.mixed_precision(model):
        return gpu.peak_16bit_flops
    if methods.free_lunch and gpu.peak_tf32_tflops:
        return gpu.peak_tf32_tflops * 1e12
    return None


def flops_per_sample(model: Model) -> float:
    """The preset's training FLOPs (the same figure MFU uses) per sample of the replication batch."""
    return model.flops_per_step / model.training.batch_size


def recompute(model: Model, methods: Methods) -> float:
    """A pass's FLOPs (and elementwise bytes) under `methods` over a plain pass's: checkpointing runs part
    of it again (the preset's `checkpoint_recompute`)."""
    return model.recompute_factor if methods.activation_checkpointing else 1.0


def traffic_terms(model: Model, methods: Methods) -> dict[str, float]:
    """Memory-bound bytes moved per sample in one forward + backward (the roofline's memory term)."""
    s = shape(model)
    w = 1.0 if memory.mixed_precision(model) else 2.0
    k = recompute(model, methods)  # the recompute moves its bytes again
    terms: dict[str, float] = {}
    if s.family in ("transformer", "mamba"):
        terms["elementwise layers"] = k * LAYER_ELEMENTWISE_TRAFFIC * s.layers * s.tokens * s.hidden * w
    if s.family == "transformer" and s.heads and not memory.fused_attention(model, methods):
        terms["eager attention scores"] = k * EAGER_SCORE_TRAFFIC * s.layers * s.heads * s.tokens ** 2 * w
    if s.family == "mamba":
        terms["conv1d + selective scan"] = k * MAMBA_SCAN_TRAFFIC * s.layers * s.tokens * s.inner
        if not methods.free_lunch:  # slow path: scan states written, read back and differentiated
            terms["slow-path scan states"] = k * 24 * s.layers * s.tokens * s.inner * s.state
    if s.family == "convnext":
        elem = 2.0 if memory.mixed_precision(model) else 4.0
        terms["blocks"] = k * CONVNEXT_BLOCK_TRAFFIC * elem * sum(r * r * c * d for r, c, d in s.stages)
    terms["logits and loss"] = LOGIT_TRAFFIC * s.logit_positions * s.logit_width * (1 if w == 1 else 1.5)
    return terms


def link_bytes_per_s(gpu: Gpu, num_gpus: int) -> float:
    """GPU-to-GPU rate per direction: the preset's figure is the bidirectional total. A 2-way bridge
    joins only two cards: with more, traffic goes over the PCIe named in the preset."""
    gbs = gpu.interconnect_gbs / 2
    if num_gpus > 2 and "2-way" in gpu.interconnect:
        gbs = _pcie_gbs(gpu)
    return gbs * 1e9 * LINK_EFFICIENCY


def host_bytes_per_s(gpu: Gpu, fraction: float = LINK_EFFICIENCY) -> float:
    """CPU <-> GPU rate per direction (offloading): the PCIe generation's rate x the fraction reached."""
    return _pcie_gbs(gpu) * 1e9 * fraction


def _pcie_gbs(gpu: Gpu) -> float:
    found = re.search(r"PCIe (\d)", gpu.interconnect)
    gen = found.group(1) if found else HOST_PCIE_BY_ARCHITECTURE.get(gpu.architecture, "4")
    return PCIE_X16_GBS.get(gen, PCIE_X16_GBS["4"])


def comm_bytes(model: Model, methods: Methods, num_gpus: int) -> tuple[float, float]:
    """(bytes each GPU sends per pass, per update) between GPUs, as the engine times it. Ring collectives
    send (N-1)/N of the buffer (an all-reduce twice that). DDP all-reduces the fp32 gradients once per
    step (passes inside gradient accumulation run under no_sync); ZeRO reduce-scatters 16-bit gradients
    on every pass and all-gathers 16-bit weights (stage 3: forward and backward of every pass; stages
    1-2: once, after the update); FSDP gathers 16-bit weights on every pass (stage 3 again for the
    backward) and reduce-scatters fp32 gradients."""
    n = num_gpus
    if n <= 1:
        return 0.0, 0.0
    psi = shape(model).params
    ring = (n - 1) / n
    half = 2.0 if memory.mixed_precision(model) else 4.0
    extra_gather = 1 if methods.activation_checkpointing else 0  # the recomputed forward gathers again
    if methods.sharding == "none":
        return 0.0, 2 * ring * 4 * psi
    if methods.deepspeed:
        if methods.stage == 3:
            return ring * half * psi * (3 + extra_gather), 0.0
        return ring * half * psi, ring * half * psi
    gathers = 1 if methods.stage == 2 else 2 + extra_gather
    return ring * (gathers * half * psi + 4 * psi), 0.0


def host_bytes(model: Model, methods: Methods, num_gpus: int) -> tuple[float, float]:
    """(bytes over PCIe per pass, per update) with offloading. ZeRO-Offload sends 16-bit gradients to
    the CPU each pass and 16-bit weights back after the update (stage 3: weights come in for the forward
    and the backward, and the recomputed forward with checkpointing); FSDP's CPU offload brings the fp32
    weight shard in for each gather (as comm_bytes counts them) and sends the fp32 gradients out. The
    update's bytes are part of the measured offload update per parameter (Predictor.offload_update_s)."""
    if not methods.offloading:
        return 0.0, 0.0
    psi = shape(model).params / max(num_gpus, 1)
    half = 2.0 if memory.mixed_precision(model) else 4.0
    extra_gather = 1 if methods.activation_checkpointing else 0  # the recomputed forward gathers again
    if methods.deepspeed:
        if methods.stage == 3:
            return half * psi * (3 + extra_gather), 0.0
        if methods.stage == 1:  # ZeRO-1 keeps gradients on the GPU through accumulation: out once per step
            return 0.0, 2 * half * psi
        return half * psi, half * psi  # ZeRO-2 moves each pass's gradient partition to the CPU
    gathers = 1 if methods.stage == 2 else 2 + extra_gather
    return 4 * psi * gathers + 4 * psi, 0.0


def optimizer_bytes(model: Model, methods: Methods, num_gpus: int) -> float:
    """Bytes the optimizer update moves in GPU memory (0 when the CPU steps)."""
    if methods.offloading:
        return 0.0
    psi = shape(model).params
    local = psi if methods.sharding == "none" else psi / num_gpus
    return ADAM_UPDATE_BYTES * local


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
    try:
        model, gpu = presets.model(row["model"]), presets.gpu(row["gpu"])
        s = shape(model)
    except PlannerError:
        return None
    settings = ("free_lunch", "activation_checkpointing", "sharding", "offloading")
    if any(row.get(k) is None for k in settings):
        return None  # a paper cell whose settings Appendix J does not let us read: unknown methods
    methods = memory.methods_of(row)
    n = int(row["num_gpus"]) * int(row.get("num_nodes") or 1)
    if not space.is_valid(methods, n):
        return None
    peak = compute_peak_flops(gpu, model, methods)
    if peak is None:
        return None
    # Plausible against the peak this model's math runs at (TF32 for fp32 models), not only the 16-bit one.
    if formulas.implied_mfu(model.training_flops, row["days"], n, peak) > MAX_COMPUTE_FRACTION:
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
        update = _json_field(row.get("provenance"), "optimizer_update_s") or row.get("update_s")
    else:  # the paper gives days only: spread the step over the GPU's share of the batch
        step = row["days"] * formulas.SECONDS_PER_DAY / model.training.steps
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
        compute_s=k * flops_per_sample(model) / peak,
        memory_s=sum(traffic_terms(model, methods).values()) / (gpu.memory_bandwidth_gbs * 1e9),
        update_s=update, update_bytes=optimizer_bytes(model, methods, n) / (gpu.memory_bandwidth_gbs * 1e9),
        host_pass_s=host_pass / (_pcie_gbs(gpu) * 1e9), timed_micro_batch=row.get("micro_batch"),
        # The largest micro-batch the search fitted (the timing may have halved it to fit compiled).
        micro_batch=_json_field(row.get("provenance"), "max_micro_batch_searched") or row.get("micro_batch"),
        days=row["days"],
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


def _offload_kind(methods: Methods) -> str:
    return "fsdp" if methods.fsdp else "zero"


def _host_kind(methods: Methods) -> str:
    """The copy path of a pass with offloading: FSDP's CPU offload; DeepSpeed's ZeRO-2 (gradient partitions
    out, accumulated in the CPU's fp32 buffer); ZeRO-3 (parameters in from the CPU too, per module)."""
    return "fsdp" if methods.fsdp else f"zero{methods.stage}"


def host_transfers(model: Model, methods: Methods) -> int:
    """Module-by-module transfers between CPU and GPU in one pass with DeepSpeed offloading: each layer's
    gradient partition out (ZeRO-2, ZeRO-3), its parameters in for the forward and the backward (ZeRO-3)
    and for the recomputed forward with checkpointing. Each waits on its copy and the CPU's fp32 buffers,
    a latency per layer that outweighs the bytes at these sizes (Predictor.host_latency_s)."""
    if not methods.offloading or methods.fsdp or methods.stage == 1:
        return 0
    per_layer = 1 if methods.stage == 2 else 3 + (1 if methods.activation_checkpointing else 0)
    return per_layer * shape(model).layers


def _json_field(text: Any, key: str) -> Any:
    try:
        value = json.loads(text) if isinstance(text, str) else (text or {})
    except ValueError:
        return None
    return value.get(key) if isinstance(value, dict) else None


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

    @classmethod
    def from_errors(cls, errors: Sequence[float], what: str) -> "Band":
        if len(errors) < 3:
            return cls(0.5, 2.0, tuple(errors), f"{what}: fewer than 3 validated cells, so a wide 0.5x-2x band")
        # actual = predicted / (1 + e): the most over-predicted case bounds below, the most under above.
        return cls(1 / (1 + max(errors)), 1 / (1 + min(errors)), tuple(errors), what)


# --- predictions --------------------------------------------------------------------------------------


@dataclass
class Prediction:
    """One method combination on one hardware cell, with every term that produced it."""

    model: str
    gpu: str
    num_gpus: int
    methods: Methods
    feasible: bool
    reason: str = ""
    micro_batch: int | None = None
    grad_accum: int | None = None
    pass_s: float | None = None
    update_s: float | None = None
    step_s: float | None = None
    days: float | None = None
    days_low: float | None = None
    days_high: float | None = None
    mfu: float | None = None
    capped: bool = False
    memory_need_gb: float | None = None
    memory_capacity_gb: float | None = None
    basis: str = ""
    terms: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)  # the explanation, one term per line

    @property
    def label(self) -> str:
        return self.methods.label


class Predictor:
    """Fits from a set of basis rows; predicts any (model, GPU, count, methods)."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], presets: Presets, use_paper: bool = True,
                 bands: Mapping[str, Band] | None = None):
        self.presets = presets
        rows = [dict(r) for r in rows]
        self.stored = rows
        basis = distinct(b for b in (basis_row(r, presets) for r in rows) if b is not None)
        self.basis = [b for b in basis if b.source == "measured" or use_paper]
        self.calibrations = memory.calibrate(rows, presets)
        self.bands = dict(bands or {})
        self._fits: dict[tuple[str, str, str], Fit | None] = {}
        updates = [b.update_s / b.update_bytes for b in self.basis
                   if b.update_s and b.update_bytes > 0 and b.source == "measured"]
        self.x_u = statistics.median(updates) if updates else 1 / DEFAULT_UPDATE_BANDWIDTH_FRACTION
        self.x_u_note = (f"update: {1 / self.x_u:.0%} of bandwidth, median of {len(updates)} measured updates"
                         if updates else f"update: {DEFAULT_UPDATE_BANDWIDTH_FRACTION:.0%} of bandwidth assumed")
        # The offload update per parameter each GPU holds, per implementation: CPU Adam over the fp32 master
        # weights and moments plus the copy back, measured together. DeepSpeed's vectorized CPU Adam and
        # FSDP's torch.optim.Adam on the CPU differ several-fold, so each is calibrated from its own rows;
        # an implementation nobody measured takes the other's rows, then the assumption.
        per_param: dict[str, list[float]] = {"zero": [], "fsdp": []}
        for b in self.basis:
            if b.source == "measured" and b.methods.offloading and b.update_s:
                params = shape(presets.model(b.model)).params / b.num_gpus
                per_param[_offload_kind(b.methods)].append(b.update_s / params)
        self.offload_update_s: dict[str, float] = {}
        self.cpu_note: dict[str, str] = {}
        for k, v in per_param.items():
            other = [x for kk, vv in per_param.items() if kk != k for x in vv]
            if v:
                self.offload_update_s[k] = statistics.median(v)
                self.cpu_note[k] = f"{len(v)} measured {k} offload updates"
            elif other:
                self.offload_update_s[k] = statistics.median(other)
                self.cpu_note[k] = f"no measured {k} offload update: {len(other)} of the other implementation"
            else:
                self.offload_update_s[k] = DEFAULT_CPU_ADAM_S_PER_PARAM
                self.cpu_note[k] = "assumed (no measured offload update)"
            self.cpu_note[k] = f"offload update {self.offload_update_s[k] * 1e9:.2f} ns/param: " + self.cpu_note[k]
        # How much of offloading's copies a pass exposes, per implementation: each measured offload pass,
        # less what its group's fit (and its model's residual) says the same pass takes on the GPU, over its
        # copies' time at LINK_EFFICIENCY of PCIe; clipped to [0, 1] (prefetch can hide copies behind the
        # GPU's work, never make them cost less than nothing or more than in full); median.
        # DeepSpeed's offloaded passes instead: the copies at the PCIe rate plus a latency per module transfer
        # (host_transfers), per stage, median over measured offload passes of other cells.
        rates: dict[str, list[float]] = {"fsdp": []}
        lat: dict[str, list[float]] = {"zero2": [], "zero3": []}
        for b in self.basis:
            if b.source != "measured" or not b.methods.offloading or not b.host_pass_s or not b.timed_micro_batch:
                continue
            f = self.fit(b.arch, b.group, b.family)
            if f is None:
                continue
            gpu_s = (b.timed_micro_batch * self._residual(f, self._own_rows(f, b.model, b.group))
                     * f.per_sample(b.compute_s, b.memory_s))
            copies_s = b.host_pass_s / LINK_EFFICIENCY
            exposed = b.timed_micro_batch * b.per_sample_s - gpu_s
            kind = _host_kind(b.methods)
            if kind == "fsdp":
                rates[kind].append(min(1.0, max(0.0, exposed / copies_s)))
            else:
                lat[kind].append(max(0.0, exposed - copies_s) / host_transfers(presets.model(b.model), b.methods))
        self.host_exposed = {k: statistics.median(v) if v else 1.0 for k, v in rates.items()}
        self.host_note = {k: (f"{self.host_exposed[k]:.0%} of the copy time exposed, median of {len(v)} measured "
                              f"{k} offload passes" if v else f"copies exposed in full (no measured {k} offload pass)")
                          for k, v in rates.items()}
        self.host_latency_s: dict[str, float] = {}
        for k, v in lat.items():
            pool = v or [x for vv in lat.values() for x in vv]
            self.host_latency_s[k] = statistics.median(pool) if pool else 0.0
            self.host_exposed[k] = 1.0
            self.host_note[k] = (f"copies in full + {self.host_latency_s[k] * 1e3:.1f} ms per layer transfer, median "
                                 f"of {len(pool)} measured {k if v else 'ZeRO'} offload passes" if pool else
                                 f"copies in full, no latency (no measured ZeRO offload pass)")

    @staticmethod
    def _own_rows(f: "Fit", model_id: str, group: str) -> list[BasisRow]:
        """This model's rows in the fit that its residual comes from: the unsharded ones where it has any,
        else all. A residual is about the model, the same for each of its settings (so a setting's terms,
        such as offloading's copies, keep their order); sharded rows also carry what the time model leaves
        out of sharding (FSDP's re-gathers in a checkpointed recompute), which would land on every setting."""
        mine = [b for b in f.rows if b.model == model_id]
        # A fit borrowed from another group (no rows of its own) lends its residual too: from the rows it
        # was fitted on, compiled before naive, so the model's settings on the same fit share one residual.
        own = ([b for b in mine if b.group == group] or [b for b in mine if b.group != "naive"] or mine)
        return [b for b in own if b.methods.sharding == "none"] or own

    @staticmethod
    def _residual(f: "Fit", rows: Sequence[BasisRow]) -> float:
        """Measured / fitted pass of these rows of the model (1 if it has none in the fit)."""
        return statistics.median(b.per_sample_s / f.per_sample(b.compute_s, b.memory_s) for b in rows) if rows else 1.0

    # -- fits --

    def fit(self, arch: str, group: str, family: str = "") -> Fit | None:
        """The first basis that has rows: this architecture's measurements; else the measurements of
        other architectures of its family (a transformer is fitted from transformers); else the paper's
        plausible rows of this architecture (its timer did not synchronize: optimistic)."""
        levels = (
            ("measured", lambda b: b.source == "measured" and b.arch == arch, ""),
            ("family", lambda b: b.source == "measured" and family and b.family == family,
             f"no {arch} measurement: measured {family} architectures"),
            ("paper", lambda b: b.source != "measured" and b.arch == arch,
             "no measurement: the paper's plausible rows, optimistic (unsynchronized timer)"),
        )
        for level, pick, why in levels:
            f = self._fit_level((arch, group, level), [b for b in self.basis if pick(b)], group)
            if f is not None:
                return replace(f, note="; ".join(x for x in (why, f.note) if x)) if why else f
        return None

    def _fit_level(self, key: tuple[str, str, str], rows: list[BasisRow], group: str) -> Fit | None:
        if key not in self._fits:
            rows = [b for b in rows if not b.host_pass_s]  # their passes hold the host copies
            f = fit_rows(key[0], group, [b for b in rows if b.group == group])
            if f is None and group == "compiled":
                c = fit_rows(key[0], "compiled-mask", [b for b in rows if b.group == "compiled-mask"])
                why = "only rows measured with the dense causal mask (before the fix): slower than today"
                f = replace(c, group=group, note=why) if c else None
            # No "compiled-mask" fit without dense-mask rows: today's compiled fit would predict the fixed
            # engine, not the one that measured the row (validation then says it has no basis).
            if f is None and group == "uncompiled":
                # No uncompiled rows: GEMMs run as in the compiled fit, elementwise kernels as in naive.
                c = fit_rows(key[0], "compiled", [b for b in rows if b.group == "compiled"])
                nv = fit_rows(key[0], "naive", [b for b in rows if b.group == "naive"])
                if c and nv:
                    f = Fit(key[0], group, c.x_c, nv.x_m, c.rows + nv.rows,
                            "no uncompiled rows: compute fraction of the compiled fit, bandwidth of the naive fit")
                elif c or nv:
                    f = replace(c or nv, group=group, note=f"no uncompiled rows: the {(c or nv).group} fit")
            self._fits[key] = f
        return self._fits[key]

    def band(self, arch: str) -> Band | None:
        return self.bands.get(arch)

    # -- one prediction --

    def predict(self, model_id: str, gpu_id: str, num_gpus: int, methods: Methods,
                dense_causal_mask: bool = False) -> Prediction:
        """dense_causal_mask: predict the engine before its causal-attention fix (validation of rows it
        measured); predictions otherwise are for today's engine."""
        presets = self.presets
        model, gpu = presets.model(model_id), presets.gpu(gpu_id)
        p = Prediction(model.id, gpu.id, num_gpus, methods, feasible=False)
        if num_gpus < 1 or model.training.batch_size % num_gpus:
            raise PredictError(f"{num_gpus} GPUs do not divide {model.id}'s batch of {model.training.batch_size}")
        if not space.is_valid(methods, num_gpus):
            raise PredictError(f"{methods.label} is not in the search space on {num_gpus} GPU(s)")
        if model.training.precision == "bf16" and not gpu.bf16:
            p.reason = f"{model.id} trains in bf16, which the {gpu.name} does not support"
            return p
        s = shape(model)
        peak = compute_peak_flops(gpu, model, methods)
        if peak is None:
            p.reason = (f"{model.id} trains in fp32; without TF32 ({'naive' if not methods.free_lunch else 'no TF32 on this GPU'}) "
                        "it runs on CUDA cores, whose peak the GPU presets do not hold")
            return p
        group = group_of(model, methods, dense_causal_mask)
        arch = arch_of(model)
        f = self.fit(arch, group, s.family)
        if f is None and group == "compiled-mask":
            p.reason = ("no basis for the engine before its causal-attention fix: no other row (without "
                        "offloading) was measured with the dense mask; measure this one again with today's engine")
            return p
        if f is None:
            p.reason = (f"no basis: nothing measured for {arch} or other {s.family} models, and no plausible "
                        f"paper row for {arch}; measure one with `tui-planner bench`")
            return p
        # Memory: the largest micro-batch that fits.
        cal = memory.kappa_for(model, self.calibrations)
        mb = memory.max_micro_batch(model, gpu, methods, num_gpus, cal.kappa)
        cap_b = memory.capacity_bytes(gpu)
        p.memory_capacity_gb = cap_b / 1e9
        first = memory.need(model, methods, num_gpus, max(mb, 1), cal.kappa)
        p.memory_need_gb = first.total_bytes / 1e9
        p.terms["memory"] = {"static": dict(first.static), "activations_per_sample": dict(first.activations_per_sample),
                             "kappa": cal.kappa, "calibration": cal.describe()}
        if mb == 0:
            p.reason = (f"does not fit: needs {p.memory_need_gb:.1f} GB at micro-batch 1 (static "
                        f"{first.static_bytes / 1e9:.1f} GB + activations {first.activation_bytes / 1e9:.1f} GB) "
                        f"of {p.memory_capacity_gb:.1f} GB usable")
            p.lines = _memory_lines(first, p.memory_capacity_gb)
            return p
        accum = formulas.grad_accum_steps(model.training.batch_size, num_gpus, mb)
        # Time.
        compute_s = recompute(model, methods) * flops_per_sample(model) / peak
        traffic = traffic_terms(model, methods)
        bw = gpu.memory_bandwidth_gbs * 1e9
        memory_s = sum(traffic.values()) / bw
        same = self._own_rows(f, model.id, group)
        residual = self._residual(f, same)
        compute_part = residual * mb * f.x_c * compute_s
        memory_part = residual * mb * f.x_m * memory_s
        cb_pass, cb_update = comm_bytes(model, methods, num_gpus)
        hb_pass, hb_update = host_bytes(model, methods, num_gpus)
        kind = _offload_kind(methods)
        link, host = link_bytes_per_s(gpu, num_gpus), host_bytes_per_s(gpu)
        exposed = self.host_exposed.get(_host_kind(methods), 1.0) if hb_pass else 0.0
        latency = self.host_latency_s.get(_host_kind(methods), 0.0) * host_transfers(model, methods)
        comm_pass, host_pass = cb_pass / link, exposed * hb_pass / host + latency
        pass_s = compute_part + memory_part + comm_pass + host_pass
        opt_bytes = optimizer_bytes(model, methods, num_gpus)
        gpu_update = self.x_u * opt_bytes / bw
        cpu_update = self.offload_update_s[kind] * s.params / num_gpus if methods.offloading else 0.0
        update_s = gpu_update + cpu_update + cb_update / link
        step_s = formulas.step_time_s(pass_s, accum, update_s)
        flops_step = model.flops_per_step
        mfu = formulas.mfu(flops_step, step_s, num_gpus, gpu.peak_16bit_flops)
        capped = mfu > MAX_COMPUTE_FRACTION
        if capped:  # never faster than the cap allows
            step_s = flops_step / (num_gpus * gpu.peak_16bit_flops * MAX_COMPUTE_FRACTION)
            mfu = MAX_COMPUTE_FRACTION
        days = formulas.training_days(step_s, model.training.steps)
        p.feasible, p.micro_batch, p.grad_accum = True, mb, accum
        p.pass_s, p.update_s, p.step_s, p.days, p.mfu, p.capped = pass_s, update_s, step_s, days, mfu, capped
        p.memory_need_gb = memory.need(model, methods, num_gpus, mb, cal.kappa).total_bytes / 1e9
        band = self.band(arch)
        if band:
            p.days_low = max(days * band.low_factor, formulas.training_days(
                flops_step / (num_gpus * gpu.peak_16bit_flops * MAX_COMPUTE_FRACTION), model.training.steps))
            p.days_high = days * band.high_factor
        basis_rows = same or f.rows
        kind = ("measured" if all(b.source == "measured" for b in f.rows) else
                "paper (optimistic: unsynchronized timer)" if all(b.source != "measured" for b in f.rows) else
                "measured and paper")
        p.basis = (f"{group} fit of {len(f.rows)} {kind} rows ({', '.join(b.label() for b in f.rows[:6])}"
                   f"{', ...' if len(f.rows) > 6 else ''})"
                   + (f"; residual {residual:.2f} from {', '.join(b.label() for b in same)}" if same else ""))
        p.terms.update({
            "group": group, "x_c": f.x_c, "x_m": f.x_m, "fit_note": f.note, "residual": residual,
            "compute_s_per_sample": compute_s, "traffic_bytes_per_sample": traffic, "peak_flops": peak,
            "bandwidth_bytes_s": bw, "compute_part_s": compute_part, "memory_part_s": memory_part,
            "comm_pass_bytes": cb_pass, "comm_update_bytes": cb_update, "link_bytes_s": link,
            "host_pass_bytes": hb_pass, "host_update_bytes": hb_update, "host_bytes_s": host, "host_exposed": exposed,
            "host_transfers": host_transfers(model, methods), "host_latency_s": latency,
            "gpu_update_s": gpu_update, "cpu_update_s": cpu_update, "x_u": self.x_u, "capped": capped,
            "basis_trials": [b.trial_id for b in basis_rows], "band": band.what if band else None,
        })
        p.lines = self._explain(p, model, gpu, f, first, mb, accum, compute_s, memory_s, residual, same, band)
        return p

    def _explain(self, p: Prediction, model: Model, gpu: Gpu, f: Fit, first: memory.Need, mb: int, accum: int,
                 compute_s: float, memory_s: float, residual: float, same: Sequence[BasisRow],
                 band: Band | None) -> list[str]:
        t = p.terms
        need_mb = memory.need(model, p.methods, p.num_gpus, mb, first.kappa)
        lines = _memory_lines(need_mb, p.memory_capacity_gb)
        k = f" x {model.recompute_factor:.3g} (ckpt's recompute)" if p.methods.activation_checkpointing else ""
        lines += [
            f"fit: {GROUP_WORDS[f.group]}, {len(f.rows)} rows: {f.compute_fraction:.0%} of peak, "
            f"{f.bandwidth_fraction:.0%} of bandwidth" + (f" ({f.note})" if f.note else ""),
            f"compute: {mb} x {flops_per_sample(model):.3g} FLOP{k} / ({t['peak_flops'] / 1e12:.0f} TFLOP/s x "
            f"{f.compute_fraction:.0%}) = {t['compute_part_s'] / residual:.3f} s",
            f"memory-bound: {mb} x {sum(t['traffic_bytes_per_sample'].values()) / 1e9:.2f} GB / "
            f"({gpu.memory_bandwidth_gbs:.0f} GB/s x {f.bandwidth_fraction:.0%}) = {t['memory_part_s'] / residual:.3f} s",
        ]
        if same:
            lines.append(f"x {residual:.2f}: this model's own rows vs the fit ({', '.join(b.label() for b in same)})")
        if t["comm_pass_bytes"]:
            lines.append(f"communication: {t['comm_pass_bytes'] / 1e9:.2f} GB / {t['link_bytes_s'] / 1e9:.0f} GB/s "
                         f"= {t['comm_pass_bytes'] / t['link_bytes_s']:.3f} s per pass (no overlap credit)")
        if t["comm_update_bytes"]:
            lines.append(f"communication: {t['comm_update_bytes'] / 1e9:.2f} GB / {t['link_bytes_s'] / 1e9:.0f} GB/s "
                         f"= {t['comm_update_bytes'] / t['link_bytes_s']:.3f} s per step, in the update")
        if t["host_pass_bytes"]:
            per_transfer = (f" + {t['host_transfers']} layer transfers x "
                            f"{t['host_latency_s'] / t['host_transfers'] * 1e3:.1f} ms" if t["host_transfers"] else "")
            lines.append(f"offload copies: {t['host_exposed']:.2f} x {t['host_pass_bytes'] / 1e9:.2f} GB / "
                         f"{t['host_bytes_s'] / 1e9:.1f} GB/s{per_transfer} = "
                         f"{t['host_exposed'] * t['host_pass_bytes'] / t['host_bytes_s'] + t['host_latency_s']:.3f} "
                         f"s per pass ({self.host_note.get(_host_kind(p.methods), '')})")
        lines.append(f"pass {p.pass_s:.3f} s; update {p.update_s:.3f} s ("
                     + (self.cpu_note[_offload_kind(p.methods)] if p.methods.offloading else self.x_u_note) + ")")
        lines.append(f"step = {p.pass_s:.3f} x {accum} + {p.update_s:.3f} = {p.step_s:.1f} s; "
                     f"x {model.training.steps:,} steps = {p.days:.1f} days")
        lines.append(f"MFU {p.mfu:.0%} of the {gpu.peak_16bit_tflops:.0f} TFLOP/s dense 16-bit peak"
                     + (f", capped at {MAX_COMPUTE_FRACTION:.0%}" if p.capped else ""))
        if band and p.days_low is not None:
            lines.append(f"band {p.days_low:.1f}-{p.days_high:.1f} days: {band.what}")
        return lines

    # -- a whole cell --

    def predict_cell(self, model_id: str, gpu_id: str, num_gpus: int, method_set: str = "all") -> list[Prediction]:
        """Every combination of the search space on this cell, fastest feasible first."""
        out = [self.predict(model_id, gpu_id, num_gpus, m) for m in space.search_space(method_set, num_gpus)]
        return sorted(out, key=lambda p: (not p.feasible, p.days if p.days is not None else math.inf))


def _memory_lines(need: memory.Need, capacity_gb: float | None) -> list[str]:
    static = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in need.static.items() if v)
    act = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in need.activations_per_sample.items() if v)
    return [
        f"memory at micro-batch {need.micro_batch}: {need.total_bytes / 1e9:.1f} of {capacity_gb:.1f} GB usable",
        f"static {need.static_bytes / 1e9:.1f} GB: {static}",
        f"activations {need.kappa:.2f} x {need.micro_batch} x {sum(need.activations_per_sample.values()) / 1e9:.2f} "
        f"GB/sample: {act}",
    ]


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

    def best_of_cell_errors(self) -> list[float]:
        out = []
        by_cell: dict[tuple, list[Check]] = {}
        for c in self.checks:
            by_cell.setdefault((c.model, c.gpu, c.num_gpus), []).append(c)
        for checks in by_cell.values():
            pred = [c.predicted_days for c in checks if c.predicted_days is not None]
            if pred:
                out.append(min(pred) / min(c.actual_days for c in checks) - 1)
        return out


def leave_one_out(rows: Sequence[Mapping[str, Any]], presets: Presets, source: str = "measured",
                  archs: Iterable[str] | None = None) -> Validation:
    """Hold out each cell (model x GPU x count) with `source` rows, predict each of its configurations
    from every other row (fits and memory calibration redone without it; every measurement of the cell, on
    any day, is held out with it), compare with what it holds. A configuration measured more than once
    counts once, against the median of its measurements."""
    rows = [dict(r) for r in rows]
    wanted = set(archs) if archs is not None else None
    targets = []
    for r in rows:
        b = basis_row(r, presets)
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
        predictor = Predictor(others, presets)  # as in use: paper rows only for an unmeasured architecture
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


def bands_for(rows: Sequence[Mapping[str, Any]], presets: Presets) -> dict[str, Band]:
    """The error band per architecture: from measured leave-one-out where it is measured, else from
    leave-one-out over its plausible paper rows."""
    rows = [dict(r) for r in rows]
    basis = [b for b in (basis_row(r, presets) for r in rows) if b is not None]
    measured = {b.arch for b in basis if b.source == "measured"}
    out = {}
    for arch in sorted({b.arch for b in basis}):
        source = "measured" if arch in measured else "paper"
        v = leave_one_out(rows, presets, source, archs=[arch])
        where = sorted({c.gpu for c in v.checks})
        what = f"{source} leave-one-out, {len(v.errors)} configurations in {v.cells} cells on {', '.join(where)}"
        if source == "measured" and len(where) == 1:
            what += " (other GPUs: scaled by peak and bandwidth, not validated by measurement)"
        out[arch] = Band.from_errors(v.errors, what)
    return out


def build_predictor(rows: Sequence[Mapping[str, Any]], presets: Presets, use_paper: bool = True) -> Predictor:
    """A predictor over these rows with its error bands."""
    return Predictor(rows, presets, use_paper=use_paper, bands=bands_for(rows, presets))


# --- storing ------------------------------------------------------------------------------------------


PREDICTED_NS = uuid.UUID("2b7c0d4e-8a51-4f6e-b1f3-5d0c9e7a3c11")


def trial_of(p: Prediction, run_id: str, model: Model, gpu: Gpu, created_at: dt.datetime | None = None):
    """A prediction as a store row: source 'predicted', its basis, its band and how it was derived."""
    from engine.data.store import Trial

    key = f"{p.model}|{p.gpu}|{p.num_gpus}|1|{p.methods.label}|predicted"
    t = Trial(
        model=p.model, gpu=p.gpu, num_gpus=p.num_gpus, feasible=p.feasible, source="predicted", run_id=run_id,
        trial_id=uuid.uuid5(PREDICTED_NS, f"{run_id}|{key}").hex, key=key,
        free_lunch=p.methods.free_lunch, activation_checkpointing=p.methods.activation_checkpointing,
        sharding=p.methods.sharding, offloading=p.methods.offloading,
        compile=space.uses_compile(p.methods, model.compile),
        micro_batch=p.micro_batch, grad_accum=p.grad_accum, pass_s=p.pass_s, update_s=p.update_s,
        step_s=p.step_s, days=p.days, mfu=p.mfu, plausibility=formulas.plausibility(p.mfu),
        analytic_days=formulas.analytic_days(model.training_flops, p.num_gpus, gpu.peak_16bit_flops),
        basis=p.basis or None, days_low=p.days_low, days_high=p.days_high, memory_need_gb=p.memory_need_gb,
        provenance=json.dumps({"predicted": p.terms, "explanation": p.lines}, default=str),
    )
    if created_at is not None:
        t.created_at = created_at
    if p.feasible and p.step_s:
        t.samples_per_s = model.training.batch_size / p.step_s
        if model.seq_len:
            t.tokens_per_s = t.samples_per_s * model.seq_len
    else:
        t.failure_kind = "memory" if "does not fit" in p.reason else "unsupported"
        t.failure_message = f"predicted: {p.reason}"
    return t


def measured_cells(rows: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, int]]:
    return {(r["model"], r["gpu"], int(r["num_gpus"]) * int(r.get("num_nodes") or 1))
            for r in rows if r.get("source") == "measured"}


def write_predictions(store, preds: Sequence[Prediction], presets: Presets, command: str,
                      run_id: str | None = None, created_at: dt.datetime | None = None) -> int:
    """Store predictions as rows of a 'predicted' run; a prediction of the same cell and setting made
    earlier is replaced (the newest basis wins)."""
    from engine.data.store import Run

    if not preds:
        return 0
    when = created_at or dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    run = Run(source="predicted", run_id=run_id or uuid.uuid4().hex, command=command, started_at=when,
              ended_at=when, status="done",
              note="engine/predict.py: roofline fitted to measured rows, memory model for the micro-batch")
    trials = [trial_of(p, run.run_id, presets.model(p.model), presets.gpu(p.gpu), when) for p in preds]
    keys = [t.key for t in trials]
    store.con.execute("DELETE FROM trials WHERE source = 'predicted' AND key IN (SELECT unnest(?))", [keys])
    store.add_run(run)
    store.add_trials(trials)
    return len(trials)


def predict_missing(predictor: Predictor, presets: Presets, models: Iterable[str] | None = None,
                    counts: Sequence[int] = (1, 2, 4, 8), best_only: bool = False) -> list[Prediction]:
    """Every combination on every GPU preset x count that holds no measured row, for each model with a
    basis; models without one are left out (no prediction without a basis). best_only keeps one row per
    cell: the fastest feasible combination, or, when none fits, the one closest to fitting (it says why)."""
    measured = measured_cells(predictor.stored)
    out: list[Prediction] = []
    for model_id in models or presets.models:
        model = presets.model(model_id)
        try:
            arch = arch_of(model)
            shape(model)
        except MemoryModelError:
            continue
        if not any(b.arch == arch or (b.source == "measured" and b.family == shape(model).family)
                   for b in predictor.basis):
            continue
        for gpu in presets.gpus:
            for n in counts:
                if model.training.batch_size % n or (model.id, gpu, n) in measured:
                    continue
                cell = predictor.predict_cell(model.id, gpu, n)
                if best_only:
                    fits = [p for p in cell if p.feasible]
                    cell = fits[:1] or sorted(cell, key=lambda p: p.memory_need_gb or math.inf)[:1]
                out.extend(cell)
    return out


def _summary(v: Validation) -> dict[str, Any]:
    best = v.best_of_cell_errors()
    mb = [c for c in v.checks if c.predicted_micro_batch is not None and c.actual_micro_batch]
    return {
        "what": v.what, "cells": v.cells, "errors": v.errors, "median_abs": v.median_abs, "worst_abs": v.worst_abs,
        "best_errors": best,
        "best_median_abs": statistics.median(abs(e) for e in best) if best else None,
        "best_worst_abs": max(abs(e) for e in best) if best else None,
        "missed": [f"{c.model} {c.num_gpus}x{c.gpu} {c.label}: {c.reason}" for c in v.missed],
        "micro_batch_checked": len(mb),
        "micro_batch_agree": sum(1 for c in mb if c.predicted_micro_batch == c.actual_micro_batch),
        "checks": [{"model": c.model, "gpu": c.gpu, "num_gpus": c.num_gpus, "label": c.label, "source": c.source,
                    "measurements": c.measurements,
                    "actual_days": c.actual_days, "predicted_days": c.predicted_days, "error": c.error,
                    "actual_micro_batch": c.actual_micro_batch, "predicted_micro_batch": c.predicted_micro_batch,
                    "reason": c.reason} for c in v.checks],
    }


def validation_report(rows: Sequence[Mapping[str, Any]], presets: Presets) -> dict[str, Any]:
    """What `predict --validate` prints: measured leave-one-out (the target), the memory calibration,
    and the checks against the paper's plausible rows (cross-GPU; the paper's own timing is optimistic)."""
    rows = [dict(r) for r in rows]
    report: dict[str, Any] = {"measured": _summary(leave_one_out(rows, presets, "measured"))}
    lines = [c.describe() for c in memory.calibrate(rows, presets).values()]
    predictor = Predictor(rows, presets)
    ratios = []
    for r in rows:
        if r.get("source") == "measured" and r.get("peak_memory_gb") and r.get("micro_batch") and r.get("days"):
            try:
                model = presets.model(r["model"])
                cal = memory.kappa_for(model, predictor.calibrations)
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
    report["skip"] = memory.replay_skips(rows, presets)
    report["skip_today"] = memory.replay_skips(rows, presets, as_ran=False)
    return report
