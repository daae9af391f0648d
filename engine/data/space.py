"""The paper's search space (Appendix F): which combinations of methods a sweep tries.

Free-lunch methods (torch.compile, fused attention / SSM kernels, TF32 where the GPU has it) are always
on in the search; the memory-saving methods combine: activation checkpointing x sharding (none, ZeRO
1/2/3 via DeepSpeed, FSDP 2/3 via PyTorch) x CPU offloading. The rules, from the paper's `is_valid`:
- offloading needs sharding;
- on one GPU, sharding without offloading is dropped (it shards over one rank: a no-op);
- no torch.compile with ZeRO (DeepSpeed's engine does not compose with it), nor for a model whose
  preset says it cannot compile (Mamba's fused kernels).
That gives 12 combinations on one GPU and 22 on more.

Beyond the paper (issue 42), two opt-in methods combine with every point: `fused` (liger-kernel's Triton
kernels: fused linear + cross-entropy that never materialises the logits, norms, SwiGLU/GeGLU, RoPE; the
maths unchanged within bf16 rounding) and `fp8` (torchao's float8 training on the linear layers: changes
numerics). Both need free-lunch on; fp8 needs torch.compile to be fast (torchao's casts are fused by it), so
it is not combined with ZeRO, which DeepSpeed's engine runs uncompiled. No torch here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

SHARDING = ("none", "zero1", "zero2", "zero3", "fsdp2", "fsdp3")
METHOD_SETS = ("naive", "free-lunch", "all")
EXTRAS = ("fused", "fp8")  # beyond the paper's space, opt-in (issue 42)
# What each extra changes, in words for every place that shows one.
EXTRA_NOTES = {
    "fused": "liger-kernel's fused kernels (same maths within bf16 rounding)",
    "fp8": "FP8 matrix products (torchao float8; changes numerics)",
}
# torch.compile's modes: max-autotune tries Triton matmul templates (longer compile), reduce-overhead
# and max-autotune add CUDA graphs. A sweep's default is None (torch's own, which it calls "default").
COMPILE_MODES = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Methods:
    """One point of the search space."""

    free_lunch: bool = True
    activation_checkpointing: bool = False
    sharding: str = "none"
    offloading: bool = False
    fused: bool = False  # liger-kernel (issue 42)
    fp8: bool = False  # torchao float8 training (issue 42)

    def __post_init__(self) -> None:
        if self.sharding not in SHARDING:
            raise ValueError(f"sharding {self.sharding!r} is not one of {', '.join(SHARDING)}")

    @property
    def extras(self) -> tuple[str, ...]:
        """The methods beyond the paper's this point uses ('fused', 'fp8'), in EXTRAS order."""
        return tuple(e for e in EXTRAS if getattr(self, e))

    @property
    def changes_numerics(self) -> bool:
        return self.fp8

    @property
    def deepspeed(self) -> bool:
        return self.sharding.startswith("zero")

    @property
    def fsdp(self) -> bool:
        return self.sharding.startswith("fsdp")

    @property
    def fp8_gathered_in_float8(self) -> bool:
        """Whether FSDP gathers this point's fp8 weights in float8 (torchao's FSDP2 extension, engine/bench/fast.py):
        fp8 under FSDP with the parameters on the GPU. With CPU offload the shards live on the host: 16-bit."""
        return self.fp8 and self.fsdp and not self.offloading

    @property
    def stage(self) -> int:
        return int(self.sharding[-1]) if self.sharding != "none" else 0

    @property
    def label(self) -> str:
        """Short and stable: 'naive', 'free-lunch', 'ckpt+zero3+offload', 'fused+fp8+fsdp3', ..."""
        if not self.free_lunch:
            base = ["naive"]
        else:
            base = list(self.extras)
        if self.activation_checkpointing:
            base.append("ckpt")
        if self.sharding != "none":
            base.append(self.sharding)
        if self.offloading:
            base.append("offload")
        if self.free_lunch and not base:
            return "free-lunch"
        return "+".join(base)


NAIVE = Methods(free_lunch=False)
FREE_LUNCH = Methods()


def is_valid(m: Methods, num_gpus: int) -> bool:
    if m.offloading and m.sharding == "none":
        return False
    if num_gpus == 1 and m.sharding != "none" and not m.offloading:
        return False
    if not m.free_lunch and (m.activation_checkpointing or m.sharding != "none" or m.extras):
        return False  # naive is the plain baseline only
    if m.fp8 and m.deepspeed:
        return False  # torchao's float8 is fast only compiled; DeepSpeed's engine runs uncompiled
    return True


def with_extras(points: list[Methods], extras: tuple[str, ...] | list[str] = ()) -> list[Methods]:
    """Each free-lunch point, then its variants with every non-empty subset of `extras` that is valid
    (fused, fp8, fused+fp8), in that order: the paper's points keep their places."""
    unknown = [e for e in extras if e not in EXTRAS]
    if unknown:
        raise ValueError(f"{', '.join(map(repr, unknown))} is not one of the extra methods ({', '.join(EXTRAS)})")
    wanted = [e for e in EXTRAS if e in extras]
    subsets = [s for s in ((e,) for e in wanted)] + ([tuple(wanted)] if len(wanted) == 2 else [])
    out: list[Methods] = []
    for m in points:
        out.append(m)
        if not m.free_lunch:
            continue
        for subset in subsets:
            v = dataclasses.replace(m, **{e: True for e in subset})
            if is_valid(v, 2):  # the point itself was valid on this count; only the extras' own rules remain
                out.append(v)
    return out


def combinations(num_gpus: int, extras: tuple[str, ...] | list[str] = ()) -> list[Methods]:
    """Every valid memory-saving combination with free-lunch on: 12 on one GPU, 22 on more (and their
    variants with `extras`)."""
    out = []
    for ckpt in (False, True):
        for sharding in SHARDING:
            for offload in (False, True):
                m = Methods(True, ckpt, sharding, offload)
                if is_valid(m, num_gpus):
                    out.append(m)
    return with_extras(out, extras)


def by_label(label: str) -> Methods | None:
    """The point of the search space a label names ('ckpt+zero3+offload', 'fused+fp8'), or None: the inverse
    of .label."""
    # 2+ GPUs: every point
    return next((m for m in [NAIVE] + combinations(2, EXTRAS) if m.label == label), None)


FLOAT8_GATHER = "float8"  # an fp8 record's all_gather when FSDP gathered its weights in float8 (engine/bench/fast.py)


def gathered_in_float8(fp8_record: Any) -> bool:
    """Whether a row's fp8 record (its provenance's 'fp8'; a shared file may hold anything there) says FSDP gathered
    the weights in float8."""
    return isinstance(fp8_record, dict) and fp8_record.get("all_gather") == FLOAT8_GATHER


# FSDP's CPU offload, once a step's earlier micro-batches left a gradient on the host, copies each newly reduced
# gradient to the host synchronously into pageable memory and adds it there: about 2 GB a pass a GPU for Pythia-1B on
# 2 GPUs. With glibc told to keep freed blocks on its heap (these three together; the probe did not separate them),
# such a pass took 1.34 s instead of 2.27 s (a pass holding nothing: 0.77 s; Pythia-1B, micro-batch 32, 2 x H200, 16 CPU
# threads a rank: data/probes/fsdp2-offload-h200x2-2026-11-28.jsonl), near the ~1.2 s a Hugging Face Trainer run's
# held pass took without them. FSDP offload trials start with them where unset (engine.bench.launcher) and record
# them; the export does not set them (the Trainer was fast without; with them it is not yet measured).
HOST_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "68719476736",
                   "MALLOC_TOP_PAD_": "1073741824"}


def fsdp_gathers_in_float8(sharding: Any, offloading: Any, fp8_record: Any) -> bool:
    """A row's FSDP gathered its weights in float8 by its record, on a setting where the engine does
    (Methods.fp8_gathered_in_float8: FSDP, parameters on the GPU); a record claiming it elsewhere is not believed."""
    return str(sharding or "").startswith("fsdp") and not offloading and gathered_in_float8(fp8_record)


# A trial timed at a micro-batch capped below the one that fits (`bench --max-micro-batch N`): its key ends in
# CAPPED + N, a prediction made so too (engine/predict/stored.py). Such a row says what a pass costs beside its work
# (engine/predict/floors.py), not the per-sample rate or the memory fit the rest of the predictor reads.
CAPPED = "|max-mb-"


def capped(row: Any) -> bool:
    """Whether a stored row was timed (or predicted) under a micro-batch cap."""
    return CAPPED in str(row.get("key") or "")


def cap_of(row: Any) -> int | None:
    """The micro-batch cap a stored row was timed (or predicted) under: N of its key's `|max-mb-N`, else None."""
    key = str(row.get("key") or "")
    if CAPPED not in key:
        return None
    digits = key.rsplit(CAPPED, 1)[1].split("|", 1)[0]
    return int(digits) if digits.isdigit() and int(digits) > 0 else None


def search_space(method_set: str, num_gpus: int, extras: tuple[str, ...] | list[str] = ()) -> list[Methods]:
    """naive: the baseline alone; free-lunch: naive + free-lunch; all: naive + every combination. `extras`
    (issue 42: 'fused', 'fp8') adds each free-lunch point's variants with them."""
    if method_set not in METHOD_SETS:
        raise ValueError(f"methods {method_set!r} is not one of {', '.join(METHOD_SETS)}")
    if method_set == "naive":
        return [NAIVE]
    if method_set == "free-lunch":
        return [NAIVE] + with_extras([FREE_LUNCH], extras)
    return [NAIVE] + combinations(num_gpus, extras)


def is_subset(a: Methods, b: Methods) -> bool:
    """True when b is a with only overhead added: checkpointing (recomputation) and/or offloading (PCIe
    copies, a CPU optimizer step), on the same stack. A different sharding is a different stack, not
    added overhead: on 2 x H200, ZeRO-1 (DeepSpeed's bf16 model) trained Pythia-1B 12% faster per pass
    than DDP with compile and autocast at the same micro-batch, so free-lunch does not bound it."""
    return (a.free_lunch == b.free_lunch
            and a.sharding == b.sharding
            and a.extras == b.extras
            and (not a.activation_checkpointing or b.activation_checkpointing)
            and (not a.offloading or b.offloading))


def uses_compile(m: Methods, model_can_compile: bool) -> bool:
    return m.free_lunch and model_can_compile and not m.deepspeed
