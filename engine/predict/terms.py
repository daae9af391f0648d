"""Predict training days for a model on a GPU type and count nobody measured, and say how good that is.

The time model is a roofline fitted to measurements (every term below says where it comes from):

    pass_s   = residual x micro_batch x (x_c x compute_s + x_m x memory_s) + comm_s + host_s
      compute_s = k x FLOPs per sample / dense peak        (k with checkpointing: 1 + the preset's
                                                           checkpoint_recompute, what it runs again)
      memory_s  = memory-bound bytes per sample / bandwidth (eager attention scores, logits and loss,
                  elementwise layers: counted per architecture in `traffic_terms`)
      x_c, x_m  = 1 / achieved fraction of peak and of bandwidth, fitted by least squares (relative
                  error) over the basis rows of the same architecture and kernel group (naive
                  eager; free-lunch compiled; free-lunch uncompiled, as ZeRO runs); x_c >= 1/0.65, so no
                  prediction claims more than 65% of the dense peak (and none more than its generation's line)
      residual  = measured / fitted pass of the same model in the same group on other hardware: its
                  unsharded rows if any, else all (1 if none)
      comm_s    = max(0, T - h x G): T = bytes each GPU sends per pass (reduce-scatter, all-gather: ZeRO,
                  FSDP) / (interconnect per direction x 0.7, measured: LINK_EFFICIENCY); across machines, at
                  the slower of that and what a machine's network ports carry (presets/networks.toml); G the
                  GPU work it can run beside (the pass; DDP: the last backward), h the share of G it hides
                  behind, per kind, calibrated on settings measured over two paths (engine/predict/comm.py;
                  0 where no pair was measured); DDP's one all-reduce per step goes into the update, as the
                  engine times it
      host_s    = e x CPU <-> GPU bytes per pass with offloading / (PCIe per direction x 0.7): e in [0, 1] is
                  the exposed share of the copies (the rest overlaps the GPU's work through prefetch), per
                  implementation (DeepSpeed ZeRO-Offload, FSDP CPU offload), median over measured offload
                  passes of other cells (what they took beyond their GPU work / their copy time); 1 if none
    update_s = x_u x optimizer bytes / bandwidth + per-step communication; with offloading instead the
               parameters each GPU holds x the measured offload update per parameter of that
               implementation (CPU Adam + the copy back: DeepSpeed's vectorized CPU Adam ~0.5 ns/param,
               FSDP's torch.optim.Adam on the CPU ~3 ns/param), median over other cells' offload rows
    step_s   = pass_s x accumulation + update_s;  days = step_s x steps / 86400
    micro_batch = the largest power of two the memory model fits (engine/predict/memory.py); none: infeasible

Basis rows are measured ones (synchronized timings); a configuration measured more than once (the same cell
and setting on other days) enters once, as its median-days measurement. An architecture with no measured rows falls back to the
paper's Table 1/4 rows whose implied MFU is plausible (<= 60%), marked as such: the paper's timer did not
synchronize the GPU, so even those can be optimistic. The error band comes from leave-one-out over the
same basis (`validate`): each measured cell (model x GPU x count) is predicted from all other cells.
No torch here.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from engine.data import formulas, space
from engine.data.generations import GENERATIONS
from engine.data.errors import PlannerError
from engine.data.presets import Gpu, Model
from engine.data.space import Methods
from engine.data.store import provenance_view
from engine.predict import memory
from engine.predict.memory import shape

# A prediction never claims more than this share of the dense peak (the highest generation's plausibility line,
# engine/data/generations.py: Hopper's and the A100's 65%; well-tuned training reaches 40-64%); nor more than this
# share of the memory bandwidth.
MAX_COMPUTE_FRACTION = max(g.mfu_line for g in GENERATIONS.values())
MAX_BANDWIDTH_FRACTION = 0.9
# Used where no basis row pins a value down (each use is named in the prediction's explanation).
DEFAULT_BANDWIDTH_FRACTION = 0.7
DEFAULT_UPDATE_BANDWIDTH_FRACTION = 0.5
# NCCL reaches about 70% of a link's per-direction rate: measured on 4 x H200 over NVLink (NCCL 2.28.9, 1 GB,
# scripts/nccl_probe.py, data/probes/nccl-h200x4-2026-11-27.jsonl): all-gather 318 and reduce-scatter 315 GB/s
# bus bandwidth of 450 (70-71%), all-reduce 350 (78%). Host-staged (NCCL_P2P_DISABLE=1) on the same machine:
# 22.5-24.5 GB/s, where half of PCIe 5's 63 GB/s x 0.7 says 22 (link_bytes_per_s). PCIe copies (offloading)
# take the same share (an assumption: their own fit, Predictor.host_exposed, corrects what it misses).
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
    prov = provenance_view(row.get("provenance"))
    if "causal_mask" in prov:
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


def attention_flops_per_sample(model: Model) -> float:
    """Attention's s x s products in a sample's forward + backward: 12 x layers x hidden x tokens^2 (PaLM,
    App. B), counted whole where a causal kernel skips half (it runs below the matmuls' speed). Not in the
    6·N·D a preset's FLOPs (and MFU) count, yet what makes a longer sequence slower per token. 0 without
    attention."""
    s = shape(model)
    if s.attention_flops is not None:  # counted on the model built on the meta device
        return s.attention_flops
    if s.family != "transformer" or not s.heads or not s.tokens:
        return 0.0
    return 12 * s.layers * s.hidden * s.tokens ** 2


def compute_flops_per_sample(model: Model) -> float:
    """What the roofline's compute term runs: the preset's FLOPs per sample and attention's; a mixture of
    experts' FLOPs cost MOE_COMPUTE_FACTOR times a dense model's (moe_factor)."""
    return (flops_per_sample(model) + attention_flops_per_sample(model)) * moe_factor(model)


# Transformers' own mixture-of-experts layers reach far less of the peak per active FLOP than a dense model's
# matrix products: tokens are routed (a top-k, a sort or scatter, a gather back), and the experts' products
# are grouped ones that may fall back to slower kernels. An assumption, not a measurement: each active FLOP
# costs twice a dense one, with a wide band (MOE_BAND) until a measured mixture of experts fits its own
# architecture. The engine measures data-parallel and sharded settings only (every GPU holds every expert):
# no expert parallelism.
MOE_COMPUTE_FACTOR = 2.0
MOE_BAND = (0.5, 2.0)  # days x these factors: from four times a dense model's efficiency to the same as one


# --- the methods beyond the paper's (issue 42): assumptions until their own measurements are fitted --------------
#
# fp8 (torchao's float8 training, tensorwise scaling, under torch.compile): the linear layers' matrix products run
# on FP8 tensor cores, at most peak_fp8 / peak_16bit (2x on every card the presets hold) faster; accelerate's
# torchao filter (accelerate.utils.ao.filter_linear_layers) leaves the first and last linear layers (the LM head)
# in bf16, and attention's s x s products stay 16-bit. What share of that 2x a real run gets is FP8_EFFICIENCY, set
# from the one published same-job comparison we hold: torchtitan's docs/performance.md, Llama-3.1-8B on 8 x H100
# (FSDP + torch.compile 6,667 tokens/s per GPU; + Float8 8,532: 1.28x). 0.77 makes this time model give that job's
# shape (Llama-3.1-8B from its config, sequence 8,192, checkpointed FSDP-2 on 8 x H100) 1.28x: 9.46 s a step in
# bf16, 7.40 s with fp8. The same 0.77 gives shorter sequences more (attention, which stays 16-bit, is less of their
# step); torchao's own tables show small matrices (hidden 2,048) gain less, which the band (FP8_BAND) covers, down
# to no gain at all.
FP8_EFFICIENCY = 0.77
# Each converted linear casts its input (forward) and its output's gradient (backward) to FP8: the 16-bit tensor
# read (2 bytes) and the FP8 copy written (1); compile fuses the scale's amax into the producer. The weights are cast
# once a pass each way (the forward's and the transposed copy for the backward): 2 x 3 bytes per parameter.
FP8_CAST_BYTES = 3
FP8_BAND = (0.85, 1.4)  # days x these: 15% faster than assumed, to slower than bf16 (small matrices, cast overhead)
# fused (liger-kernel: fused linear + cross-entropy, RMSNorm/LayerNorm, SwiGLU/GeGLU, RoPE; the same maths): under
# torch.compile the norms, activations and rotary are fused already, so its time effect is the loss: the logits are
# written once per chunk in fp32 and read back for the two gradient products, in place of compile's separate
# up-cast, log-softmax and gradient kernels: FUSED_LOGIT_TRAFFIC of their traffic (an assumption). Its main effect is
# memory (engine/predict/memory.py: no logits, so larger micro-batches).
FUSED_LOGIT_TRAFFIC = 0.5
FUSED_BAND = (0.9, 1.15)  # days x these: the chunked products may cost more than the traffic they save
EXTRA_BANDS = {"fused": FUSED_BAND, "fp8": FP8_BAND}


def fp8_linear_share(model: Model) -> float:
    """The share of the preset's FLOPs (attention's s x s products apart) that torchao's float8 runs in FP8: all
    but the LM head's products (6 x positions x hidden x vocabulary a sample), which accelerate keeps in bf16."""
    s = shape(model)
    head = 6.0 * s.logit_positions * s.hidden * s.logit_width
    per = flops_per_sample(model)
    return max(0.0, 1.0 - head / per) if per > 0 else 0.0


def fp8_speedup(gpu: Gpu) -> float:
    """How much faster the converted matrix products run: the FP8 peak over the 16-bit one, x FP8_EFFICIENCY, never
    below 1 (a GPU without FP8 tensor cores never gets here: the predictor calls fp8 infeasible on it)."""
    if not getattr(gpu, "peak_fp8_tflops", None):
        return 1.0
    return max(1.0, gpu.peak_fp8_tflops / gpu.peak_16bit_tflops * FP8_EFFICIENCY)


def fp8_cast_bytes(model: Model, methods: Methods) -> tuple[float, float]:
    """(bytes per sample, bytes per pass) that float8's casts move: each converted linear's input and output
    gradient per position (in-width + out-width, again in a checkpointed recompute), and its weight twice a pass."""
    if not methods.fp8:
        return 0.0, 0.0
    s = shape(model)
    if s.family != "transformer" or not s.heads:
        return 0.0, 0.0
    d = s.head_dim or s.hidden // s.heads
    q, kv = s.heads * d, (s.kv_heads or s.heads) * d
    f = s.inner or 4 * s.hidden
    # q, k, v and o; the MLP's up (and gate) and down: each linear's input width + output width
    per_token = (s.hidden + q + 2 * kv) + (q + s.hidden) + (s.hidden + f) * (2 if s.gated else 1) + (f + s.hidden)
    per_sample = recompute(model, methods) * FP8_CAST_BYTES * per_token * s.layers * s.tokens
    linear_params = s.layers * (s.hidden * (q + 2 * kv) + q * s.hidden + (3 if s.gated else 2) * s.hidden * f)
    return per_sample, 2 * FP8_CAST_BYTES * linear_params


def moe_factor(model: Model) -> float:
    return MOE_COMPUTE_FACTOR if shape(model).experts else 1.0


def expert_parallel_bytes(model: Model, micro_batch: int, num_gpus: int) -> float:
    """What an expert-parallel run (experts spread over the GPUs) would add, per GPU per pass, and this engine
    never runs: two all-to-alls a mixture-of-experts layer (tokens out to their experts, results back), in the
    forward and again in the backward, of each token's hidden state (16-bit) to each of its k experts, all but
    1/N of them on another GPU."""
    s = shape(model)
    if not s.experts or num_gpus <= 1:
        return 0.0
    per_token = 2 * 2 * s.experts_per_token * s.hidden * 2 * s.moe_layers
    return micro_batch * s.tokens * per_token * (num_gpus - 1) / num_gpus


# Why a sharding's path sets a mixture of experts' speed (measured, docs/measurements.md 2026-11-28): transformers'
# grouped expert products (its default experts implementation) run in the weights' dtype, which autocast does not
# reach (pytorch/pytorch#174763). With fp32 weights (DDP, one GPU) they fall back to one fp32 product per expert;
# FSDP's mixed precision gathers bf16 weights, which run one bf16 grouped product: 2x per FLOP on two architectures.
MOE_PATH = ("transformers' grouped expert products run in the weights' dtype, outside autocast: with fp32 weights "
            "(DDP, one GPU) one fp32 product an expert, with FSDP's bf16 weights one bf16 grouped product; measured "
            "2x apart per FLOP on OLMoE and Qwen-MoE, 2 x H200, docs/measurements.md 2026-11-28")


def moe_lines(model: Model, micro_batch: int, num_gpus: int, measured: bool = False, own: bool = False) -> list[str]:
    """What a prediction for a mixture of experts rests on, in words (`measured`: its architecture has
    measured rows, which fit what the factor leaves; `own`: this model's own rows set its speed,
    Predictor._own_rows)."""
    s = shape(model)
    if not s.experts:
        return []
    ep = expert_parallel_bytes(model, micro_batch, max(num_gpus, 8))
    band = f"band {MOE_BAND[0]:g}x-{MOE_BAND[1]:g}x"
    return [f"mixture of experts: {s.experts} experts, {s.experts_per_token} a token; compute from the "
            f"{s.active_params / 1e9:.3g}B active parameters, memory from all {s.params / 1e9:.3g}B (every "
            f"expert's weights, gradients and optimizer states on every GPU)",
            f"each active FLOP costs {MOE_COMPUTE_FACTOR:g}x a dense one (routing, grouped expert products): "
            + (f"an assumption; this architecture's measured rows fit the rest ({MOE_PATH})" if measured else
               f"an assumption; this model's own rows set its speed, a sharding's own where its rows run 1.5x "
               f"apart ({MOE_PATH}); {band} kept for it" if own else
               f"an assumption, unmeasured until a mixture of experts of this architecture is benchmarked; {band} "
               f"for it (FSDP or DDP: {MOE_PATH})"),
            "data-parallel and sharded settings only (every GPU holds every expert): no expert parallelism; "
            f"one would add all-to-alls of ~{ep / 1e9:.2g} GB per GPU per pass at {micro_batch} x {s.tokens} "
            f"tokens over {max(num_gpus, 8)} GPUs"]


def attention_share(model: Model) -> float:
    """The share of the compute term in attention's s x s products: what runs at attention kernels' speed
    rather than the matmuls' (a generation's own factor, engine/predict/generations.py)."""
    a = attention_flops_per_sample(model)
    return a / compute_flops_per_sample(model) if a else 0.0


def traffic_terms(model: Model, methods: Methods) -> dict[str, float]:
    """Memory-bound bytes moved per sample in one forward + backward (the roofline's memory term)."""
    s = shape(model)
    w = 1.0 if memory.mixed_precision(model) else 2.0
    k = recompute(model, methods)  # the recompute moves its bytes again
    terms: dict[str, float] = {}
    if s.family == "transformer" and s.inner:
        # Norms and residual adds on h, the activation on the MLP's width f (a gated MLP also multiplies two
        # f-wide tensors): 30h + 10f, which is LAYER_ELEMENTWISE_TRAFFIC x h for the classic f = 4h.
        per_token = 30 * s.hidden + 10 * s.inner + (6 * s.inner if s.gated else 0)
        terms["elementwise layers"] = k * per_token * s.layers * s.tokens * w
    elif s.family in ("transformer", "mamba"):
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
    logits = LOGIT_TRAFFIC * s.logit_positions * s.logit_width * (1 if w == 1 else 1.5)
    if methods.fused:
        terms["logits and loss (fused, chunked)"] = FUSED_LOGIT_TRAFFIC * logits
    else:
        terms["logits and loss"] = logits
    cast, _ = fp8_cast_bytes(model, methods)
    if cast:
        terms["fp8 casts (inputs, gradients)"] = cast
    return terms


def link_bytes_per_s(gpu: Gpu, num_gpus: int) -> float:
    """GPU-to-GPU rate per direction: the preset's figure is the bidirectional total. An NVLink bridge joins
    only its group of cards (nvlink_bridge_max_gpus; a "2-way" bridge, two): with more, traffic goes over the
    PCIe named in the preset. Cards without peer access (recent GeForce cards with NVIDIA's driver: p2p =
    false) send it through host memory, crossing PCIe twice: half its rate."""
    gbs = gpu.interconnect_gbs / 2
    bridge = _bridge(gpu)
    if bridge and num_gpus > bridge:
        gbs = pcie_gbs(gpu)
    if getattr(gpu, "p2p", None) is False:
        gbs = min(gbs, pcie_gbs(gpu) / 2)
    return gbs * 1e9 * LINK_EFFICIENCY


def link_name(gpu: Gpu, num_gpus: int) -> str:
    """What carries GPU-to-GPU traffic on this system, in words (link_bytes_per_s's rate is for it)."""
    bridge = _bridge(gpu)
    if getattr(gpu, "p2p", None) is False:
        return f"host-staged through host memory over PCIe {_pcie_gen(gpu)} (no peer-to-peer access)"
    if bridge and num_gpus > bridge:
        return f"PCIe {_pcie_gen(gpu)} (the NVLink bridge joins {bridge} cards only)"
    return gpu.interconnect


def _bridge(gpu: Gpu) -> int:
    """How many cards an NVLink bridge joins (0: no bridge, the GPUs' own links)."""
    return getattr(gpu, "nvlink_bridge_max_gpus", 0) or (2 if "2-way" in gpu.interconnect else 0)


def _pcie_gen(gpu: Gpu) -> str:
    """The host link's PCIe generation: the preset's, else that architecture's SXM boards'."""
    found = re.search(r"PCIe (\d)", gpu.interconnect)
    return found.group(1) if found else HOST_PCIE_BY_ARCHITECTURE.get(gpu.architecture, "4")


def host_bytes_per_s(gpu: Gpu, fraction: float = LINK_EFFICIENCY) -> float:
    """CPU <-> GPU rate per direction (offloading): the PCIe generation's rate x the fraction reached."""
    return pcie_gbs(gpu) * 1e9 * fraction


def pcie_gbs(gpu: Gpu) -> float:
    return PCIE_X16_GBS.get(_pcie_gen(gpu), PCIE_X16_GBS["4"])


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




def offload_kind(methods: Methods) -> str:
    return "fsdp" if methods.fsdp else "zero"


def host_kind(methods: Methods) -> str:
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


def json_field(text: Any, key: str) -> Any:
    return provenance_view(text).get(key)


