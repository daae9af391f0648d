"""Memory model: the bytes one GPU holds during a training step, per method, and the largest
micro-batch that fits.

    need(mb) = static (weights, gradients, optimizer states, working copies: bytes per parameter,
               by method and GPU count) + kappa x mb x activations per sample (by architecture)
    fits when need(mb) <= capacity = memory_gb GiB x 0.97

Every term is written out below with where it comes from; `kappa` is one number per architecture,
calibrated against what the measured sweeps found: each measured row says "micro-batch b fitted and
2b did not" (the engine searches powers of two until out-of-memory), which brackets kappa; the
calibration takes the middle of the range every row allows. The engine's search runs without
torch.compile, so the activation formulas count eager-mode tensors.

The predictor (engine/predict/) uses it to re-derive the micro-batch on a GPU nobody measured; the
sweep (engine/bench/sweep.py) uses it to skip combinations that cannot fit. No torch here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from engine.data.errors import PlannerError
from engine.data.presets import Gpu, Model
from engine.data.space import Methods

GIB = 2.0**30
# The CUDA context, cuBLAS/NCCL workspaces and allocator fragmentation take memory that PyTorch's
# allocator never reports; 3% of the card is kept back for them (an assumption, absorbed by kappa).
USABLE_FRACTION = 0.97
# DeepSpeed's default reduce_bucket_size / allgather_bucket_size (5e8 elements of 16-bit values).
DEEPSPEED_BUCKET_ELEMENTS = 5e8


class MemoryModelError(PlannerError):
    """The memory model does not know this architecture (add it to engine/predict/memory.py)."""


@dataclass(frozen=True)
class Shape:
    """What the memory and time models need from a model preset's architecture."""

    family: str  # transformer | mamba | convnext
    params: float
    layers: int
    hidden: int
    heads: int = 0  # attention heads (0: no attention)
    tokens: int = 0  # positions each layer sees per sample (sequence; ViT: patches + 1)
    logit_positions: int = 1  # positions with an output distribution (LM: every token; classifier: 1)
    logit_width: int = 0  # vocabulary or classes
    inner: int = 0  # MLP width (transformer) or expanded width (Mamba)
    state: int = 0  # SSM state size (Mamba)
    attention_dropout: bool = False
    stages: tuple[tuple[int, int, int], ...] = ()  # ConvNeXt: (resolution, channels, depth) per stage
    embedding_params: float = 0.0  # input-embedding lookups: parameters without matmul FLOPs
    kv_heads: int = 0  # grouped-query attention: key/value heads (0: as many as query heads)
    head_dim: int = 0  # 0: hidden / heads
    gated: bool = False  # SwiGLU / GeGLU MLP: three matrices and two wide tensors
    # A model built on the meta device (engine/data/built.py): attention's s x s FLOPs per sample as counted
    # (None: by formula), and a mixture of experts' experts (memory holds all `params`; compute the active).
    attention_flops: float | None = None
    experts: int = 0
    experts_per_token: int = 0
    moe_layers: int = 0
    active_params: float = 0.0

    def layer_bytes_per_token(self) -> float:
        """16-bit activation bytes one transformer layer keeps per token (Korthikanti et al. 2022, Sec. 4.1,
        term by term, for any attention and MLP shape): QKV input 2h, Q 2Hd, K and V 4Kd, attention output
        2Hd, its dropout mask h, two norm inputs 4h, MLP input 2h, MLP tensors 4f (6f gated: gate, up and
        their product), its dropout mask h. Multi-head attention with f = 4h gives their 34h."""
        h = self.hidden
        d = self.head_dim or (h // self.heads if self.heads else 0)
        q = self.heads * d
        kv = (self.kv_heads or self.heads) * d
        return 2 * h + 2 * q + 4 * kv + 2 * q + h + 4 * h + 2 * h + (6 if self.gated else 4) * self.inner + h


class ConfigValueError(MemoryModelError):
    """A config value no real model has (a million layers, a negative width, text where a number goes)."""


def _cfg(model: Model, key: str, default: Any = None) -> Any:
    value = model.config.get(key, default)
    if value is None:
        raise MemoryModelError(f"{model.id}: the preset's config has no {key!r}, which the memory model needs")
    return value


# What real models span, with room: a config outside these is a mistake, and is said to be before anything
# is sized, launched or allocated from it.
INT_LIMITS = {"num_hidden_layers": 10_000, "hidden_size": 1_000_000, "intermediate_size": 10_000_000,
              "num_attention_heads": 100_000, "vocab_size": 10_000_000, "max_position_embeddings": 10_000_000,
              "type_vocab_size": 100_000, "patch_size": 10_000, "image_size": 100_000, "num_channels": 1_000,
              "num_labels": 10_000_000, "state_size": 100_000, "expand": 1_000, "conv_kernel": 1_000,
              "time_step_rank": 1_000_000, "hidden_sizes": 1_000_000, "depths": 10_000}


def _int(model: Model, key: str, default: Any = None, value: Any = None) -> int:
    """A whole-number config field, checked: a number (not a flag or text), whole, from 1 to its limit."""
    value = _cfg(model, key, default) if value is None else value
    hi = INT_LIMITS.get(key, 10**9)
    ok = isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()
    if not ok or not 1 <= value <= hi:
        raise ConfigValueError(f"{model.id}: config {key} = {str(value)[:80]!r} is not a whole number from 1 to {hi:,}")
    return int(value)


def _list(model: Model, key: str) -> list:
    value = _cfg(model, key)
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 100:
        raise ConfigValueError(f"{model.id}: config {key} = {str(value)[:80]!r} is not a list of 1 to 100 numbers")
    return list(value)


def _fraction(model: Model, key: str, default: float) -> float:
    value = model.config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigValueError(f"{model.id}: config {key} = {str(value)[:80]!r} is not a number from 0 to 1")
    return float(value)


_SHAPES: dict[int, tuple[Model, Shape]] = {}


def shape(model: Model) -> Shape:
    """Parameter count and activation-relevant sizes, from the Hugging Face config values (cached per
    preset object: presets are frozen).

    Parameter counts follow the transformers classes the engine builds (checked against the
    published counts: Pythia-160M 162,322,944; Pythia-1B 1,011,781,632; Mamba-2.8B ~2.77e9;
    ConvNeXt-Large-22k ~229.8M).
    """
    hit = _SHAPES.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    s = _shape(model)
    _SHAPES[id(model)] = (model, s)
    return s


def _shape(model: Model) -> Shape:
    cls = model.config_class
    described = _described(model)
    if described is not None:
        return described
    if cls == "MambaConfig":
        h, layers = _int(model, "hidden_size"), _int(model, "num_hidden_layers")
        vocab, n = _int(model, "vocab_size"), _int(model, "state_size", 16)
        e = _int(model, "expand", 2) * h
        k = _int(model, "conv_kernel", 4)
        rank = model.config.get("time_step_rank", "auto")
        r = math.ceil(h / 16) if rank in (None, "auto") else _int(model, "time_step_rank", value=rank)
        # norm h; in_proj h.2e; conv1d e.k + e; x_proj e.(r + 2n); dt_proj r.e + e; A_log e.n; D e; out_proj e.h
        per_layer = h + 2 * e * h + e * k + e + e * (r + 2 * n) + r * e + e + e * n + e + e * h
        tied = bool(model.config.get("tie_word_embeddings", True))
        params = (1 if tied else 2) * vocab * h + layers * per_layer + h
        return Shape("mamba", params, layers, h, 0, model.seq_len, model.seq_len, vocab, e, n,
                     embedding_params=vocab * h)
    if cls == "ConvNextConfig":
        widths = [_int(model, "hidden_sizes", value=c) for c in _list(model, "hidden_sizes")]
        depths = [_int(model, "depths", value=d) for d in _list(model, "depths")]
        if len(widths) != len(depths):
            raise ConfigValueError(f"{model.id}: config hidden_sizes and depths name {len(widths)} and "
                                   f"{len(depths)} stages")
        patch = _int(model, "patch_size", 4)
        image = _int(model, "image_size", model.image_size)
        channels = _int(model, "num_channels", 3)
        classes = model.num_classes or _int(model, "num_labels")
        params = channels * patch * patch * widths[0] + widths[0] + 2 * widths[0]  # stem conv + LayerNorm
        stages, res = [], image // patch
        for i, (c, d) in enumerate(zip(widths, depths)):
            if i:
                params += 2 * widths[i - 1] + 4 * widths[i - 1] * c + c  # LayerNorm + 2x2 stride-2 conv
                res //= 2
            # block: 7x7 depthwise (49c + c), LayerNorm 2c, c->4c (4c^2 + 4c), 4c->c (4c^2 + c), scale c
            params += d * (8 * c * c + 58 * c)
            stages.append((res, c, d))
        params += 2 * widths[-1] + widths[-1] * classes + classes
        return Shape("convnext", params, sum(depths), widths[-1], 0, 0, 1, classes, stages=tuple(stages))
    from engine.data.architecture import FAMILIES

    raise MemoryModelError(
        f"{model.id}: the memory model does not know {cls} (it knows {', '.join(FAMILIES)}); "
        "`tui-planner bench` can still measure it")


def _described(model: Model) -> Shape | None:
    """A transformer described from its config (engine/data/architecture.py): every family it knows."""
    from engine.data.architecture import ArchitectureError, describe, model_type_of

    mt = model_type_of(model.config_class, model.config)
    if mt is None:
        return None
    try:
        a = describe({**model.config, "model_type": mt}, f"{model.id}'s config")
    except ArchitectureError as e:
        raise ConfigValueError(str(e)) from None
    if a.kind == "vit":
        classes = model.num_classes or a.vocab
        patches = (a.image_size // a.patch_size) ** 2
        params = a.params + (classes - a.vocab) * (a.hidden + 1)  # the preset's classes, not the config's
        dropout = _fraction(model, "attention_probs_dropout_prob", 0.0) > 0
        return Shape("transformer", params, a.layers, a.hidden, a.heads, patches + 1, 1, classes, a.ffn,
                     attention_dropout=dropout, kv_heads=a.kv_heads, head_dim=a.head_dim)
    seq = model.seq_len or a.max_positions or 2048
    if a.built:
        # An encoder-decoder's layers: the encoder's on the input, the decoder's on the target, with its logits,
        # counted here as every layer on the input. Checked (scripts/saved_activations.py, the bytes autograd
        # saves for a tiny T5 and a tiny Llama on the CPU): at the planner's target of s/4 this keeps 1.46 x
        # the count, as Llama keeps 1.45 x, so one kappa serves both; T5's layers keep ~2 x the per-layer count
        # (fp32 norms, dropout masks), so charging the decoder on the target alone would fall ~27% short.
        target = model.target_len or 0
        return Shape("transformer", a.params, a.layers, a.hidden, a.heads, seq, target or seq, a.vocab, a.ffn,
                     embedding_params=a.embedding_params, kv_heads=a.kv_heads, head_dim=a.head_dim, gated=a.gated,
                     attention_flops=a.attention_flops_per_sample(seq, target), experts=a.experts,
                     experts_per_token=a.experts_per_token, moe_layers=a.moe_layers, active_params=a.active)
    dropout = a.kind == "encoder" and _fraction(model, "attention_probs_dropout_prob", 0.1) > 0
    return Shape("transformer", a.params, a.layers, a.hidden, a.heads, seq, seq, a.vocab, a.ffn,
                 attention_dropout=dropout, embedding_params=a.embedding_params, kv_heads=a.kv_heads,
                 head_dim=a.head_dim, gated=a.gated)


def mixed_precision(model: Model) -> bool:
    return model.training.precision in ("fp16", "bf16")


def fused_attention(model: Model, methods: Methods) -> bool:
    """Free-lunch asks for SDPA / flash kernels (no s x s score matrix kept); naive runs eager attention."""
    return methods.free_lunch and model.attention == "sdpa"


# --- static memory: bytes that do not grow with the micro-batch ---------------------------------------


def static_terms(model: Model, methods: Methods, num_gpus: int) -> dict[str, float]:
    """Bytes per GPU for weights, gradients, optimizer states and working copies.

    Adam keeps two fp32 moments (8 bytes/param). Plain PyTorch with AMP keeps fp32 weights (4) and fp32
    gradients (4), and autocast keeps a 16-bit copy of each weight for the backward (2): 18 bytes/param,
    16 in fp32. DDP (more than one GPU) adds its fp32 gradient buckets (4).
    DeepSpeed ZeRO (Rajbhandari et al. 2020, Sec. 5.1): 16-bit weights (2) and gradients (2), K = 12
    bytes of fp32 master weights and moments (in fp32 training: 4, 4 and K = 8); stage 1 shards the K
    bytes over N GPUs, stage 2 also the gradients, stage 3 also the weights; offload moves the K bytes
    (and at stage 3 the weights) to the CPU. Plus its reduce bucket (5e8 16-bit elements).
    FSDP (fully_shard): fp32 weights, gradients and moments sharded over N (16/N), plus the gathered
    16-bit weights: all of them from forward to backward at stage 2 (reshard_after_forward=False), two
    layers at a time at stage 3; offload keeps the sharded fp32 state on the CPU.
    """
    psi = shape(model).params
    layers = max(shape(model).layers, 1)
    n = max(num_gpus, 1)
    mixed = mixed_precision(model)
    half = 2.0 if mixed else 4.0  # bytes of a working (compute-precision) copy
    if methods.sharding == "none":
        terms = {"weights fp32": 4 * psi, "gradients fp32": 4 * psi, "Adam moments fp32": 8 * psi}
        if mixed:
            terms["autocast 16-bit weight copies"] = 2 * psi
        if n > 1:
            terms["DDP gradient buckets"] = 4 * psi
        return terms
    if methods.deepspeed:
        stage = methods.stage
        weights, grads, k = (2.0, 2.0, 12.0) if mixed else (4.0, 4.0, 8.0)
        terms = {
            "weights": weights * psi / (n if stage >= 3 else 1),
            "gradients": grads * psi / (n if stage >= 2 else 1),
            "optimizer (master + moments)": k * psi / n,
        }
        if methods.offloading:
            terms["optimizer (master + moments)"] = 0.0  # on the CPU
            if stage == 3:
                terms["weights"] = 0.0
        if stage == 3:
            terms["gathered layers (2 x one layer)"] = 2 * weights * psi / layers
        terms["DeepSpeed reduce bucket"] = min(DEEPSPEED_BUCKET_ELEMENTS, psi) * 2
        return terms
    # FSDP
    sharded = 0.0 if methods.offloading else 16 * psi / n
    gathered = half * psi if methods.stage == 2 else 2 * half * psi / layers
    return {
        "sharded fp32 weights + gradients + moments": sharded,
        "gathered 16-bit weights" if mixed else "gathered weights": gathered,
        "one layer's unsharded fp32 gradients": 4 * psi / layers,
    }


# --- activations: bytes per sample ---------------------------------------------------------------------


# Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Sec. 4.1:
# a transformer layer keeps s.h.(34 + 5.a.s/h) bytes per sample with 16-bit activations; the 5.a.s^2
# part is the attention score matrix, which fused attention (SDPA / flash) never stores.
# HF eager attention keeps the fp32 softmax output (4 bytes per score) and its 16-bit copy (2) for the
# backward; in fp32 training one 4-byte tensor. Attention dropout adds its mask (1) and output.
EAGER_SCORE_BYTES_16BIT = 6
EAGER_SCORE_BYTES_FP32 = 4
# The loss upcasts logits to fp32, keeps the log-softmax output and, in the backward, its gradient:
# 3 x 4 bytes per logit.
LOGIT_BYTES = 12
# liger-kernel's fused linear + cross-entropy (the `fused` method, issue 42) never materialises the logits: it runs
# the LM head and the loss chunk by chunk in the forward, computes the gradient of its input there and keeps that
# (16-bit, 2 bytes per position and hidden unit), and holds one chunk's fp32 logits at a time, a chunk of positions
# x hidden / vocabulary positions (liger's chunk size), so positions x hidden x 4 bytes in all: 6 bytes per position
# and hidden unit in place of 12 per logit (LigerFusedLinearCrossEntropyFunction; an assumption until a fused row's
# micro-batch search brackets it, as kappa is calibrated).
FUSED_CE_BYTES = 6
# ConvNeXt block (per position and channel): input, depthwise output, LayerNorm output, 4x-wide
# pointwise output and its GELU (4 + 4), second pointwise output, layer-scale output = 13 tensors.
CONVNEXT_BLOCK_TENSORS = 13


def activation_terms(model: Model, methods: Methods) -> dict[str, float]:
    """Bytes per sample kept for the backward pass, in eager mode (the engine's micro-batch search)."""
    s = shape(model)
    mixed = mixed_precision(model)
    w = 1.0 if mixed else 2.0  # fp32 activations are twice the 16-bit bytes
    ckpt = methods.activation_checkpointing
    terms: dict[str, float] = {}
    if s.family == "transformer":
        layer = s.layer_bytes_per_token() * s.tokens * w
        scores = 0.0
        if not fused_attention(model, methods) and s.heads:
            per_score = EAGER_SCORE_BYTES_16BIT if mixed else EAGER_SCORE_BYTES_FP32
            if s.attention_dropout:
                per_score += 1 + (2 if mixed else 4)
            scores = s.heads * s.tokens * s.tokens * per_score
        if ckpt:  # per-layer checkpointing keeps each layer's input; one layer is rebuilt at a time
            terms["layer inputs (checkpoints)"] = s.layers * s.tokens * s.hidden * 2 * w
            terms["one layer, recomputed"] = layer + scores
        else:
            per = s.layer_bytes_per_token() / s.hidden
            terms[f"layers: {per:.3g}.s.h x {s.layers}"] = s.layers * layer
            if scores:
                terms["eager attention scores"] = s.layers * scores
    elif s.family == "mamba":
        e, r = s.inner, math.ceil(s.hidden / 16)
        # The fused path keeps in_proj's output (2e), the conv output (e), delta (e), the scan output (e)
        # and x_proj's output (r + 2n) in 16-bit, and the fp32 residual (4h), per token.
        layer = s.tokens * ((5 * e + r + 2 * s.state) * 2 + 4 * s.hidden)
        if not methods.free_lunch:
            # Without mamba-ssm, transformers' slow path materialises the discretised A and B.x for
            # every position: 2 x e x n fp32 values per token.
            layer += s.tokens * 2 * e * s.state * 4
        if ckpt:
            terms["layer inputs (checkpoints)"] = s.layers * s.tokens * s.hidden * 6
            terms["one layer, recomputed"] = layer
        else:
            terms[f"layers x {s.layers}"] = s.layers * layer
    elif s.family == "convnext":
        elem = 2.0 if mixed else 4.0
        per_stage = [res * res * c * d * CONVNEXT_BLOCK_TENSORS * elem for res, c, d in s.stages]
        if ckpt:  # the engine checkpoints whole stages: their inputs, plus the largest stage rebuilt
            terms["stage inputs (checkpoints)"] = sum(res * res * c * elem for res, c, _ in s.stages)
            terms["largest stage, recomputed"] = max(per_stage)
        else:
            terms["blocks"] = sum(per_stage)
    if methods.fused and s.logit_width > s.hidden:
        terms["fused linear + cross-entropy (no logits)"] = s.logit_positions * s.hidden * FUSED_CE_BYTES
    else:
        terms["logits and loss"] = s.logit_positions * s.logit_width * LOGIT_BYTES
    return terms


# --- fitting -------------------------------------------------------------------------------------------


def capacity_bytes(gpu: Gpu) -> float:
    """What the allocator can hand out: the card's memory (GiB, as sold) less what it never reports."""
    return gpu.memory_gb * GIB * USABLE_FRACTION


@dataclass(frozen=True)
class Need:
    """The memory one GPU needs at a micro-batch, term by term."""

    static: Mapping[str, float]
    activations_per_sample: Mapping[str, float]
    kappa: float
    micro_batch: int

    @property
    def static_bytes(self) -> float:
        return sum(self.static.values())

    @property
    def activation_bytes(self) -> float:
        return self.kappa * self.micro_batch * sum(self.activations_per_sample.values())

    @property
    def total_bytes(self) -> float:
        return self.static_bytes + self.activation_bytes


def need(model: Model, methods: Methods, num_gpus: int, micro_batch: int, kappa: float = 1.0) -> Need:
    return Need(static_terms(model, methods, num_gpus), activation_terms(model, methods), kappa, micro_batch)


def micro_batches(model: Model, num_gpus: int) -> list[int]:
    """The engine's candidates: powers of two that divide the per-GPU share of the replication batch."""
    per_gpu = model.training.batch_size // num_gpus
    out, mb = [], 1
    while mb <= per_gpu and per_gpu % mb == 0:
        out.append(mb)
        mb *= 2
    return out


def max_micro_batch(model: Model, gpu: Gpu, methods: Methods, num_gpus: int, kappa: float = 1.0,
                    capacity: float | None = None) -> int:
    """The largest candidate micro-batch whose need fits the GPU; 0 when not even one sample fits."""
    cap = capacity_bytes(gpu) if capacity is None else capacity
    best = 0
    for mb in micro_batches(model, num_gpus):
        if need(model, methods, num_gpus, mb, kappa).total_bytes <= cap:
            best = mb
        else:
            break
    return best


def arch_of(model: Model) -> str:
    """The architecture, as its config class names it: 'GPTNeoX' for every Pythia, 'ViT', 'Mamba', ..."""
    return model.config_class.removesuffix("Config")


def methods_of(row: Mapping[str, Any]) -> Methods:
    """The method settings of a stored trial (unknown settings read as off). A sharding this version does
    not know (a results file from elsewhere) is a PlannerError naming it, never a crash."""
    sharding = row.get("sharding") or "none"
    try:
        return Methods(free_lunch=bool(row.get("free_lunch")),
                       activation_checkpointing=bool(row.get("activation_checkpointing")),
                       sharding=sharding, offloading=bool(row.get("offloading")),
                       fused=bool(row.get("fused")), fp8=bool(row.get("fp8")))
    except ValueError as e:
        raise PlannerError(f"trial {str(row.get('trial_id'))[:40]}: {e}") from None


def beyond_the_paper(row: Mapping[str, Any]) -> bool:
    """A stored trial that used a method beyond the paper's space (engine/data/space.py: fused kernels, FP8). The
    fits, the memory calibration, the communication overlap and the bands describe the bf16 engine of the paper's
    methods: such a row feeds none of them (its own effect is an assumption until its measurements are fitted
    apart, engine/predict/terms.py)."""
    return bool(row.get("fused") or row.get("fp8"))


def gb(value: float) -> str:
    return f"{value / 1e9:.1f} GB"
