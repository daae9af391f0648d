"""A training run: the model, how many tokens, the global batch, the sequence length, the precision and the
optimizer. The paper's replications are runs in the model presets; a user's own run is the same model with
the flags of `RunFlags` applied (`with_run`), or a model read from nothing but its config.json
(`config_model_entry`, validated like any preset).

    run_key(model)     the part of a run that sets the time of one step: "512x2048 bf16 adamw"
    describe_run(model)  "105B tokens: 100,000 steps of 512 x 2,048, bf16, adamw"
    with_run(model, flags, presets) -> Model

A run that changes only the tokens keeps the model's id: a measured or predicted step holds for any number
of steps, and every figure in days scales with the steps (the store keeps the steps each row's days are
for). A run that changes the step (batch, sequence, precision, optimizer) is another model: its id gets the
run's key (`llama-3.2-1b+b256s4096`), so its rows never mix with the preset's.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from engine.data import built
from engine.data.architecture import CONFIG_CLASS_TYPES, Architecture, NeedsBuild, model_type_of
from engine.data.architecture import describe as describe_architecture
from engine.data.architecture import describe_or_build
from engine.data.errors import PlannerError
from engine.data.presets import OPTIMIZERS, PRECISIONS, Model, Presets, model_from_entry, read_config
from engine.data.safe import is_id

DEFAULT_BATCH_TOKENS = 2**20  # about a million tokens a step: what 2024-25 1B-scale runs use (Pythia: 2M)
DEFAULT_TOKENS_PER_PARAM = 20  # compute-optimal (Hoffmann et al. 2022, "Chinchilla")
DEFAULT_SEQ_LEN = 2048
# An encoder-decoder's sample: T5's span corruption reads 512 tokens and writes some 114 (Raffel et al. 2020,
# Sec. 3.1.4); a quarter of the input, rounded.
DEFAULT_INPUT_LEN = 512
DEFAULT_TARGET_SHARE = 0.25
DEFAULT_IMAGE_BATCH = 1024
DEFAULT_IMAGE_STEPS = 100_000
MAX_TOKENS = 1e15  # a quadrillion tokens: beyond any run of this decade, so a typo rather than a plan
MAX_STEPS = 10**9
MAX_BATCH = 2**24
MAX_SEQ = 2**22

# The transformers classes for a config without `architectures`, by model type.
_CAUSAL = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
           "qwen3": "Qwen3ForCausalLM", "olmo": "OlmoForCausalLM", "olmo2": "Olmo2ForCausalLM",
           "gemma": "GemmaForCausalLM", "gemma2": "Gemma2ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
           "phi3": "Phi3ForCausalLM", "gpt_neox": "GPTNeoXForCausalLM", "gpt2": "GPT2LMHeadModel"}
_OTHER = {"bert": ("BertForMaskedLM", "masked-lm"), "roberta": ("RobertaForMaskedLM", "masked-lm"),
          "vit": ("ViTForImageClassification", "image-classification")}


class RunError(PlannerError):
    """A run that cannot be: the message names the flag (or file and field) and what it needs."""


@dataclass(frozen=True)
class RunFlags:
    """What a user asked for; None keeps the model's own (a preset's run, or the defaults for a config)."""

    tokens: float | None = None
    tokens_per_param: float | None = None
    steps: int | None = None
    batch: int | None = None
    batch_tokens: float | None = None
    seq_len: int | None = None
    precision: str | None = None
    optimizer: str | None = None

    @property
    def empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in dataclasses.fields(self))

    def check(self) -> None:
        if sum(x is not None for x in (self.tokens, self.tokens_per_param, self.steps)) > 1:
            raise RunError("give one of --tokens, --tokens-per-param and --steps: each sets the run's length")
        if self.batch is not None and self.batch_tokens is not None:
            raise RunError("give --batch (sequences) or --batch-tokens, not both: each sets the global batch")
        for name, value, low, high in (("--tokens", self.tokens, 1, MAX_TOKENS),
                                       ("--tokens-per-param", self.tokens_per_param, 1e-3, 1e6),
                                       ("--steps", self.steps, 1, MAX_STEPS), ("--batch", self.batch, 1, MAX_BATCH),
                                       ("--batch-tokens", self.batch_tokens, 1, MAX_BATCH * MAX_SEQ),
                                       ("--seq-len", self.seq_len, 1, MAX_SEQ)):
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)
                                          and low <= value <= high):
                raise RunError(f"{name} must be a number from {low:g} to {high:g}, not {value!r}")
        if self.precision is not None and self.precision not in PRECISIONS:
            raise RunError(f"--precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.optimizer is not None and self.optimizer not in OPTIMIZERS:
            raise RunError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, not {self.optimizer!r}")


def is_image(model: Model) -> bool:
    return model.seq_len is None


def units_per_sample(model: Model) -> int:
    """Tokens in one sample (a sequence), or 1 for an image model (its run counts images)."""
    return 1 if is_image(model) else int(model.seq_len)


def tokens(model: Model) -> int:
    """Tokens (images, for an image model) the run trains on."""
    return model.training.steps * model.training.batch_size * units_per_sample(model)


def run_key(model: Model) -> str:
    """What sets the time of one step: global batch x sequence (or image side; an encoder-decoder's input +
    target), precision, optimizer. Stored with every trial row (`training_run`); its steps are stored beside it."""
    t = model.training
    key = key_of(t.batch_size, model.seq_len, model.image_size, t.precision, t.optimizer)
    if model.target_len:
        shape, rest = key.split(" ", 1)
        key = f"{shape}+{model.target_len} {rest}"
    return key


def key_of(batch: int, seq_len: int | None, image_size: int | None, precision: str, optimizer: str) -> str:
    shape = f"{batch}x{image_size}px" if seq_len is None else f"{batch}x{seq_len}"
    return f"{shape} {precision} {optimizer}"


def short_count(n: float) -> str:
    """A count in three figures: 300B, 23.5B, 1.5T, 512."""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.3g}"


def describe_run(model: Model) -> str:
    t = model.training
    if is_image(model):
        return (f"{short_count(tokens(model))} images: {t.steps:,} steps of {t.batch_size:,} at {model.image_size}px, "
                f"{t.precision}, {t.optimizer}")
    if model.target_len:
        return (f"{short_count(tokens(model))} input tokens: {t.steps:,} steps of {t.batch_size:,} x "
                f"({model.seq_len:,} in + {model.target_len:,} target), {t.precision}, {t.optimizer}")
    return (f"{short_count(tokens(model))} tokens: {t.steps:,} steps of {t.batch_size:,} x {model.seq_len:,}, "
            f"{t.precision}, {t.optimizer}")


def params_of(model: Model) -> float | None:
    """The parameter count (a mixture of experts: the parameters a token goes through): from the config where
    the planner can describe it, else from the 6·N·D the preset's FLOPs imply."""
    mt = model_type_of(model.config_class, model.config)
    if mt is not None:
        try:
            return float(describe_arch(model).active)
        except PlannerError:
            pass
    units = tokens(model)
    return model.training_flops / (6 * units) if units else None


def describe_arch(model: Model) -> Architecture:
    """The architecture of a preset model, from its config (its config class names the model type when the
    config does not)."""
    config = dict(model.config)
    mt = model_type_of(model.config_class, config)
    if mt is not None and config.get("model_type") is None:
        config["model_type"] = mt
    return describe_architecture(config, f"models.{model.id}.config")


LEARNED_POSITIONS = ("gpt2", "bert", "roberta")  # a table of positions: nothing past its last row


@dataclass(frozen=True)
class Positions:
    tokens: int  # the longest sequence the config gives positions for
    key: str  # the config's key that says so
    value: int  # its value (RoBERTa reserves 2 of them)
    learned: bool  # a table of learned positions (a hard limit), not rotary ones computed for any position


def position_limit(model: Model) -> Positions | None:
    """The longest sequence a model's config gives positions for, or None where it states none (Mamba, an
    image model). A table of learned positions (GPT-2's n_positions, BERT's and RoBERTa's, an encoder's) has no
    row past it: a longer sequence cannot run. Rotary positions (Llama, GPT-NeoX, OLMo, Qwen, ...) are
    computed for any position, and their max_position_embeddings is the context the config declares:
    Pythia's own run is 2,049 tokens at 2,048."""
    if is_image(model):
        return None
    mt = model_type_of(model.config_class, model.config)
    for key in (("n_positions", "max_position_embeddings") if mt == "gpt2" else ("max_position_embeddings",)):
        value = model.config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            reserved = 2 if mt == "roberta" or model.config_class == "RobertaConfig" else 0
            return Positions(max(1, value - reserved), key, value,
                             mt in LEARNED_POSITIONS or model.objective != "causal-lm")
    return None


def position_note(model: Model, seq_len: int | None) -> str | None:
    """For a sequence asked for (`seq_len`) past the context a model's config declares for its rotary
    positions: a note saying so, with the limit (a run past learned positions is refused by with_run);
    else None. Plain text."""
    found = position_limit(model) if seq_len else None
    if found is None or found.learned or seq_len <= found.tokens:
        return None
    return (f"sequence {seq_len:,} is past the model config's {found.key} ({found.value:,}): planned as asked, "
            f"its rotary positions run past it; set {found.key} to {seq_len} in the config to train at it")


def with_run(model: Model, flags: RunFlags, known_ids: Mapping[str, Any] | None = None) -> Model:
    """The model on the run the flags ask for (the model itself when they ask for nothing new)."""
    flags.check()
    if flags.empty:
        return model
    t = model.training
    image = is_image(model)
    if image and (flags.tokens is not None or flags.tokens_per_param is not None or flags.batch_tokens is not None
                  or flags.seq_len is not None):
        raise RunError(f"{model.id} is an image model: its run is --batch (images a step) and --steps; "
                       "--tokens, --tokens-per-param, --batch-tokens and --seq-len are for token models")
    seq = flags.seq_len or model.seq_len
    found = position_limit(model) if flags.seq_len and not image else None
    if found and found.learned and seq > found.tokens:
        less = ", less the 2 RoBERTa reserves" if found.value != found.tokens else ""
        raise RunError(f"--seq-len {seq}: {model.id} has learned positions for {found.tokens:,} tokens at most "
                       f"(its config's {found.key} = {found.value:,}{less}): a longer sequence has no position "
                       "to look up")
    per_sample = 1 if image else int(seq)
    if flags.batch is not None:
        batch = int(flags.batch)
    elif flags.batch_tokens is not None:
        batch = max(1, round(flags.batch_tokens / per_sample))
    elif flags.seq_len is not None and not image:
        batch = max(1, round(t.batch_size * model.seq_len / per_sample))  # the same tokens a step
    else:
        batch = t.batch_size
    if flags.steps is not None:
        steps = int(flags.steps)
    elif flags.tokens is not None or flags.tokens_per_param is not None:
        if flags.tokens is not None:
            want = float(flags.tokens)
        else:
            params = params_of(model)
            if params is None:
                raise RunError(f"--tokens-per-param: the planner cannot count {model.id}'s parameters; give --tokens")
            want = flags.tokens_per_param * params
        steps = max(1, math.ceil(want / (batch * per_sample)))
    else:
        steps = max(1, round(t.steps * t.batch_size * (1 if image else model.seq_len) / (batch * per_sample)))
    if steps > MAX_STEPS:
        raise RunError(f"that run is {steps:,} steps of {batch:,}: more than {MAX_STEPS:,}; check --tokens and --batch")
    training = dataclasses.replace(t, batch_size=batch, steps=steps, precision=flags.precision or t.precision,
                                   optimizer=flags.optimizer or t.optimizer,
                                   warmup_steps=min(t.warmup_steps, max(0, steps // 10)) if steps < t.steps
                                   else t.warmup_steps)
    per_unit = model.training_flops / tokens(model)  # 6·N (the preset's FLOPs per token, or per image)
    target = model.target_len and max(1, round(model.target_len * int(seq) / model.seq_len))
    new = dataclasses.replace(model, training=training, seq_len=None if image else int(seq), target_len=target,
                              training_flops=per_unit * steps * batch * per_sample,
                              training_flops_source=f"{model.training_flops_source}; scaled to this run",
                              paper_training_flops=None)
    if run_key(new) != run_key(model):
        new_id = f"{model.id}+b{batch}" + ("" if image else f"s{seq}")
        if training.precision != t.precision:
            new_id += f"-{training.precision}"
        if training.optimizer != t.optimizer:
            new_id += f"-{training.optimizer}"
        if not is_id(new_id):
            new_id = f"run+b{batch}s{seq}"
        new = dataclasses.replace(new, id=new_id, name=f"{model.name} ({run_key(new)})")
    return new


# --- a model from its config.json alone ---------------------------------------------------------------

_ID_CHARS = re.compile(r"[^A-Za-z0-9._+-]+")


def config_name(path: Path, config: Mapping[str, Any] | None = None) -> str:
    """What a config.json calls its model: the last part of its `_name_or_path` (the name transformers saved
    it under: 'meta-llama/Llama-3.2-1B' -> 'Llama-3.2-1B'); else the file's name without .json; for a file
    called config.json, the repository of Hugging Face's cache it sits in (models--ORG--NAME/snapshots/
    HASH/config.json -> NAME), else its folder's name (the folder is all that names it)."""
    said = (config or {}).get("_name_or_path")
    if isinstance(said, str):
        last = said.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip()
        if last and last not in (".", ".."):
            return last
    if path.stem != "config":
        return path.stem
    parts = path.parts
    if len(parts) >= 4 and parts[-3] == "snapshots" and parts[-4].startswith("models--"):
        return parts[-4].split("--")[-1]
    return path.parent.name or path.stem


def config_id(path: Path, config: Mapping[str, Any] | None = None) -> str:
    """A model id (letters, digits and . _ + -) from what the config calls its model (config_name)."""
    mid = _ID_CHARS.sub("-", config_name(path, config)).strip("-._+")[:56] or "model"
    if not mid[0].isalnum():
        mid = "m" + mid
    return mid


def config_model_entry(path: Path, config: Mapping[str, Any]) -> dict[str, Any]:
    """The presets entry for a model from nothing but its config.json, with the default run (the flags change
    it): sequence 2,048 (or the model's own, if shorter), about a million tokens a step, 20 tokens a
    parameter (compute-optimal), bf16, AdamW. Raises ArchitectureError (naming the file and the field) for a
    config the planner cannot describe. A model the hand-written describer does not know is built on the meta
    device (engine/data/built.py): its class, objective and counted FLOPs come from the built model."""
    where = str(path)
    arch = describe_or_build(config, where)
    if arch.built:
        return _built_entry(path, config, arch)
    mt = arch.model_type
    archs = config.get("architectures")
    named = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if mt in _OTHER:
        hf_class, objective = _OTHER[mt]
        if named and named.endswith(("ForMaskedLM", "ForImageClassification")):
            hf_class = named
    else:
        hf_class, objective = _CAUSAL.get(mt), "causal-lm"
        if named and named.endswith(("ForCausalLM", "LMHeadModel")):
            hf_class = named
    config_class = next((c for c, t in CONFIG_CLASS_TYPES.items() if t == mt), None)
    if hf_class is None or config_class is None:
        raise RunError(f"{where}: model_type {mt!r}: the planner has no transformers class for it")
    training = {"precision": "bf16", "optimizer": "adamw", "lr": 3e-4, "betas": [0.9, 0.95],
                "weight_decay": 0.1, "max_grad_norm": 1.0, "schedule": "cosine"}
    entry: dict[str, Any] = {
        "name": f"{config_id(path, config)} ({mt}, from {path.name})", "hf_config": str(path.resolve()),
        "hf_class": hf_class, "config_class": config_class, "objective": objective, "params": arch.params,
        "source": f"{path} (model_type {mt}); the run: tui-planner's defaults and your flags",
    }
    if objective == "image-classification":
        steps, batch = DEFAULT_IMAGE_STEPS, DEFAULT_IMAGE_BATCH
        entry.update(image_size=arch.image_size, num_classes=arch.vocab)
    else:
        seq = DEFAULT_SEQ_LEN
        if arch.max_positions:
            seq = min(seq, arch.max_positions - (2 if mt == "roberta" else 0))
        batch = max(1, DEFAULT_BATCH_TOKENS // seq)
        steps = max(1, math.ceil(DEFAULT_TOKENS_PER_PARAM * arch.params / (batch * seq)))
        entry.update(seq_len=seq, vocab_size=arch.vocab)
    training.update(batch_size=batch, steps=steps, warmup_steps=min(2000, steps // 10))
    entry["training"] = training
    return entry


def _built_entry(path: Path, config: Mapping[str, Any], arch: Architecture) -> dict[str, Any]:
    """The presets entry for a model built on the meta device: its training FLOPs are the counted ones
    (everything but attention's s x s products, which the predictor adds by the counted coefficient), a
    mixture of experts' those of the experts a token is routed to."""
    mt = arch.model_type
    seq2seq = arch.objective == "seq2seq-lm"
    seq = DEFAULT_INPUT_LEN if seq2seq else DEFAULT_SEQ_LEN
    if arch.max_positions:
        seq = min(seq, arch.max_positions)
    target = max(1, round(seq * DEFAULT_TARGET_SHARE)) if seq2seq else 0
    batch = max(1, DEFAULT_BATCH_TOKENS // seq)
    steps = max(1, math.ceil(DEFAULT_TOKENS_PER_PARAM * arch.active / (batch * seq)))
    flops = arch.linear_flops_per_sample(seq, target) * batch * steps
    moe = (f"; a mixture of {arch.experts} experts, {arch.experts_per_token} a token: {arch.active:,} of "
           f"{arch.params:,} parameters active" if arch.experts else "")
    entry: dict[str, Any] = {
        "name": f"{config_id(path, config)} ({mt}, from {path.name})", "hf_config": str(path.resolve()),
        "hf_class": arch.hf_class, "config_class": arch.config_class, "objective": arch.objective,
        "params": arch.params, "seq_len": seq, "vocab_size": arch.vocab,
        "training_flops": flops, "training_flops_source": f"{arch.flops_source}, at this run's sequence{moe}",
        "attention": arch.attention if arch.attention in ("sdpa", "eager") else "sdpa",
        "source": f"{path} (model_type {mt}, built on the meta device); the run: tui-planner's defaults and your flags",
        "training": {"precision": "bf16", "optimizer": "adamw", "lr": 3e-4, "betas": [0.9, 0.95],
                     "weight_decay": 0.1, "max_grad_norm": 1.0, "schedule": "cosine", "batch_size": batch,
                     "steps": steps, "warmup_steps": min(2000, steps // 10)},
    }
    if seq2seq:
        entry["target_len"] = target
    return entry


def is_config_path(model_arg: str) -> bool:
    """`--model` names a config.json (a path, or a model id in the local Hugging Face cache) rather than a
    preset id."""
    return model_arg.endswith(".json") or "/" in model_arg or model_arg.startswith("~")


_HF_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def hf_cache_dir() -> Path:
    """The local Hugging Face hub cache, as huggingface_hub finds it: $HF_HUB_CACHE, else $HF_HOME/hub, else
    ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                             / "huggingface")
    return Path(home).expanduser() / "hub"


def hf_cached_config(model_id: str) -> Path | None:
    """The config.json of a model id ('allenai/OLMoE-1B-7B-0924') in the local Hugging Face cache, offline
    (the files only, as HF_HUB_OFFLINE=1 would: nothing is downloaded): the snapshot its refs/main names,
    else the newest one holding a config.json; None where the cache has none."""
    if not _HF_ID.fullmatch(model_id) or ".." in model_id:
        return None
    repo = hf_cache_dir() / f"models--{model_id.replace('/', '--')}"
    snapshots = repo / "snapshots"
    try:
        ref = (repo / "refs" / "main").read_text().strip()
    except OSError:
        ref = ""
    if ref and re.fullmatch(r"[0-9a-f]{6,64}", ref) and (snapshots / ref / "config.json").is_file():
        return snapshots / ref / "config.json"
    try:
        found = [p / "config.json" for p in snapshots.iterdir() if (p / "config.json").is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def config_path(model_arg: str) -> Path:
    """The config.json `--model` names: a path, or a model id found in the local Hugging Face cache. A
    RunError where it is neither."""
    path = Path(model_arg).expanduser()
    if path.exists() or model_arg.endswith(".json") or model_arg.startswith(("~", "/", ".")):
        return path
    cached = hf_cached_config(model_arg)
    if cached is not None:
        return cached
    raise RunError(f"{model_arg}: no such file, and no model of that id in the local Hugging Face cache "
                   f"({hf_cache_dir()}); the planner downloads nothing: give a config.json's path")


def start_describing(model_arg: str) -> None:
    """Begin building the model `--model` names where model_for() will need it built (a config.json of a family
    the hand-written describer does not know, not built before: engine/data/built.py), so its seconds overlap
    the caller's own work; anything wrong with it is said by model_for(), which reads it for real."""
    if not is_config_path(model_arg):
        return
    try:
        path = config_path(model_arg)
        config = read_config(path, str(path), "config.json")
        describe_architecture(config, str(path))
    except NeedsBuild:
        built.start(config, str(path))
    except PlannerError:
        pass


def model_for(presets: Presets, model_arg: str, flags: RunFlags = RunFlags()) -> tuple[Presets, Model]:
    """The presets with the model `--model` names on the run the flags ask for, and that model. `model_arg`
    is a preset id, or the path of a Hugging Face config.json: then the model is read from it alone, under
    the file's name (a preset of the same config, e.g. presets/own-runs.toml's Llama-3.2-1B, is used as it
    is, with its own run)."""
    flags.check()
    if is_config_path(model_arg):
        path = config_path(model_arg)
        config = read_config(path, str(path), "config.json")
        mid = config_id(path, config)
        clean = {k: v for k, v in config.items() if v is not None and not k.startswith("_")}
        # the last defined wins: a presets file of your own is read after the shipped ones
        same = next((m for m in reversed(list(presets.models.values())) if dict(m.config) == clean), None)
        if same is not None:
            model = same
        else:
            if mid in presets.models:
                mid = f"{mid}+config"[:64]
            model = model_from_entry(mid, config_model_entry(path, config), str(path))
    else:
        model = presets.model(model_arg)
    base, model = model, with_run(model, flags)
    # The model on its own run beside it: a config.json's model is no preset, and a run of your own keeps what
    # the rows of its model say about its architecture (the predictor finds them by the presets' models).
    added = {m.id: m for m in (base, model) if presets.models.get(m.id) is not m}
    if added:
        presets = dataclasses.replace(presets, models=MappingProxyType({**presets.models, **added}))
    return presets, model


def on_run(row, model: Model) -> bool:
    """Whether a row may rest a prediction for `model`: another model's, or this model's on its run (a row of the
    same model on another batch or sequence times another step)."""
    return row["model"] != model.id or row.get("training_run") in (None, run_key(model))


def rows_on_run(rows, model: Model) -> list:
    """The rows a prediction for `model` may rest on (on_run)."""
    return [r for r in rows if on_run(r, model)]


def run_columns(model: Model) -> dict[str, Any]:
    """The store's columns for the run a row answers for."""
    return {"training_run": run_key(model), "steps": model.training.steps}
