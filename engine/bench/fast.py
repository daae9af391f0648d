"""The methods beyond the paper's search space (issue 42), applied to a built model inside a trial:

- fused: liger-kernel's Triton kernels. For a model type liger-kernel knows (Llama, Mistral, Qwen, Gemma,
  OLMo-2, Mixtral, ...) its own `apply_liger_kernel_to_<type>` does it (RMSNorm, SwiGLU/GeGLU, RoPE, and the
  fused linear + cross-entropy that never materialises the logits). For any other causal LM (GPT-NeoX/Pythia,
  GPT-2, OPT, ...) the parts that hold for every such model are applied here: LayerNorm -> LigerLayerNorm
  (weights kept), and the loss computed by liger's fused linear cross-entropy from the backbone's hidden
  states and the output embedding's weight (the same mean over the same shifted labels as transformers').
  What a model keeps unfused is said (GPT-NeoX's partial rotary and GELU MLP have no liger kernel).
  Under torch.compile only the fused linear cross-entropy is applied: the norms, activations and rotary are
  left to Inductor, which fuses each with its neighbours (and with fp8's casts and scales), where liger's
  kernels stand alone between graph pieces. Measured on an H200 with every kernel in a compiled model: Pythia-1B
  50% MFU against free-lunch's 56%, Llama-3.2-1B x0.94, and with fp8 Pythia-1B x0.56 of fp8 alone.
- fp8: torchao's float8 training: every nn.Linear whose sides divide by 16 becomes a Float8Linear (dynamic
  tensorwise scaling, torchao's fastest recipe and its default), except the output head, kept in 16-bit as
  torchtitan does. Under FSDP (fully_shard, parameters on the GPU) the weights are all-gathered in float8, each
  rank casting its own shard, with the scales of all of them computed at once after each optimizer step
  (torchao's enable_fsdp_float8_all_gather and precompute_float8_dynamic_scale_for_fsdp, as torchtitan's FP8
  figures ran). Gathered in 16 bits instead, every rank cast every whole weight again in every pass: measured on
  4 x H100 (2026-11-28), fp8 was then slower than 16 bits (Pythia-6.9B FSDP-2 x1.08 the days at micro-batch 2,
  Pythia-2.8B FSDP-3 x1.10 at 8). Changes numerics; engine/bench/numerics.py measures by how much.

`unavailable(...)` says, without importing torch, why a method cannot run here (no GPU, no FP8 tensor cores,
package missing); the sweep records it rather than launching a trial that would fail. Imports torch (apply_*).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
from types import MethodType
from typing import Any

from engine.data.presets import FP8_MIN_CAPABILITY, capability
from engine.data.space import FLOAT8_GATHER, Methods

# torchao's float8 recipe the trials use (torchao.float8.Float8LinearRecipeName): dynamic per-tensor scales.
FP8_RECIPE = "tensorwise"
PACKAGES = {"fused": "liger_kernel", "fp8": "torchao"}
PIP_NAMES = {"fused": "liger-kernel", "fp8": "torchao"}


def unavailable(methods: Methods, device: str, gpu_name: str | None = None,
                compute_capability: str | None = None) -> str | None:
    """Why this point cannot run on this machine, in words; None if it can."""
    reasons = []
    for extra in methods.extras:
        if importlib.util.find_spec(PACKAGES[extra]) is None:
            reasons.append(f"{extra}: {PIP_NAMES[extra]} is not installed (pip install 'tui-planner[bench]')")
        elif device != "cuda":
            reasons.append(f"{extra}: " + ("liger-kernel's Triton kernels need a CUDA GPU" if extra == "fused" else
                                           "torchao's float8 training needs FP8 tensor cores (an Ada, Hopper or "
                                           "Blackwell GPU)") + "; this run is on the CPU")
        elif extra == "fp8" and compute_capability and capability(compute_capability) < FP8_MIN_CAPABILITY:
            reasons.append(f"infeasible: no FP8 tensor cores ({gpu_name or 'this GPU'}: compute capability "
                           f"{compute_capability}; FP8 needs {'.'.join(map(str, FP8_MIN_CAPABILITY))} or later)")
    return "; ".join(reasons) or None


def apply(net: Any, methods: Methods, objective: str, emulate_fp8: bool = False,
          compiled: bool = False) -> dict[str, Any]:
    """Put the point's methods beyond the paper's into a built model (before checkpointing wraps its blocks and a
    stepper shards or compiles it): {'fused': what liger covered, 'fp8': torchao's recipe and counts}, those used.
    compiled: the model will run under torch.compile (fused then covers the loss only; see the module's note)."""
    done: dict[str, Any] = {}
    if methods.fused:
        done["fused"] = apply_fused(net, objective, compiled=compiled)
    if methods.fp8:
        done["fp8"] = apply_fp8(net, emulate=emulate_fp8, fsdp_float8_all_gather=methods.fp8_gathered_in_float8)
    return done


def precompute_fp8_scales(net: Any) -> None:
    """After an optimizer step under float8 all-gather: every float8 weight's scale from one all-reduce of all
    their maxima, for the next all-gathers (without it, each weight's pre-all-gather hook reduces its own)."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

    precompute_float8_dynamic_scale_for_fsdp(net)


# --- fused -------------------------------------------------------------------------------------------


LOSS_KERNEL = "fused_linear_cross_entropy"
LEFT_TO_COMPILE = "left to torch.compile, which fuses it with its neighbours"


def apply_fused(net: Any, objective: str, compiled: bool = False) -> dict[str, Any]:
    """Put liger-kernel's kernels into `net` (a transformers model, built, not yet wrapped or compiled).
    compiled: it will run under torch.compile, so only the fused linear cross-entropy goes in (the rest is
    Inductor's to fuse). Returns what was done: {'via': ..., 'covers': [...], 'not_covered': [...],
    'liger_kernel_config': the keyword arguments liger's own function took (its model types only)}; raises
    RuntimeError if nothing of the model could be covered."""
    import torch
    from liger_kernel.transformers.monkey_patch import MODEL_TYPE_TO_APPLY_LIGER_FN

    model_type = getattr(net.config, "model_type", None)
    fn = MODEL_TYPE_TO_APPLY_LIGER_FN.get(model_type)
    keep_fused_loss_eager()
    head = net.get_output_embeddings() if objective == "causal-lm" else None
    if compiled and not isinstance(head, torch.nn.Linear):
        compiled = False  # no loss to fuse (an encoder, an image model): liger's other kernels, as uncompiled
    if fn is not None:
        sig = inspect.signature(fn)
        on = [name for name, p in sig.parameters.items() if p.default is True]
        compiled = compiled and LOSS_KERNEL in on  # a function without the fused loss on: its own default set
        kwargs = {name: name == LOSS_KERNEL for name in on} if compiled else {}
        fn(model=net, **kwargs)
        covers = [name for name in on if kwargs.get(name, True)]
        return {"via": f"liger_kernel {fn.__name__}", "covers": covers,
                "not_covered": [f"{name} ({LEFT_TO_COMPILE})" for name in on if not kwargs.get(name, True)],
                **({"liger_kernel_config": kwargs} if kwargs else {})}
    covers, not_covered = [], []
    if compiled:
        not_covered.append(f"layer norms ({LEFT_TO_COMPILE})")
    else:
        n = _swap_layer_norms(net)
        if n:
            covers.append(f"layer_norm x{n}")
    if isinstance(head, torch.nn.Linear):
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

        # The loss runs inside the head's own call, so whatever gathers the head's weight around that call (ZeRO-3's
        # and FSDP's hooks) has gathered it when the fused kernel reads it.
        head.liger_flce = LigerFusedLinearCrossEntropyLoss(ignore_index=-100)
        head.forward = MethodType(_fused_head_loss, head)
        net.forward = MethodType(_fused_causal_lm_forward, net)
        covers.append(LOSS_KERNEL)
    else:
        not_covered.append(f"loss ({objective}: no fused linear cross-entropy here)")
    not_covered += [] if compiled else _unfused_parts(net)
    if not covers:
        raise RuntimeError(f"liger-kernel covers nothing of {type(net).__name__} (model type {model_type!r}): "
                           f"not {', '.join(not_covered)}")
    return {"via": "tui-planner's generic liger patch (model type not in liger-kernel's list)", "covers": covers,
            "not_covered": not_covered}


def own_patch(done: Any) -> bool:
    """Whether a row's fused record (apply_fused's return, in its provenance) is the planner's own patch, which
    TrainingArguments' use_liger_kernel would not apply (liger-kernel has none for the model type)."""
    via = str(done.get("via", "")) if isinstance(done, dict) else ""
    return bool(via) and not via.startswith("liger_kernel ")


def swapped_norms(done: Any) -> bool:
    """Whether a row's fused record says the norms were swapped for liger's (a row measured uncompiled, or compiled
    before fused under torch.compile left the norms to Inductor): what to apply to run the same kernels again."""
    covers = done.get("covers") if isinstance(done, dict) else None
    return any(str(c).startswith("layer_norm") for c in covers or [])


def keep_fused_loss_eager() -> None:
    """torch.compile runs liger's fused linear cross-entropy as it is, untraced. Its autograd Function computes the
    gradients inside its forward with Triton kernels and in-place `torch.addmm(..., out_dtype=float32, out=...)`,
    which Dynamo cannot trace on torch 2.11 ("Dynamo failed to run FX node with fake tensors: addmm", measured on
    an H200 for Pythia-1B and Llama-3.2-1B); tracing it would gain nothing (its kernels are Triton already). The
    compiled model then breaks its graph once, at the loss. Idempotent; every caller of the Function (liger's own
    model patches and ours) looks `apply` up on the class, so all of them take the wrapped one."""
    import torch
    from liger_kernel.ops import fused_linear_cross_entropy as flce

    fn = flce.LigerFusedLinearCrossEntropyFunction
    if not getattr(fn, "_tui_planner_eager", False):
        fn.apply = torch.compiler.disable(fn.apply)
        fn._tui_planner_eager = True


def _swap_layer_norms(net: Any) -> int:
    """Every torch.nn.LayerNorm over the last dimension (with its weight and bias) -> LigerLayerNorm."""
    import torch
    from liger_kernel.transformers import LigerLayerNorm

    swapped = 0
    for parent in list(net.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is not torch.nn.LayerNorm or len(child.normalized_shape) != 1 \
                    or not child.elementwise_affine or child.bias is None:
                continue  # LigerLayerNorm always has a bias: one without would be another model
            new = LigerLayerNorm(child.normalized_shape[0], eps=child.eps, bias=True)
            new.to(device=child.weight.device, dtype=child.weight.dtype)
            with torch.no_grad():
                new.weight.copy_(child.weight)
                new.bias.copy_(child.bias)
            setattr(parent, name, new)
            swapped += 1
    return swapped


def _unfused_parts(net: Any) -> list[str]:
    """What a model keeps in plain PyTorch under the generic patch, read off its config."""
    out = []
    cfg = net.config
    act = getattr(cfg, "hidden_act", None) or getattr(cfg, "activation_function", None)
    if act:
        out.append(f"MLP ({act}: not patched for this model type)")
    if any("Rotary" in type(m).__name__ for m in net.modules()):
        out.append("rotary embedding (this model type's own, e.g. GPT-NeoX's partial rotary)")
    return out


def _fused_causal_lm_forward(self: Any, input_ids: Any = None, labels: Any = None, attention_mask: Any = None,
                             **kwargs: Any) -> Any:
    """A causal LM's forward whose loss never materialises the logits: the backbone's last hidden states go to
    the head, whose call computes liger's fused linear cross-entropy (_fused_head_loss) over the labels shifted
    as transformers shifts them (padded with -100 at the end; mean over the tokens not ignored). Returns an
    output with `.loss` (no logits)."""
    import torch.nn.functional as F
    from transformers.modeling_outputs import CausalLMOutputWithPast

    backbone = getattr(self, self.base_model_prefix)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, **kwargs)[0]
    loss = None
    if labels is not None:
        shifted = F.pad(labels, (0, 1), value=-100)[..., 1:].reshape(-1)
        loss = self.get_output_embeddings()(hidden.reshape(-1, hidden.size(-1)), shifted)
    return CausalLMOutputWithPast(loss=loss)


def _fused_head_loss(self: Any, hidden: Any, labels: Any) -> Any:
    """The head's forward under `fused`: the mean cross-entropy of (hidden @ weight^T + bias) against labels, by
    liger's kernel, without the logits. The weight in the hidden states' dtype, as autocast runs the head."""
    weight = self.weight if self.weight.dtype == hidden.dtype else self.weight.to(hidden.dtype)
    bias = self.bias if self.bias is None or self.bias.dtype == hidden.dtype else self.bias.to(hidden.dtype)
    return self.liger_flce(weight, hidden, labels, bias)


# --- fp8 ---------------------------------------------------------------------------------------------


def apply_fp8(net: Any, emulate: bool = False, fsdp_float8_all_gather: bool = False) -> dict[str, Any]:
    """Swap `net`'s linear layers for torchao's Float8Linear (before sharding and compiling). emulate: torchao's
    emulation (CPU tests; as slow as it is exact about what the recipe does). fsdp_float8_all_gather: fully_shard
    will shard the model and is to gather its weights in float8 (Methods.fp8_gathered_in_float8). Returns the recipe and counts,
    and 'all_gather': 'float8' where FSDP gathers them so."""
    import torch
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    head = net.get_output_embeddings() if hasattr(net, "get_output_embeddings") else None
    kept: list[str] = []

    def take(mod: torch.nn.Module, fqn: str) -> bool:
        if not isinstance(mod, torch.nn.Linear):
            return True  # a container: look inside
        if mod is head:
            kept.append(f"{fqn} (output head)")
            return False
        if mod.in_features % 16 or mod.out_features % 16:
            kept.append(f"{fqn} ({mod.in_features}x{mod.out_features}: not a multiple of 16)")
            return False
        return True

    # pad_inner_dim: torch._scaled_mm wants every inner dimension a multiple of 16, the tokens of a weight's
    # gradient included (Pythia's 2,049-token samples at an odd micro-batch are not; measured on an H200: "Expected
    # trailing dimension of mat1 to be divisible by 16 ... (2048x2049)"). Padded, as the export's accelerate recipe.
    if emulate:
        config = Float8LinearConfig(emulate=True, pad_inner_dim=True)
    else:
        config = dataclasses.replace(Float8LinearConfig.from_recipe_name(FP8_RECIPE), pad_inner_dim=True)
    if fsdp_float8_all_gather:
        config = dataclasses.replace(config, enable_fsdp_float8_all_gather=True)
    before = sum(isinstance(m, torch.nn.Linear) for m in net.modules())
    convert_to_float8_training(net, module_filter_fn=take, config=config)
    from torchao.float8.float8_linear import Float8Linear

    converted = sum(isinstance(m, Float8Linear) for m in net.modules())
    if converted == 0:
        raise RuntimeError(f"fp8: none of {type(net).__name__}'s {before} linear layers could take float8 "
                           f"({'; '.join(kept[:3])})")
    return {"recipe": FP8_RECIPE + ", inner dims padded to 16" + (" (emulated)" if emulate else ""),
            **({"all_gather": FLOAT8_GATHER} if fsdp_float8_all_gather else {}),
            "linears": converted, "of": before, "kept_16bit": kept[:8] + ([f"... {len(kept) - 8} more"] if len(kept) > 8 else [])}
