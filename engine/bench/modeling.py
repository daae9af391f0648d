"""Build a preset's model with random weights, random inputs of the right shape, and find out which
attention or SSM kernel actually runs. Imported only inside trial processes (it imports torch).

Nothing is downloaded: the architecture comes from the preset's config values.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import torch
import transformers

from engine.data.presets import Model


def attention_implementation(model: Model, free_lunch: bool, device: str) -> str:
    """What to ask transformers for: flash-attn when installed (CUDA), else SDPA; eager when naive."""
    if model.attention == "none":
        return "none"
    if not free_lunch:
        return "eager"
    if device == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa" if model.attention == "sdpa" else "eager"


_MASK_OVERRIDE: dict[str, Any] = {}
# What the SDPA mask function returned since the last clear(): "none" (a flag or nothing) and/or "dense".
# Under torch.compile it runs while tracing, so after a compiled warm-up this says what the graph holds.
MASKS_SEEN: set[str] = set()
# What transformers' SDPA attention was handed, call by call, where the model attends through its attention
# interface: what ran. A model may make a mask it never uses (Qwen2-MoE builds a sliding-window one beside the
# causal one whether or not any layer slides), so where this holds anything it is the record.
MASKS_USED: set[str] = set()


def clear_masks_seen() -> None:
    MASKS_SEEN.clear()
    MASKS_USED.clear()


def sdpa_without_dense_masks(unpacked: bool = False) -> bool:
    """Let SDPA's fused kernels run under torch.compile: a mask without padding is no mask tensor.

    transformers builds a dense (batch, 1, q, kv) boolean mask for SDPA whenever torch.compile traces the
    model with torch before 2.14 (it cannot tell compiling from exporting there), although eager runs skip
    it. With a mask tensor SDPA cannot use flash attention, and cuDNN computes every block, masked or not:
    on Pythia-1B (H100) attention took 36% of a compiled pass. Pre-training batches have no padding, so
    the mask says nothing a flag cannot: a causal one becomes SDPA's `is_causal` (equal query and key
    lengths), a bidirectional one (RoBERTa) none at all, as eager transformers (and torch >= 2.14) do.
    Every other case (padding, sliding windows, packed sequences, cache offsets, added mask functions) is
    left to transformers. A causal model run without a cache (use_cache=False, which gradient
    checkpointing sets) is a case of its own: transformers then looks for packed sequences in the position
    ids, and while tracing it cannot rule them out, so it builds the dense mask. With `unpacked` (each row
    of a batch is one sequence, as in every trial) that search is off, and checkpointed passes get the flag
    too; data that packs several documents into a row must leave it off. MASKS_SEEN says what SDPA got;
    trials record it. Returns whether the override is in place (False where this transformers has no mask
    interface).
    """
    on = _install_mask_override()
    if on and unpacked and not _MASK_OVERRIDE.get("unpacked"):
        from transformers import masking_utils as mu

        if hasattr(mu, "find_packed_sequence_indices"):
            def one_sequence_per_row(position_ids: torch.Tensor) -> None:
                return None  # what transformers returns for unpacked rows when it can check

            mu.find_packed_sequence_indices = one_sequence_per_row
        _MASK_OVERRIDE["unpacked"] = True
    return on


def _install_mask_override() -> bool:
    if "on" in _MASK_OVERRIDE:
        return _MASK_OVERRIDE["on"]
    try:
        from transformers import masking_utils as mu

        original = mu.AttentionMaskInterface._global_mapping["sdpa"]
        causal = mu.causal_mask_function
        bidirectional = getattr(mu, "bidirectional_mask_function", None)
    except (ImportError, AttributeError, KeyError):
        _MASK_OVERRIDE["on"] = False
        return False

    def sdpa_mask(*args: Any, **kwargs: Any) -> Any:
        q_len = kwargs.get("q_length")
        if q_len is None and isinstance(kwargs.get("cache_position"), torch.Tensor):
            q_len = kwargs["cache_position"].shape[0]
        kv_len = kwargs.get("kv_length")
        plain = (not args and kwargs.get("attention_mask") is None
                 and kwargs.get("local_size") is None and kwargs.get("local_attention_size") is None)
        fn = kwargs.get("mask_function", causal)
        if (plain and fn is causal and kwargs.get("allow_is_causal_skip", True)
                and isinstance(q_len, int) and q_len == kv_len and q_len > 1
                and kwargs.get("q_offset", 0) == kwargs.get("kv_offset", 0)):
            MASKS_SEEN.add("none")
            return None  # SDPA: is_causal
        if plain and bidirectional is not None and fn is bidirectional and kwargs.get("allow_is_bidirectional_skip"):
            MASKS_SEEN.add("none")
            return None  # SDPA: no mask
        mask = original(*args, **kwargs)
        MASKS_SEEN.add("none" if mask is None else "dense")
        return mask

    sdpa_mask.__wrapped__ = original  # type: ignore[attr-defined]
    mu.AttentionMaskInterface.register("sdpa", sdpa_mask)
    _record_what_sdpa_gets()
    _MASK_OVERRIDE["on"] = True
    return True


def _record_what_sdpa_gets() -> None:
    """transformers' SDPA attention, recording in MASKS_USED whether each call got a mask tensor."""
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        attend = ALL_ATTENTION_FUNCTIONS._global_mapping["sdpa"]
    except (ImportError, AttributeError, KeyError):
        return

    def sdpa_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *args: Any,
                       **kwargs: Any) -> Any:
        MASKS_USED.add("none" if attention_mask is None else "dense")
        return attend(module, query, key, value, attention_mask, *args, **kwargs)

    sdpa_attention.__wrapped__ = attend  # type: ignore[attr-defined]
    ALL_ATTENTION_FUNCTIONS.register("sdpa", sdpa_attention)
    # The record is a side effect inside each layer, so inside a checkpointed region, where Dynamo refuses side
    # effects (it would split the compiled graph around every checkpointed layer: 2 graphs became 5 on a small
    # Llama). It may skip them in the backward's recompute: the forward has already recorded what SDPA got.
    import torch._dynamo

    if hasattr(torch._dynamo.config, "skip_fwd_side_effects_in_bwd_under_checkpoint"):
        torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint = True


def masks_seen() -> str | None:
    """What SDPA got since clear_masks_seen(): 'none', 'dense', 'mixed': what its calls were handed where the model
    attends through transformers' interface (MASKS_USED), else what the mask function handed out (MASKS_SEEN)."""
    seen = MASKS_USED or MASKS_SEEN
    if not seen:
        return None
    return "mixed" if len(seen) > 1 else next(iter(seen))


def build_model(model: Model, attn: str, device: str) -> torch.nn.Module:
    config_cls = getattr(transformers, model.config_class)
    config = config_cls(**dict(model.config))
    cls = getattr(transformers, model.hf_class)
    kwargs: dict[str, Any] = {"dtype": torch.float32}
    if attn == "sdpa":
        sdpa_without_dense_masks(unpacked=True)  # make_batch: one sequence per row
    if attn != "none":
        kwargs["attn_implementation"] = attn
    with torch.device(device):
        try:
            net = cls._from_config(config, **kwargs)
        except TypeError:  # transformers 4.x spells it torch_dtype
            kwargs["torch_dtype"] = kwargs.pop("dtype")
            net = cls._from_config(config, **kwargs)
    net.train()
    return net


def make_batch(model: Model, micro_batch: int, device: str, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Random inputs of the recipe's shape; data loading stays out of the timing, as in the paper."""
    if model.objective == "image-classification":
        size = model.image_size
        pixels = torch.randn(micro_batch, 3, size, size, generator=generator).to(device)
        labels = torch.randint(0, model.num_classes, (micro_batch,), generator=generator).to(device)
        return {"pixel_values": pixels, "labels": labels}
    ids = torch.randint(0, model.vocab_size, (micro_batch, model.seq_len), generator=generator).to(device)
    if model.objective == "masked-lm":
        labels = ids.clone()
        keep = torch.rand(ids.shape, generator=generator).to(device) >= 0.15  # BERT's 15% masking
        labels[keep] = -100
        return {"input_ids": ids, "labels": labels}
    if model.objective == "seq2seq-lm":  # the decoder reads the target shifted right: random ids of its length
        target = torch.randint(0, model.vocab_size, (micro_batch, model.target_len), generator=generator).to(device)
        return {"input_ids": ids, "decoder_input_ids": target.roll(1, dims=1), "labels": target}
    return {"input_ids": ids, "labels": ids}


def _hf_checkpointing(net: torch.nn.Module) -> None:
    """transformers' non-reentrant checkpointing: `activation_checkpointing_enable` since 5.x (its old name,
    `gradient_checkpointing_enable`, warns and goes away in 6), the old name before."""
    if hasattr(net, "activation_checkpointing_enable"):
        net.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        net.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def block_classes(net: torch.nn.Module, model: Model) -> tuple[str, ...]:
    """The repeated block FSDP wraps and checkpointing recomputes: the preset's `fsdp_wrap` if it names one,
    else what the model itself says must not be split (transformers' `_no_split_modules`), so a model read
    from its config.json needs no table of block names."""
    if model.fsdp_wrap:
        return (model.fsdp_wrap,)
    return tuple(getattr(net, "_no_split_modules", None) or ())


def blocks_of(net: torch.nn.Module, model: Model) -> list[torch.nn.Module]:
    names = set(block_classes(net, model))
    return [m for m in net.modules() if type(m).__name__ in names]


def enable_checkpointing(net: torch.nn.Module, model: Model) -> str:
    """Activation checkpointing: transformers' own where it has it, else around each stage."""
    if getattr(net, "supports_gradient_checkpointing", False) and model.checkpointing != "stages":
        _hf_checkpointing(net)
        return "hf"
    from torch.utils.checkpoint import checkpoint

    stages = blocks_of(net, model)
    if not stages:
        if getattr(net, "supports_gradient_checkpointing", False):
            _hf_checkpointing(net)
            return "hf"
        raise RuntimeError(f"no {' or '.join(block_classes(net, model)) or 'block'} modules to checkpoint in "
                           f"{model.hf_class}")
    for stage in stages:
        inner = stage.forward

        def forward(*args, _inner=inner, **kwargs):
            return checkpoint(_inner, *args, use_reentrant=False, **kwargs)

        stage.forward = forward
    return "stages"


_SDPA_OPS = {
    "aten::_scaled_dot_product_flash_attention": "sdpa-flash",
    "aten::_scaled_dot_product_cudnn_attention": "sdpa-cudnn",
    "aten::_scaled_dot_product_efficient_attention": "sdpa-efficient",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "sdpa-flash-cpu",
    "aten::_scaled_dot_product_attention_math": "sdpa-math",
    "aten::_efficient_attention_forward": "sdpa-efficient",
    "aten::_flash_attention_forward": "sdpa-flash",
}


def detect_kernel(net: torch.nn.Module, model: Model, attn: str, batch: dict[str, torch.Tensor]) -> str:
    """Which attention / SSM kernel runs: read from the ops one forward pass dispatches."""
    if model.hf_class.startswith("Mamba"):
        return _mamba_path()
    if attn == "none":
        return "none (convolutional)"
    if attn == "flash_attention_2":
        return "flash-attn-2"
    if attn == "eager":
        return "eager (unfused)"
    from torch.profiler import ProfilerActivity, profile

    small = {k: v[:1] for k, v in batch.items()}
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(model.training.precision)
    device = next(net.parameters()).device.type
    # Under the same autocast as the timed passes: the backend depends on the dtype (no flash in fp32).
    with torch.no_grad(), torch.autocast(device, dtype=dtype, enabled=dtype is not None), \
            profile(activities=[ProfilerActivity.CPU]) as prof:
        net(**small)
    names = {e.name for e in prof.events()}
    found = sorted({label for op, label in _SDPA_OPS.items() if op in names})
    if not found:
        return "sdpa (backend not seen)"
    return "+".join(found)


def _mamba_path() -> str:
    try:
        from transformers.models.mamba import modeling_mamba as mm
    except ImportError:
        return "unknown"
    fast = getattr(mm, "is_fast_path_available", None)
    if fast is None:
        has = all(importlib.util.find_spec(p) is not None for p in ("mamba_ssm", "causal_conv1d"))
        fast = has
    if fast and torch.cuda.is_available():
        return "mamba-ssm CUDA kernels"
    off = [p for p in ("mamba_ssm", "causal_conv1d") if sys.modules.get(p, 0) is None]
    if off:
        return f"torch fallback (slow); {', '.join(off)} turned off (naive)"
    missing = [p for p in ("mamba_ssm", "causal_conv1d") if importlib.util.find_spec(p) is None]
    return "torch fallback (slow)" + (f"; missing {', '.join(missing)}" if missing else "")


def checkpoint_recompute_share(model: Model, seq_len: int | None = None) -> float:
    """The FLOPs activation checkpointing adds to a forward + backward pass, as a share of it: counted
    (torch.utils.flop_counter) on the meta device, so no weights are allocated and nothing is computed.

    Not a full forward (1/3): PyTorch's non-reentrant checkpoint stops recomputing once every tensor the
    backward needs is back, so a block's trailing ops whose outputs nothing saves (Pythia's MLP output
    projection) are not run again, and the layers outside the checkpointed blocks (embeddings, the LM head)
    never are. Traced with torch.compile the recompute is the same (Pythia-1B: both 1.215x). `seq_len`
    overrides the preset's; for a model whose counted FLOPs are linear in it (Mamba) the share does not
    depend on it, and its slow path, which loops over positions, is then quick to trace.
    """
    from dataclasses import replace

    from torch.utils.flop_counter import FlopCounterMode

    if seq_len is not None:
        model = replace(model, seq_len=seq_len)
    totals = []
    for checkpointed in (False, True):
        net = build_model(model, attention_implementation(model, True, "meta"), "meta")
        if checkpointed:
            enable_checkpointing(net, model)
        batch = make_batch(model, 1, "meta", torch.Generator().manual_seed(0))
        with FlopCounterMode(display=False) as counter:
            net(**batch).loss.backward()
        totals.append(counter.get_total_flops())
    return totals[1] / totals[0] - 1
