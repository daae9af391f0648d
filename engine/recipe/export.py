"""Turn a measured winner into settings a user can train with: Hugging Face `TrainingArguments` as JSON,
the DeepSpeed JSON or FSDP settings it needs, a torchrun launch script, a short explanation and a
machine-readable plan.json that `tui-planner verify` checks against a real training run.

    choice = pick(store, presets, "pythia-1b", "h100", 1)   # or pick(..., trial_id=ID)
    write(build(choice, presets, store.path), Path("out"))

The files carry exactly what the benchmark measured (micro-batch, accumulation, precision, TF32,
compile, checkpointing, sharding, offloading) plus the model preset's replication recipe (steps, schedule,
optimizer). Where Hugging Face cannot express the benchmark's setting, the plan says so in `notes`.
No torch here: a laptop without a GPU stack can export.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.bench import fast
from engine.data import formulas, safe, space
from engine.data.built import EXPERTS
from engine.data.errors import PlannerError
from engine.data.presets import Model, Presets, Training
from engine.data.runs import describe_run, run_key
from engine.data.store import Store, plain, provenance_of

FORMAT = "tui-planner-recipe/1"
TRAINING_ARGS, DEEPSPEED, LAUNCH, EXPLAIN, PLAN = (
    "training_args.json", "ds_config.json", "launch.sh", "EXPLAIN.txt", "plan.json")
ACCELERATE = "accelerate_config.yaml"  # an fp8 row's FP8 recipe (issue 42)

# A usable measurement: measured here, fits, timed, and not faster than the GPU can go.
# A usable row has every timing a recipe needs, positive and finite (a shared results file may hold anything).
_USABLE = (f"source = 'measured' AND feasible AND failure_kind IS NULL "
           f"AND isfinite(step_s) AND step_s > 0 AND isfinite(pass_s) AND pass_s > 0 AND isfinite(update_s) "
           f"AND update_s >= 0 AND isfinite(days) AND days > 0 AND micro_batch >= 1 AND grad_accum >= 1 "
           f"AND (mfu IS NULL OR mfu <= {formulas.IMPOSSIBLE_MFU} "
           # an fp8 row's MFU is against the 16-bit peak: its limit is its FP8 peak (engine/data/generations.py),
           # which trust.recheck and the sweep hold it to and mark 'impossible' past
           f"OR (coalesce(fp8, false) AND plausibility IS DISTINCT FROM 'impossible'))")


@dataclass
class Choice:
    """The trial to export, the fastest one with other methods, and how the cell's trials ended."""

    row: dict[str, Any]
    runner_up: dict[str, Any] | None
    counts: dict[str, int]  # by outcome (measured, dominated, oom, refused, ...), and 'usable'
    rank: int = 1  # 1: the fastest usable; more when --trial named a slower one


@dataclass
class Recipe:
    """The exported files, as data (write() puts them on disk)."""

    training_args: dict[str, Any]
    deepspeed: dict[str, Any] | None
    launch: str
    explain: str
    plan: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def label(row: dict[str, Any]) -> str:
    try:
        return space.Methods(bool(row["free_lunch"]), bool(row["activation_checkpointing"]), row["sharding"] or "none",
                             bool(row["offloading"]), fused=bool(row.get("fused")), fp8=bool(row.get("fp8"))).label
    except ValueError as e:  # a setting this version does not know, from a results file made elsewhere
        raise PlannerError(f"trial {str(row.get('trial_id'))[:40]}: {e}") from None


# --- choosing the trial ------------------------------------------------------------------------------


def pick(store: Store, presets: Presets, model: str | None, gpu: str | None, num_gpus: int | None,
         num_nodes: int = 1, trial_id: str | None = None) -> Choice:
    """The fastest usable measurement for a cell (or the trial asked for), the fastest one with other
    methods (the runner-up), and how the cell's trials ended (for the explanation)."""
    where = store.path or "the database"
    if trial_id:
        rows = store.query("SELECT * FROM trials WHERE trial_id = ?", [trial_id])
        if not rows:
            raise PlannerError(f"no trial {trial_id} in {where} (see `tui-planner results --db {where} --format json`)")
        row = rows[0]
        for name, want in (("model", model), ("gpu", gpu), ("num_gpus", num_gpus)):
            if want is not None and row[name] != want:
                raise PlannerError(f"trial {trial_id} is {row['model']} on {row['num_gpus']} x {row['gpu']}, "
                                   f"not {name} {want}")
        if row["source"] != "measured":
            raise PlannerError(f"trial {trial_id} is a {row['source']} row: only measured trials can be exported "
                               "(they carry the micro-batch and the timings verify checks)")
        if not store.query(f"SELECT 1 FROM trials WHERE trial_id = ? AND {_USABLE}", [trial_id]):
            why = row["failure_message"] or row["failure_kind"] or "it lacks a usable step, pass or update time"
            raise PlannerError(f"trial {trial_id} ({label(row)}) cannot be exported: {why}")
        model, gpu, num_gpus, num_nodes = row["model"], row["gpu"], row["num_gpus"], row["num_nodes"]
    if not (model and gpu and num_gpus):
        raise PlannerError("say which result to export: --model, --gpu and --num-gpus, or --trial ID")
    if model not in presets.models:
        raise PlannerError(f"unknown model {model!r} (known: {', '.join(presets.models)}); a model of your own "
                           "needs its preset: --presets FILE")
    if gpu != "cpu":
        presets.gpu(gpu)
    # Only rows of the model's run (the step they time is this run's step: engine/data/runs.py).
    cell = "model = ? AND gpu = ? AND num_gpus = ? AND num_nodes = ? AND (training_run IS NULL OR training_run = ?)"
    args = [model, gpu, num_gpus, num_nodes, run_key(presets.model(model))]
    usable = store.query(f"SELECT * FROM trials WHERE {cell} AND {_USABLE} ORDER BY step_s, created_at", args)
    counts = {r["k"]: r["n"] for r in store.query(
        f"SELECT coalesce(failure_kind, 'measured') AS k, count(*) AS n FROM trials "
        f"WHERE {cell} AND source = 'measured' GROUP BY k", args)}
    counts["usable"] = len(usable)
    nodes = f" x {num_nodes} nodes" if num_nodes != 1 else ""
    if not usable:
        have = store.query("SELECT DISTINCT gpu, num_gpus, num_nodes FROM trials WHERE model = ? AND "
                           f"{_USABLE} ORDER BY gpu, num_gpus", [model])
        listed = ", ".join(f"{r['num_gpus']} x {r['gpu']}" + (f" x {r['num_nodes']} nodes" if r["num_nodes"] != 1
                                                                else "") for r in have) or "none"
        ended = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if k != "usable")
        raise PlannerError(
            f"no usable measured result for {model} on {num_gpus} x {gpu}{nodes} in {where}"
            + (f" (its measured trials: {ended})" if ended else "")
            + f". Measured cells for {model}: {listed}. Measure this one with `tui-planner bench --model {model} "
              f"--gpus {num_gpus} --db FILE`, then export with --db FILE.")
    rank = next(i for i, r in enumerate(usable) if r["trial_id"] == trial_id) if trial_id else 0
    others = [r for r in usable if label(r) != label(usable[rank])]
    return Choice(usable[rank], others[0] if others else None, counts, rank + 1)


# --- what the files say ----------------------------------------------------------------------------


def schedule(t: Training, model_id: str) -> dict[str, Any]:
    """The preset's schedule in Hugging Face's names: 'cosine to 0.1x' -> cosine_with_min_lr, min_lr_rate
    0.1 (decay to 10% of the peak); 'cosine to 1e-5' -> min_lr 1e-5."""
    name = t.schedule.strip().lower()
    if name == "constant":
        return {"lr_scheduler_type": "constant_with_warmup" if t.warmup_steps else "constant"}
    if name in ("linear", "cosine"):
        return {"lr_scheduler_type": name}
    m = re.fullmatch(r"cosine to ([0-9.]+(?:e-?[0-9]+)?)(x?)", name)
    if m:
        key = "min_lr_rate" if m.group(2) else "min_lr"
        return {"lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": {key: float(m.group(1))}}
    raise PlannerError(f"model {model_id}: schedule {t.schedule!r} has no Hugging Face equivalent here; expected "
                       "constant, linear, cosine, 'cosine to 0.1x' or 'cosine to 1e-5'")


def _prov(row: dict) -> dict:
    return provenance_of(row.get("provenance"))


def without_dense_masks(prov: dict) -> bool:
    """Whether the measurement ran SDPA without a dense mask tensor (modeling.sdpa_without_dense_masks)."""
    return prov.get("causal_mask") == "is_causal flag" or prov.get("attention_mask") == "none"


def training_args(row: dict, model: Model, device: str, notes: list[str]) -> dict[str, Any]:
    """TrainingArguments kwargs: the measured micro-batch and methods, the preset's recipe."""
    t = model.training
    world = row["num_gpus"] * row["num_nodes"]
    if row["micro_batch"] * row["grad_accum"] * world != t.batch_size:
        raise PlannerError(f"trial {row['trial_id']}: micro-batch {row['micro_batch']} x accumulation "
                           f"{row['grad_accum']} x {world} GPUs is not {model.id}'s batch of {t.batch_size}")
    ckpt = bool(row["activation_checkpointing"])
    mode = _prov(row).get("compile_mode") if row["compile"] else None  # torch.compile's, when not its default
    if mode is not None and mode not in (*space.COMPILE_MODES, "default"):  # a shared file's text: never passed on
        notes.append(f"the torch.compile mode recorded with this trial ({safe.line(mode, 60)}) is not one torch "
                     f"knows ({', '.join(space.COMPILE_MODES)}): left at torch's default")
        mode = None
    args: dict[str, Any] = {
        "output_dir": "checkpoints",
        "per_device_train_batch_size": row["micro_batch"],
        "gradient_accumulation_steps": row["grad_accum"],
        "max_steps": t.steps,
        "learning_rate": t.lr,
        **schedule(t, model.id),
        "warmup_steps": t.warmup_steps,
        "weight_decay": t.weight_decay,
        "adam_beta1": t.betas[0], "adam_beta2": t.betas[1], "adam_epsilon": t.eps,
        "max_grad_norm": t.max_grad_norm or 0.0,  # 0 turns clipping off
        "optim": "adamw_torch_fused" if row["free_lunch"] and device == "cuda" else "adamw_torch",
        "bf16": t.precision == "bf16", "fp16": t.precision == "fp16",
        "tf32": bool(row["tf32"]) and device == "cuda",
        "torch_compile": bool(row["compile"]),
        **({"torch_compile_mode": mode} if mode else {}),
        "ddp_find_unused_parameters": False,  # every parameter gets a gradient (HF would search each step)
        "dataloader_drop_last": True,
        "logging_steps": 10,
        "save_strategy": "steps", "save_steps": 1000,
        "report_to": "none",
    }
    if ckpt and model.checkpointing != "stages":
        # The name transformers 4.x and 5.x both read (5.2x also calls it activation_checkpointing).
        args["gradient_checkpointing"] = True
        args["gradient_checkpointing_kwargs"] = {"use_reentrant": False}  # as the benchmark
    elif ckpt:
        notes.append(f"{model.hf_class} has no Hugging Face gradient checkpointing: the benchmark checkpointed "
                     f"each {model.fsdp_wrap or 'block in its _no_split_modules'} (engine.bench.modeling.enable_checkpointing); do the same in your script")
    if t.optimizer == "adam" and t.weight_decay and not (row["sharding"] or "").startswith("zero"):
        notes.append(f"the recipe names Adam with weight decay {t.weight_decay:g}; Hugging Face's optimizers decay "
                     "decoupled (AdamW): the same speed, slightly different updates")
    if row["compile"] and without_dense_masks(_prov(row)):
        notes.append("the benchmark gave compiled SDPA no dense mask (is_causal, or none for an encoder; "
                     "transformers builds one under torch.compile before torch 2.14): call "
                     "engine.bench.modeling.sdpa_without_dense_masks() before building the model, as launch.sh says, "
                     "or the passes are slower. It applies as in the benchmark: batches without an attention_mask "
                     "(no padding); with gradient checkpointing (no cache), unpacked=True says each row is one "
                     "sequence: leave it out if your data packs several documents into a row")
    up = _prov(row).get("step_up")  # (a shared file's: used only where it is exactly what the engine writes)
    searched = up.get("from_micro_batch") if isinstance(up, dict) and up.get("outcome") == "faster" else None
    if (row["compile"] and isinstance(searched, int) and not isinstance(searched, bool) and searched > 0
            and searched * 2 == row["micro_batch"] == up.get("micro_batch")):
        notes.append(f"micro-batch {row['micro_batch']} was measured compiled (bench --step-up); uncompiled, the "
                     f"benchmark's search fitted {searched}: with torch_compile off, or where compilation fails, run "
                     f"{searched} x {row['grad_accum'] * row['micro_batch'] // searched} instead")
    if row.get("fused"):
        # liger-kernel's fused kernels. The Trainer's use_liger_kernel applies liger's own patch, which exists only
        # for the model types liger knows; for any other (GPT-NeoX/Pythia, OPT, ...) it changes nothing, and what
        # the benchmark ran was the planner's own patch (engine.bench.fast.apply_fused), said in the row. A compiled
        # row ran the fused loss only (its liger_kernel_config), the rest left to torch.compile.
        fused = _prov(row).get("fused")
        fused = fused if isinstance(fused, dict) else {}
        compiled, own = bool(row["compile"]), fast.own_patch(fused)
        if own:
            # what the benchmark ran: a compiled row measured before fused left the norms to torch.compile swapped them
            compiled_kernels = compiled and not fast.swapped_norms(fused)
            notes.append("fused: liger-kernel has no patch for this model type, so TrainingArguments' use_liger_kernel "
                         "would change nothing; the benchmark ran the planner's own (" +
                         ("the loss by liger's fused linear cross-entropy, the norms left to torch.compile): call "
                          "engine.bench.fast.apply_fused(model, 'causal-lm', compiled=True)" if compiled_kernels else
                          "LayerNorm -> LigerLayerNorm, the loss by liger's fused linear cross-entropy): call "
                          "engine.bench.fast.apply_fused(model, 'causal-lm')") +
                         " on the model before training, or the step is the unfused one")
        else:
            args["use_liger_kernel"] = True
            if isinstance(fused.get("liger_kernel_config"), dict):
                # TrainingArguments has the field from transformers 4.53 (PR #38911; the bench extra's floor is older)
                args["liger_kernel_config"] = dict(fused["liger_kernel_config"])
                notes.append("fused: training_args.json's liger_kernel_config (liger's kernels the benchmark ran: "
                             "the loss only, the rest left to torch.compile) needs transformers 4.53 or later")
        if compiled and not own:  # apply_fused does it itself
            notes.append("fused under torch.compile: liger's fused loss runs untraced (Dynamo cannot trace its in-place "
                         "addmm on torch 2.11): call engine.bench.fast.keep_fused_loss_eager() before training, as the "
                         "benchmark did")
    if row.get("fp8"):
        # transformers sets the mixed precision from bf16/fp16 (TrainingArguments.mixed_precision), which would
        # override accelerate's fp8: off here, the FP8 recipe comes from accelerate (fp8_env, accelerate_config.yaml),
        # whose autocast runs what stays 16-bit in bf16
        args["bf16"] = args["fp16"] = False
        notes.append("fp8 CHANGES NUMERICS: the linear layers' matrix products run in FP8 (torchao float8, tensorwise "
                     "scaling) through accelerate's mixed_precision fp8 with the torchao backend (AO); launch.sh sets "
                     "it in the environment, accelerate_config.yaml says the same for `accelerate launch`; bf16 is off "
                     "in training_args.json only so that it does not override fp8. Check the loss against a bf16 run")
    if row["sharding"] and row["sharding"].startswith("zero"):
        args["deepspeed"] = DEEPSPEED
    elif row["sharding"] and row["sharding"].startswith("fsdp"):
        args["fsdp"] = True
        args["fsdp_config"] = {
            "version": 2,  # PyTorch's fully_shard, as the benchmark
            "reshard_after_forward": row["sharding"] == "fsdp3",  # True: FULL_SHARD; False: SHARD_GRAD_OP
            "cpu_offload": bool(row["offloading"]),
            "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        }
        if row["grad_accum"] > 1:
            # The benchmark reduces (and with offload copies to the CPU and adds there) the gradients after every
            # micro-batch (FsdpStepper). The Trainer, through accelerate's no_sync, would reduce once a step and
            # hold unsharded fp32 gradients on each GPU meanwhile: another time and another memory than measured.
            # sync_each_batch runs what was measured.
            args["accelerator_config"] = {"gradient_accumulation_kwargs": {"sync_each_batch": True}}
            notes.append("FSDP reduces the gradients after every micro-batch, as the benchmark measured "
                         "(accelerator_config: sync_each_batch). Without it the Trainer reduces once a step and "
                         "holds each GPU's full gradients in fp32 (4 bytes a parameter) meanwhile: not benchmarked, "
                         "and faster where they fit (with offload, Pythia-1B on 2 x H200: 12.1 s a step against 19.4 "
                         "in the Trainer, 2026-11-28)")
        if model.fsdp_wrap:
            args["fsdp_config"]["transformer_layer_cls_to_wrap"] = [model.fsdp_wrap]
        else:  # accelerate then wraps what the model's _no_split_modules names, as the benchmark did
            notes.append(f"FSDP wraps the blocks {model.hf_class}._no_split_modules names (accelerate's default, "
                         "as in the benchmark)")
        if row["compile"]:
            notes.append("torch.compile under FSDP compiles each block on its own (Dynamo guards on its layer index); "
                         "past torch._dynamo.config.recompile_limit (8) the other blocks train uncompiled (measured: "
                         "FSDP 5-7% slower, fp8 under FSDP a third slower). Call "
                         "engine.bench.steppers.allow_a_compile_per_block(NUMBER_OF_BLOCKS) before training, as the "
                         "benchmark did (it sets the limit to the blocks + 8)")
    if row["sharding"] in (None, "none") and any(model.config.get(k) for k in EXPERTS):
        notes.append("a mixture of experts with fp32 weights (no sharding): transformers runs its expert products "
                     "outside autocast, in the weights' dtype, so here in fp32, one product an expert; FSDP's mixed "
                     "precision gathers bf16 weights and runs them as one bf16 grouped product, measured 2x faster per "
                     "FLOP on two MoE architectures (docs/measurements.md, 2026-11-28). On 2 or more GPUs an FSDP row "
                     "of this model is the faster recipe; on one GPU this engine measured no other path")
    if device == "cpu":
        for_device(args, None, "cpu", notes)
    return args


def deepspeed_config(row: dict, model: Model, device: str) -> dict[str, Any] | None:
    """The ZeRO stage and offload the benchmark ran, DeepSpeed's own Adam as it used; "auto" where the
    Trainer fills a value from training_args.json, so the two files cannot disagree."""
    if not (row["sharding"] or "").startswith("zero"):
        return None
    t, stage, pin = model.training, int(row["sharding"][-1]), device == "cuda"
    zero: dict[str, Any] = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True}
    if row["offloading"]:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": pin}
        if stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": pin}
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto", "gradient_clipping": "auto",
        "zero_optimization": zero,
        "optimizer": {"type": "AdamW" if t.optimizer == "adamw" else "Adam",
                      "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto",
                                 "adam_w_mode": t.optimizer == "adamw"}},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 1000, "wall_clock_breakdown": False,
    }
    if t.precision == "bf16":
        cfg["bf16"] = {"enabled": "auto"}
    elif t.precision == "fp16" and device == "cuda":
        cfg["fp16"] = {"enabled": "auto", "initial_scale_power": 16}
    return cfg


def for_device(args: dict, ds: dict | None, device: str, notes: list[str]) -> None:
    """Settings the CPU cannot run, degraded in place, each with a note (on a GPU nothing changes)."""
    if device != "cpu":
        return
    args["use_cpu"] = True
    if args.get("fp16"):
        args["fp16"] = False
        notes.append("fp16 needs a CUDA GPU (loss scaling): on the CPU this trains in fp32")
        if ds is not None:
            ds.pop("fp16", None)
    if args.get("tf32"):
        args["tf32"] = False
        notes.append("TF32 is a GPU setting: off on the CPU")
    if args.get("optim") == "adamw_torch_fused":
        args["optim"] = "adamw_torch"
        notes.append("fused AdamW is the benchmark's CUDA kernel: plain AdamW on the CPU")
    if args.pop("use_liger_kernel", None):
        args.pop("liger_kernel_config", None)
        notes.append("liger-kernel's fused kernels are Triton kernels for CUDA GPUs: off on the CPU")
    if ds is not None:
        cpu_deepspeed_config(ds, notes)


def cpu_deepspeed_config(ds: dict, notes: list[str]) -> None:
    """DeepSpeed on the CPU, as the CPU benchmark runs it (engine.bench.steppers.cpu_deepspeed): nothing
    pinned, and torch's AdamW instead of DeepSpeed's Adam, a C++ op it would compile first (minutes)."""
    for section in ("offload_optimizer", "offload_param"):
        if section in ds["zero_optimization"]:
            ds["zero_optimization"][section]["pin_memory"] = False
    if "optimizer" in ds:
        ds["optimizer"]["params"]["torch_adam"] = True
        notes.append("DeepSpeed's own Adam is a C++ op it compiles on first use: on the CPU this trains with "
                     "torch's AdamW, as the CPU benchmark does")


# --- the files -------------------------------------------------------------------------------------


def fp8_env(plan: dict) -> dict[str, str]:
    """The environment accelerate reads an FP8 recipe from (what `accelerate launch --config_file` sets from
    fp8_config: accelerate.utils.launch.setup_fp8_env; read back by AORecipeKwargs): mixed precision fp8 with the
    torchao backend, inner dimensions padded for torch._scaled_mm (engine/bench/fast.py's trials pad them too). FSDP
    all-gathers the weights in float8 where the measured row did (its fp8 record's all_gather; accelerate then
    precomputes the scales after each optimizer step, as the benchmark), else in 16 bits, as rows measured before
    2026-11-28 did. Empty for a plan without fp8."""
    if not plan.get("fp8"):
        return {}
    float8_gather = space.fsdp_gathers_in_float8(plan.get("sharding"), plan.get("offloading"),
                                                 (plan.get("provenance") or {}).get("fp8"))
    return {"ACCELERATE_MIXED_PRECISION": "fp8", "ACCELERATE_FP8_BACKEND": "AO", "ACCELERATE_FP8_PAD_INNER_DIM": "true",
            "ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER": "true" if float8_gather else "false"}


def accelerate_config(plan: dict) -> str | None:
    """accelerate_config.yaml for an fp8 plan (`accelerate launch --config_file`): the keys accelerate 1.x's
    `accelerate config` writes for the torchao backend (mixed_precision: fp8; fp8_config: backend AO,
    enable_fsdp_float8_all_gather, pad_inner_dim). None without fp8."""
    env = fp8_env(plan)
    if not env:
        return None
    world = int(plan.get("world_size") or 1)
    kind = "FSDP" if str(plan.get("sharding") or "").startswith("fsdp") else "MULTI_GPU" if world > 1 else "NO"
    return ("# tui-planner export: the FP8 recipe (torchao float8 training; changes numerics). FSDP's own settings\n"
            "# are in training_args.json (fsdp_config), which the Trainer passes to accelerate.\n"
            "compute_environment: LOCAL_MACHINE\n"
            f"distributed_type: {kind}\n"
            "mixed_precision: fp8\n"
            "fp8_config:\n"
            "  backend: AO\n"
            f"  enable_fsdp_float8_all_gather: {env['ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER']}\n"
            "  pad_inner_dim: true\n"
            "num_machines: 1\n"
            f"num_processes: {world}\n")


def build(choice: Choice, presets: Presets, db: str | Path | None) -> Recipe:
    row, runner_up = choice.row, choice.runner_up
    model = presets.model(row["model"])
    device = "cpu" if row["gpu"] == "cpu" else "cuda"
    notes: list[str] = []
    args = training_args(row, model, device, notes)
    ds = deepspeed_config(row, model, device)
    if ds is not None and device == "cpu":
        cpu_deepspeed_config(ds, notes)
    world = row["num_gpus"] * row["num_nodes"]
    prov = _prov(row)
    keep = ("trial_id", "run_id", "source", "model", "gpu", "num_gpus", "num_nodes", "free_lunch", "compile", "tf32",
            "attention", "kernel", "activation_checkpointing", "sharding", "offloading", "fused", "fp8", "numerics",
            "micro_batch", "grad_accum",
            "pass_s", "update_s", "step_s", "days", "mfu", "plausibility", "peak_memory_gb", "created_at")
    plan = {
        "format": FORMAT,
        "exported_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "db": str(Path(db).resolve()) if db else None,
        **{k: plain(row.get(k)) for k in keep},
        "methods": label(row),
        "device": device,
        "world_size": world,
        "batch_size": model.training.batch_size,
        "steps": model.training.steps,
        "attn_implementation": row["attention"],
        "checkpointing": (prov.get("checkpointing") or model.checkpointing)
        if row["activation_checkpointing"] else None,
        "changes_numerics": bool(row.get("fp8")),
        "files": {"training_args": TRAINING_ARGS, "deepspeed": DEEPSPEED if ds else None,
                  "accelerate": ACCELERATE if row.get("fp8") else None},
        "runner_up": None if runner_up is None else {
            **{k: plain(runner_up.get(k)) for k in ("trial_id", "micro_batch", "grad_accum", "step_s", "days", "mfu")},
            "methods": label(runner_up)},
        "trial_counts": choice.counts,
        "rank": choice.rank,
        "notes": notes,
        "provenance": prov,
        "model_preset": plain(model),
        "run": describe_run(model),
        "training_run": run_key(model),
    }
    # The row's days are for the steps it was measured for; this run may be longer or shorter (the same
    # step: engine/data/runs.py).
    scale = model.training.steps / (row.get("steps") or model.training.steps)
    if plan["days"] is not None:
        plan["days"] = float(plan["days"]) * scale
    if plan["runner_up"] is not None and plan["runner_up"].get("days") is not None:
        plan["runner_up"]["days"] = float(plan["runner_up"]["days"]) * scale
    return Recipe(args, ds, _launch(plan, model), _explain(plan, model, presets), plan, notes)


def fsdp_offload(plan: dict) -> bool:
    """Whether a plan is FSDP with its parameters offloaded to the host (its optimizer steps there)."""
    return str(plan.get("sharding") or "").startswith("fsdp") and bool(plan.get("offloading"))


def _launch(plan: dict, model: Model) -> str:
    """launch.sh. Every value from the database or the presets is data: in a comment it cannot end the line
    (safe.comment), on a command line it is a validated number or setting, quoted (a shared results file
    must not run anything)."""
    c = safe.comment
    n, nodes = int(plan["num_gpus"]), int(plan["num_nodes"])
    cell = "the CPU" if plan["gpu"] == "cpu" else f"{n} x {c(plan['gpu'])}" + (f" x {nodes} nodes" if nodes != 1 else "")
    if nodes == 1:
        where = f"--standalone --nnodes 1 --nproc-per-node {n}"
        acc = f"accelerate launch --num_processes {n}"
    else:
        where = (f"--nnodes {nodes} --nproc-per-node {n} "
                 f"--node-rank \"${{NODE_RANK:?set NODE_RANK (0..{nodes - 1})}}\" "
                 "--rdzv-backend c10d --rdzv-endpoint \"${MASTER_ADDR:?set MASTER_ADDR}:${MASTER_PORT:-29500}\"")
        acc = (f"accelerate launch --num_processes {n * nodes} --num_machines {nodes} --machine_rank $NODE_RANK "
               "--main_process_ip $MASTER_ADDR --main_process_port ${MASTER_PORT:-29500}")
    extra = ""
    if plan["files"]["deepspeed"]:
        extra = f"# training_args.json names {DEEPSPEED} (ZeRO-{c(plan['sharding'][-1])}), read from this directory.\n"
    elif (plan["sharding"] or "").startswith("fsdp"):
        extra = "# training_args.json carries the FSDP settings (fsdp, fsdp_config).\n"
    # The model line is Python the reader pastes: the class and the attention go in only as names (a shared
    # file's `attention` could hold `sdpa"); os.system("...`), else the line says what was left out.
    attn = plan["attn_implementation"]
    cls = model.hf_class if model.hf_class.isidentifier() else "AutoModelForCausalLM"
    odd_cls = "" if cls == model.hf_class else "  # the preset's hf_class is not a Python name: yours here"
    if attn and attn != "none" and safe.is_attention(attn):
        model_line = f"#   model = {cls}._from_config(config, attn_implementation=\"{attn}\"){odd_cls}"
    else:
        model_line = f"#   model = {cls}._from_config(config){odd_cls}"
        if attn and attn != "none":
            model_line += ("\n#   (the attention recorded with this trial is not a name transformers takes: left "
                           "out; plan.json holds it)")
    if plan.get("compile") and without_dense_masks(plan.get("provenance") or {}):
        call = ("sdpa_without_dense_masks(unpacked=True)  # one sequence per row (no packing), as measured"
                if plan.get("activation_checkpointing") else
                "sdpa_without_dense_masks()  # compiled attention without a dense mask, as measured")
        model_line = "#   from engine.bench.modeling import sdpa_without_dense_masks\n#   " + call + "\n" + model_line
    # The CUDA allocator the benchmark ran with (recorded since 2026-11-23); yours wins if set.
    alloc = ""
    conf = (plan.get("provenance") or {}).get("alloc_conf")
    if conf and isinstance(conf, str) and safe.ALLOC_CONF_PATTERN.fullmatch(conf):
        alloc = (f'if [ -z "${{PYTORCH_CUDA_ALLOC_CONF:-}}" ]; then export PYTORCH_CUDA_ALLOC_CONF={shlex.quote(conf)}; fi\n')
    elif conf:
        alloc = "# The allocator setting recorded with this trial is not one PyTorch reads; it is left out.\n"
    if fsdp_offload(plan) and plan.get("world_size", 1) > 1:
        # Clipping offloaded gradients all-reduces their norm on the CPU: accelerate adds gloo beside NCCL
        # only when these say FSDP offload, and transformers sets them too late (after the process group).
        alloc += "export ACCELERATE_USE_FSDP=true FSDP_OFFLOAD_PARAMS=true  # gloo beside NCCL for CPU tensors\n"
    # torchrun gives each rank one CPU thread unless told; the benchmark gives its ranks half the host's cores between
    # them, all of them for FSDP offload (engine.bench.environment.cpu_threads_per_rank)
    if fsdp_offload(plan):
        cores, words = "$(nproc)", "the cores, shared by the ranks (FSDP offload steps on the host)"
    else:
        cores, words = "$(nproc) / 2", "half the cores, shared by the ranks"
    threads = f"$(( {cores} / {n} > 0 ? {cores} / {n} : 1 ))"
    alloc += (f'if [ -z "${{OMP_NUM_THREADS:-}}" ]; then export OMP_NUM_THREADS={threads}; fi  '
              f"# as the benchmark: {words}\n")
    fp8 = fp8_env(plan)
    if fp8:  # fixed names and values of ours, no data from the row
        alloc += ("# fp8 (changes numerics): accelerate's FP8 recipe, torchao backend (as accelerate_config.yaml)\n"
                  "export " + " ".join(f"{k}={v}" for k, v in fp8.items()) + "\n")
    return f"""#!/usr/bin/env bash
# {c(model.name)} on {cell}: {c(plan['methods'])}, micro-batch \
{int(plan['micro_batch'])} x {int(plan['grad_accum'])} accumulation
# (tui-planner export, trial {c(plan['trial_id'])}). Expected: {float(plan['days']):.3g} days.
#
# Usage: bash launch.sh YOUR_TRAIN.py [ARGS...]
# Your script runs in this directory, builds the model and the data, and trains with
{model_line}
#   args = TrainingArguments(**json.load(open("training_args.json")))
#   Trainer(model=model, args=args, train_dataset=...).train()
{extra}# Check the speed first: tui-planner verify DIR (trains these settings on random data).
# The same with Accelerate: {acc} YOUR_TRAIN.py
set -euo pipefail
{alloc}script=$(realpath "${{1:?usage: bash launch.sh YOUR_TRAIN.py [ARGS...]}}"); shift
cd "$(dirname "$(realpath "$0")")"
exec torchrun {where} "$script" "$@"
"""


def _explain(plan: dict, model: Model, presets: Presets) -> str:
    gpu = "the CPU" if plan["gpu"] == "cpu" else presets.gpu(plan["gpu"]).name
    prov = plan["provenance"]
    versions = prov.get("versions") or {}
    stack = ", ".join(f"{k} {versions[k]}" for k in ("torch", "transformers", "deepspeed") if k in versions)
    counts = plan["trial_counts"]
    others = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if k not in ("measured", "usable"))
    mfu = f", MFU {plan['mfu']:.1%} ({plan['plausibility']})" if plan["mfu"] is not None else ""
    cell = "the CPU" if plan["gpu"] == "cpu" else f"{plan['num_gpus']} x {gpu}"
    cell += f" x {plan['num_nodes']} nodes" if plan["num_nodes"] != 1 else ""
    world = plan["world_size"]
    why = (f"Why: the fastest of {counts['usable']} usable measurements" if plan["rank"] == 1 else
           f"Why: named with --trial; number {plan['rank']} of {counts['usable']} usable measurements")
    lines = [
        f"{model.name} on {cell}: {plan['methods']}",
        f"  micro-batch {plan['micro_batch']} per GPU x {plan['grad_accum']} accumulation x {world} "
        f"GPU{'s' if world > 1 else ''} = batch {plan['batch_size']}; {plan['steps']:,} steps",
        f"  step {plan['step_s']:.4g} s (pass {plan['pass_s']:.4g} s x {plan['grad_accum']} + update "
        f"{plan['update_s']:.4g} s) -> {plan['days']:.3g} days{mfu}",
        f"  measured {prov.get('measured_at') or plan['created_at']} on {prov.get('device') or gpu}"
        + (f" ({stack})" if stack else "") + f", trial {plan['trial_id']}",
        "",
        f"{why} for this cell in {plan['db']}" + (f" (besides {others} trials)" if others else "") + ".",
    ]
    lines += ["  " + s for s in _method_lines(plan, model)]
    if plan.get("fused"):
        fused = (plan.get("provenance") or {}).get("fused")
        loss_only = plan.get("compile") and isinstance(fused, dict) and fused.get("covers") == [fast.LOSS_KERNEL]
        lines.append("  fused: liger-kernel's " + ("fused linear cross-entropy (the logits never held; the norms and "
                                                   "activations left to torch.compile)" if loss_only
                                                   else "fused kernels") + ": the same maths within bf16 rounding")
    if plan.get("fp8"):
        lines.append("  fp8 CHANGES NUMERICS: the linear layers' matrix products in FP8 (torchao float8 through "
                     "accelerate, accelerate_config.yaml); not the same training as bf16: compare the loss"
                     + (f" (measured: {plan['numerics']})" if plan.get("numerics") else ""))
    ru = plan["runner_up"]
    if ru:
        slower = ru["step_s"] / plan["step_s"] - 1
        name = "Runner-up" if plan["rank"] == 1 else "Fastest other setting"
        lines += ["", f"{name}: {ru['methods']}, micro-batch {ru['micro_batch']} x {ru['grad_accum']}: "
                      f"{ru['days']:.3g} days ({slower:+.1%})" + (f", MFU {ru['mfu']:.1%}" if ru["mfu"] else "")
                  + f", trial {ru['trial_id']}."]
    else:
        lines += ["", "Runner-up: none (no other setting was measured usable for this cell)."]
    lines += _price_lines(plan, presets)
    files = [f"{TRAINING_ARGS} (Hugging Face TrainingArguments)"]
    if plan["files"]["deepspeed"]:
        files.append(f"{DEEPSPEED} (DeepSpeed; \"auto\" values come from {TRAINING_ARGS})")
    if plan["files"].get("accelerate"):
        files.append(f"{ACCELERATE} (accelerate's FP8 recipe, torchao; launch.sh sets the same in the environment)")
    files += [f"{LAUNCH} (torchrun)", f"{PLAN} (the source trial, for verify)"]
    lines += ["", "Files: " + ", ".join(files) + "."]
    if plan["notes"]:
        lines += ["", "Where the files differ from the benchmark:"] + [f"  - {n}" for n in plan["notes"]]
    lines += ["", f"Check: `tui-planner verify DIR` trains these settings for a few steps on random data and fails "
                  f"when the steady step time is more than 5% from {plan['step_s']:.4g} s."]
    # Each entry is one line: a line break or an escape in a value from the file (a trial id, a device, a
    # failure kind) is written out, never a line of its own (EXPLAIN.txt and `export`'s output).
    return "\n".join(safe.line(ln, limit=100_000) for ln in lines) + "\n"


def _price_lines(plan: dict, presets: Presets, today: dt.date | None = None) -> list[str]:
    """What this hardware costs, each price with its date and source (stale after 12 months, with how to
    give today's), and the system sold to hold it, or why none is."""
    if plan["gpu"] == "cpu" or plan["gpu"] not in presets.gpus:
        return []
    today = today or dt.date.today()
    g = presets.gpu(plan["gpu"])
    n = plan["num_gpus"]

    def priced(p) -> str:
        stale = (" - STALE, older than 12 months: give today's with `rank --price ID=USD` or a presets file"
                 if p.stale(today) else "")
        return f"${p.usd:,.0f} ({p.date.isoformat()}; {p.source}){stale}"

    if g.price is None:
        return ["", f"Price: the {g.id} preset has none."]
    lines = ["", f"Price: {g.name} {priced(g.price)} a GPU."]
    systems = presets.systems_for(g.id, n)
    if systems:
        s = systems[0]
        lines.append(f"  {n} in a {s.name} ({s.id}): the system {priced(s.price)}, "
                     f"${s.price.usd + n * g.price.usd:,.0f} in all" + (" per node" if plan["num_nodes"] != 1 else "")
                     + ".")
    else:
        lines.append(f"  {n} x {g.id} is not sold as a system: {presets.why_no_system(g.id, n)}.")
    return lines


def _method_lines(plan: dict, model: Model) -> list[str]:
    t = model.training
    out = []
    if plan["free_lunch"]:
        parts = ["torch.compile" if plan["compile"] else "no torch.compile (" + (
            "DeepSpeed's engine does not compose with it" if (plan["sharding"] or "").startswith("zero")
            else "off in this sweep or for this model") + ")",
                 f"attention {plan['attn_implementation']}"
                 + (f" (kernel: {plan['kernel']})" if plan["kernel"] else "")]
        if plan["tf32"]:
            parts.append("TF32")
        if plan["device"] == "cuda":
            parts.append("fused AdamW")
        out.append("free-lunch: " + ", ".join(parts))
    else:
        out.append("naive: eager attention, no compile, no TF32 (the baseline)")
    out.append(f"{t.precision} " + ("mixed precision (fp32 master weights)" if t.precision != "fp32" else "throughout"))
    saving = []
    if plan["activation_checkpointing"]:
        saving.append("activation checkpointing")
    if plan["sharding"] and plan["sharding"] != "none":
        kind = (f"DeepSpeed ZeRO-{plan['sharding'][-1]}" if plan["sharding"].startswith("zero")
                else f"FSDP2 ({'FULL_SHARD' if plan['sharding'] == 'fsdp3' else 'SHARD_GRAD_OP'})")
        saving.append(kind)
    if plan["offloading"]:
        saving.append("CPU offload")
    if saving:
        out.append("memory-saving: " + ", ".join(saving) + f" (fits micro-batch {plan['micro_batch']})")
    else:
        out.append(f"no memory-saving methods: micro-batch {plan['micro_batch']} fits without them")
    return out


def write(recipe: Recipe, out: Path) -> list[Path]:
    """Write the files into `out` (created; existing recipe files are replaced, others left alone)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise PlannerError(f"{out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    for stale in (DEEPSPEED, "verify.json"):  # a previous export's ZeRO config or verdict must not linger
        (out / stale).unlink(missing_ok=True)
    (out / ACCELERATE).unlink(missing_ok=True)  # nor a previous export's FP8 recipe
    files = {TRAINING_ARGS: _json(recipe.training_args), LAUNCH: recipe.launch, EXPLAIN: recipe.explain,
             PLAN: _json(recipe.plan)}
    if recipe.deepspeed is not None:
        files[DEEPSPEED] = _json(recipe.deepspeed)
    acc = accelerate_config(recipe.plan)
    if acc is not None:
        files[ACCELERATE] = acc
    paths = []
    for name, text in files.items():
        path = out / name
        path.write_text(text)
        paths.append(path)
    (out / LAUNCH).chmod(0o755)
    return paths


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


# --- reading an export back --------------------------------------------------------------------------


def load(directory: str | Path) -> tuple[dict, dict, dict | None]:
    """plan.json, training_args.json and ds_config.json (or None) of an export; PlannerError if broken."""
    d = Path(directory)
    if not d.is_dir():
        raise PlannerError(f"{d}: no such directory (make one with `tui-planner export ... --out {d}`)")

    def read(name: str) -> dict:
        path = d / name
        if not path.is_file():
            raise PlannerError(f"{d}: no {name} here; is it a directory `tui-planner export` wrote?")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise PlannerError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise PlannerError(f"{path}: expected a JSON object")
        return data

    plan = read(PLAN)
    if plan.get("format") != FORMAT:
        raise PlannerError(f"{d / PLAN}: format {plan.get('format')!r}, expected {FORMAT!r}")
    for key in ("trial_id", "model", "gpu", "num_gpus", "micro_batch", "grad_accum", "step_s", "model_preset"):
        if plan.get(key) is None:
            raise PlannerError(f"{d / PLAN}: missing {key!r}")
    args = read(TRAINING_ARGS)
    ds = read(args["deepspeed"]) if isinstance(args.get("deepspeed"), str) else None
    return plan, args, ds


def model_from_plan(plan: dict) -> Model:
    """The model preset the export was made from (plan.json carries it whole, so verify needs no presets)."""
    d = dict(plan["model_preset"])
    t = dict(d.pop("training"))
    t["betas"] = tuple(t["betas"])
    d["fused_kernels"] = tuple(d.get("fused_kernels", ()))
    return Model(**d, training=Training(**t))
