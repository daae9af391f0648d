"""A model described by what costs time and memory, read from its Hugging Face config.json without torch.

    describe(config, where="path/to/config.json") -> Architecture

Every field is read from the config's own keys, by the model type the config names (`model_type`), with the
defaults the transformers classes use where a key is absent. The parameter count follows the modules the
transformers class builds (tests/test_architecture_counts.py checks it against the class on the meta device
for every family). A config it cannot describe (a mixture of experts, an unknown model type) is an
ArchitectureError that names the file and what is missing, and says that `bench` can still measure it. No
torch here: the base install plans with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from engine.data import built
from engine.data.errors import PlannerError

# What real models span, with room: a value outside these is a mistake in the file, said as such.
LIMITS = {"layers": 10_000, "hidden": 1_000_000, "heads": 100_000, "ffn": 10_000_000, "vocab": 10_000_000,
          "head_dim": 100_000, "positions": 100_000_000, "image": 100_000, "patch": 10_000}

DECODERS = {  # model_type -> (gated MLP, norm, parameters per norm, norms per layer, tied by default)
    "llama": (True, "rmsnorm", 1, 2, False),
    "mistral": (True, "rmsnorm", 1, 2, False),
    "qwen2": (True, "rmsnorm", 1, 2, False),
    "qwen3": (True, "rmsnorm", 1, 2, False),
    "olmo": (True, "layernorm (no weights)", 0, 2, False),
    "olmo2": (True, "rmsnorm", 1, 2, False),
    "gemma": (True, "rmsnorm", 1, 2, True),
    "gemma2": (True, "rmsnorm", 1, 4, True),
    "gemma3_text": (True, "rmsnorm", 1, 4, True),
    "phi3": (True, "rmsnorm", 1, 2, False),
}
FAMILIES = ("GPT-NeoX (Pythia)", "GPT-2", "Llama 1-3", "Mistral", "Qwen2/2.5/3", "OLMo/OLMo-2", "Gemma 1-3",
            "Phi-3", "BERT", "RoBERTa", "ViT", "Mamba", "ConvNeXt")


class ArchitectureError(PlannerError):
    """A config.json the planner cannot describe; the message names the file and what is missing."""


class NeedsBuild(ArchitectureError):
    """A model the hand-written describer does not know, and nobody built yet: `describe_or_build` can."""


@dataclass(frozen=True)
class Architecture:
    model_type: str
    kind: str  # decoder | encoder | vit
    layers: int
    hidden: int
    heads: int
    kv_heads: int  # grouped-query attention: fewer key/value heads than query heads
    head_dim: int
    ffn: int
    gated: bool  # SwiGLU / GeGLU: three MLP matrices, not two
    vocab: int
    tied: bool  # the output projection shares the input embedding
    norm: str
    params: int
    embedding_params: int  # lookups (no matmul FLOPs): token, position and type embeddings
    max_positions: int | None = None
    image_size: int | None = None
    patch_size: int | None = None
    # Read from the model built on the meta device (engine/data/built.py); the defaults are the dense ones.
    built: bool = False
    active_params: int | None = None  # a mixture of experts: the parameters one token goes through
    experts: int = 0
    experts_per_token: int = 0
    moe_layers: int = 0
    decoder_layers: int = 0  # an encoder-decoder: the layers of `layers` that run on the target
    block_class: str = ""  # the repeated block (FSDP's wrap, checkpointing's unit)
    config_class: str = ""
    hf_class: str = ""
    objective: str = ""
    flops: tuple[float, ...] = ()  # per-sample FLOPs coefficients (built.py): (a, b) or (a_s, a_t, b_s, b_t, b_x)
    flops_source: str = ""
    attention: str = ""  # the attention implementation the built model took: sdpa, else eager

    @property
    def active(self) -> int:
        return self.active_params if self.active_params is not None else self.params

    def linear_flops_per_sample(self, tokens: int, target: int = 0) -> float:
        """FLOPs of one sample's forward + backward that grow with its tokens (every matrix product but
        attention's s x s ones): counted where built, else 6 x the parameters per token."""
        if not self.flops:
            return 6.0 * self.params * tokens
        if len(self.flops) == 2:
            return self.flops[0] * tokens
        return self.flops[0] * tokens + self.flops[1] * target

    def attention_flops_per_sample(self, tokens: int, target: int = 0) -> float | None:
        """Attention's s x s products in one sample's forward + backward, counted (None: not built)."""
        if not self.flops:
            return None
        if len(self.flops) == 2:
            return self.flops[1] * tokens * tokens
        return self.flops[2] * tokens ** 2 + self.flops[3] * target ** 2 + self.flops[4] * tokens * target

    @property
    def attention_params(self) -> int:
        return self.layers * self.hidden * (2 * self.heads + 2 * self.kv_heads) * self.head_dim

    def summary(self) -> str:
        if self.built:
            moe = (f", a mixture of {self.experts} experts ({self.experts_per_token} a token): "
                   f"{self.active / 1e9:.3g}B of {self.params / 1e9:.3g}B parameters active" if self.experts else
                   f"; {self.params / 1e9:.3g}B parameters")
            dec = f" ({self.layers - self.decoder_layers} encoder, {self.decoder_layers} decoder)" if self.decoder_layers else ""
            return (f"{self.model_type} ({self.hf_class}, built on the meta device): {self.layers} {self.block_class} "
                    f"blocks{dec}, hidden {self.hidden}, {self.heads} heads, vocabulary {self.vocab:,}{moe}")
        gqa = f", {self.kv_heads} key/value heads" if self.kv_heads != self.heads else ""
        return (f"{self.model_type}: {self.layers} layers, hidden {self.hidden}, {self.heads} heads{gqa} of "
                f"{self.head_dim}, {'gated ' if self.gated else ''}MLP {self.ffn}, vocabulary {self.vocab:,}"
                f"{', tied embeddings' if self.tied else ''}; {self.params / 1e9:.3g}B parameters")


def _get(config: Mapping[str, Any], where: str, *keys: str, default: Any = None, required: bool = True) -> Any:
    for k in keys:
        if config.get(k) is not None:
            return config[k]
    if default is not None or not required:
        return default
    raise ArchitectureError(f"{where}: no {' or '.join(keys)}, which the planner needs to size the model")


def _int(config, where, name, *keys, default=None, limit=None, required=True) -> int | None:
    value = _get(config, where, *keys, default=default, required=required)
    if value is None:
        return None
    hi = LIMITS.get(limit or name, 10**9)
    ok = isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()
    if not ok or not 1 <= value <= hi:
        key = next((k for k in keys if config.get(k) is not None), keys[0])
        raise ArchitectureError(f"{where}: {key} = {str(value)[:60]!r} is not a whole number from 1 to {hi:,}")
    return int(value)


def describe(config: Mapping[str, Any], where: str = "config.json") -> Architecture:
    """The architecture a config.json describes (see the module's docstring)."""
    if not isinstance(config, Mapping):
        raise ArchitectureError(f"{where}: not a JSON object")
    if isinstance(config.get("text_config"), Mapping):  # a multimodal wrapper (Gemma 3): its language model
        config = {**config["text_config"], "model_type": config["text_config"].get("model_type")
                  or f"{config.get('model_type')}_text"}
    mt = str(config.get("model_type") or "")
    moe = [k for k in (*built.EXPERTS, "moe_intermediate_size") if config.get(k)]
    if moe or not is_known(mt):
        found = built.cached(config, where)
        if found is not None:
            return from_built(found)
        what = (f"a mixture of experts ({moe[0]} = {str(config[moe[0]])[:40]!r})" if moe else
                f"model_type {mt[:40] or '(none)'!r} is not one the hand-written describer knows (it knows "
                f"{', '.join(FAMILIES)})")
        raise NeedsBuild(f"{where}: {what}: the planner describes it by building it on the meta device, which "
                         "needs torch and transformers (`pip install '.[bench]'`)")
    if mt in DECODERS:
        return _decoder(config, where, mt)
    if mt == "gpt_neox":
        return _neox(config, where)
    if mt == "gpt2":
        return _gpt2(config, where)
    if mt in ("bert", "roberta"):
        return _encoder(config, where, mt)
    if mt == "vit":
        return _vit(config, where)
    raise ArchitectureError(f"{where}: model_type {mt or '(none)'!r} is not one the planner can describe")


def is_known(model_type: str) -> bool:
    """A model type the hand-written describer knows (no torch needed)."""
    return model_type in DECODERS or model_type in ("gpt_neox", "gpt2", "bert", "roberta", "vit")


def describe_or_build(config: Mapping[str, Any], where: str = "config.json") -> Architecture:
    """describe(), building the model on the meta device (in a process of its own) where the hand-written
    describer does not know it; a BuildError, an ArchitectureError, names the file and the field."""
    try:
        return describe(config, where)
    except NeedsBuild:
        pass
    try:
        return from_built(built.build(dict(config), where))
    except built.BuildError as e:
        raise ArchitectureError(str(e)) from None


def from_built(d: Mapping[str, Any]) -> Architecture:
    """The Architecture of a description built on the meta device (engine/data/built.py)."""
    inner = d["ffn"] * max(1, d.get("experts_per_token") or 1) if d.get("experts") else d["ffn"]
    return Architecture(
        d["model_type"], d["kind"], d["layers"], d["hidden"], d["heads"], d["kv_heads"] or d["heads"],
        d["head_dim"], inner + d.get("shared_ffn", 0), bool(d.get("gated")), d["vocab"], bool(d.get("tied")),
        "as built", int(d["params"]), int(d["embedding_params"]), d.get("max_positions"), built=True,
        active_params=int(d["active_params"]), experts=int(d.get("experts") or 0),
        experts_per_token=int(d.get("experts_per_token") or 0), moe_layers=int(d.get("moe_layers") or 0),
        decoder_layers=int(d.get("decoder_layers") or 0), block_class=str(d.get("block_class") or ""),
        config_class=d["config_class"], hf_class=d["hf_class"], objective=d["objective"],
        flops=tuple(float(x) for x in d["flops"]), flops_source=str(d.get("flops_source") or ""),
        attention=str(d.get("attention") or ""))


# The model types whose transformers config refuses a hidden size that is not a multiple of the heads even
# where head_dim is given (validate_architecture; BERT and RoBERTa's attention, GPT-2's): the others build
# such a shape from an explicit head_dim, and split the hidden size evenly without one.
WHOLE_HEADS = ("llama", "gemma2", "gemma3_text", "gpt_neox", "gpt2", "bert", "roberta")


def _heads_divide(config, where, mt, h, heads, hidden_key="hidden_size", heads_key="num_attention_heads") -> None:
    """A hidden size the heads split evenly, as transformers builds the model; else an error naming both keys."""
    if h % heads and (mt in WHOLE_HEADS or config.get("head_dim") is None):
        raise ArchitectureError(
            f"{where}: {hidden_key} = {h} is not a multiple of {heads_key} = {heads}: "
            + ("transformers refuses this shape" if mt in WHOLE_HEADS
               else "each head's size would not be whole (give head_dim, or a hidden size the heads divide)"))


def _attention_shape(config, where, mt) -> tuple[int, int, int, int, int]:
    h = _int(config, where, "hidden", "hidden_size")
    layers = _int(config, where, "layers", "num_hidden_layers")
    heads = _int(config, where, "heads", "num_attention_heads")
    kv = _int(config, where, "heads", "num_key_value_heads", default=heads)
    if heads % kv:
        raise ArchitectureError(f"{where}: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv}")
    _heads_divide(config, where, mt, h, heads)
    d = _int(config, where, "head_dim", "head_dim", default=max(1, h // heads))
    return h, layers, heads, kv, d


def _decoder(config, where, mt) -> Architecture:
    gated, norm, norm_w, norms, tied_default = DECODERS[mt]
    h, L, H, K, d = _attention_shape(config, where, mt)
    f = _int(config, where, "ffn", "intermediate_size")
    V = _int(config, where, "vocab", "vocab_size")
    tied = bool(config.get("tie_word_embeddings", tied_default))
    attn_bias = bool(config.get("attention_bias", False))
    qkv_bias = attn_bias or mt == "qwen2"  # Qwen2 biases q, k and v (not o)
    o_bias = attn_bias and mt != "qwen2"
    mlp_bias = bool(config.get("mlp_bias", False))
    attn = h * (H + 2 * K) * d + H * d * h + (H + 2 * K) * d * qkv_bias + h * o_bias
    mlp = 3 * h * f + (2 * f + h) * mlp_bias
    layer_norms = norms * h * norm_w
    if mt in ("qwen3", "gemma3_text"):
        layer_norms += 2 * d  # q_norm and k_norm over a head
    if mt == "olmo2":
        layer_norms += H * d + K * d  # q_norm and k_norm over all heads
    per_layer = attn + mlp + layer_norms
    params = V * h * (1 if tied else 2) + L * per_layer + h * norm_w
    positions = _int(config, where, "positions", "max_position_embeddings", required=False)
    return Architecture(mt, "decoder", L, h, H, K, d, f, gated, V, tied, norm, int(params), V * h, positions)


def _neox(config, where) -> Architecture:
    h, L, H, K, d = _attention_shape(config, where, "gpt_neox")
    f = _int(config, where, "ffn", "intermediate_size")
    V = _int(config, where, "vocab", "vocab_size")
    tied = bool(config.get("tie_word_embeddings", False))
    per_layer = 4 * h * h + 2 * h * f + 9 * h + f  # QKV, dense and MLP with biases, two LayerNorms
    params = (1 if tied else 2) * V * h + L * per_layer + 2 * h
    return Architecture("gpt_neox", "decoder", L, h, H, H, d, f, False, V, tied, "layernorm", int(params), V * h,
                        _int(config, where, "positions", "max_position_embeddings", required=False))


def _gpt2(config, where) -> Architecture:
    h = _int(config, where, "hidden", "n_embd", "hidden_size")
    L = _int(config, where, "layers", "n_layer", "num_hidden_layers")
    H = _int(config, where, "heads", "n_head", "num_attention_heads")
    _heads_divide(config, where, "gpt2", h, H, next(k for k in ("n_embd", "hidden_size") if config.get(k) is not None),
                  next(k for k in ("n_head", "num_attention_heads") if config.get(k) is not None))
    f = _int(config, where, "ffn", "n_inner", default=4 * h)
    V = _int(config, where, "vocab", "vocab_size")
    P = _int(config, where, "positions", "n_positions", "max_position_embeddings", default=1024)
    per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h  # attention, MLP with biases, two LayerNorms
    params = V * h + P * h + L * per_layer + 2 * h  # lm_head tied to the token embedding
    return Architecture("gpt2", "decoder", L, h, H, H, h // H, f, False, V, True, "layernorm", int(params),
                        (V + P) * h, P)


def _encoder(config, where, mt) -> Architecture:
    h, L, H, K, d = _attention_shape(config, where, mt)
    f = _int(config, where, "ffn", "intermediate_size")
    V = _int(config, where, "vocab", "vocab_size")
    P = _int(config, where, "positions", "max_position_embeddings", default=512)
    if mt == "roberta" and P <= 2:  # RoBERTa's positions start after the padding index: 2 are never a token's
        raise ArchitectureError(f"{where}: max_position_embeddings = {P} leaves RoBERTa no position for a token "
                                "(it reserves 2 for padding): at least 3")
    types = _int(config, where, "vocab", "type_vocab_size", default=2)
    embeddings = (V + P + types) * h + 2 * h
    per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
    head = h * h + h + 2 * h + V  # the masked-LM head: dense, LayerNorm, decoder bias (decoder tied)
    params = embeddings + L * per_layer + head
    return Architecture(mt, "encoder", L, h, H, H, d, f, False, V, True, "layernorm", int(params),
                        (V + P + types) * h, P)


def _vit(config, where) -> Architecture:
    h, L, H, K, d = _attention_shape(config, where, "vit")
    f = _int(config, where, "ffn", "intermediate_size")
    patch = _int(config, where, "patch", "patch_size", default=16)
    image = _int(config, where, "image", "image_size", default=224)
    channels = _int(config, where, "patch", "num_channels", default=3)
    patches = (image // patch) ** 2
    labels = config.get("id2label")
    classes = _int(config, where, "vocab", "num_labels", default=len(labels) if isinstance(labels, Mapping) and labels
                   else 2)
    per_layer = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
    params = (channels * patch * patch * h + h + h + (patches + 1) * h + L * per_layer + 2 * h
              + h * classes + classes)  # patch embedding, CLS, positions, layers, final LayerNorm, classifier
    return Architecture("vit", "vit", L, h, H, H, d, f, False, classes, False, "layernorm", int(params), 0,
                        None, image, patch)


# Config classes the memory model sizes with formulas of its own (engine/predict/memory.py).
OWN_SHAPES = ("MambaConfig", "ConvNextConfig")
# The config classes of the presets, by the model type the config would name.
CONFIG_CLASS_TYPES = {"GPTNeoXConfig": "gpt_neox", "GPT2Config": "gpt2", "LlamaConfig": "llama",
                      "MistralConfig": "mistral", "Qwen2Config": "qwen2", "Qwen3Config": "qwen3",
                      "OlmoConfig": "olmo", "Olmo2Config": "olmo2", "GemmaConfig": "gemma", "Gemma2Config": "gemma2",
                      "Gemma3TextConfig": "gemma3_text", "Gemma3Config": "gemma3", "Phi3Config": "phi3",
                      "BertConfig": "bert", "RobertaConfig": "roberta", "ViTConfig": "vit"}


def model_type_of(config_class: str, config: Mapping[str, Any]) -> str | None:
    """The model type of a preset: its config's own `model_type`, else its config class's; None for a class
    this module does not describe (Mamba and ConvNeXt are sized by the memory model itself)."""
    mt = config.get("model_type") if isinstance(config, Mapping) else None
    if isinstance(mt, str) and (mt in DECODERS or mt in ("gpt_neox", "gpt2", "bert", "roberta", "vit", "gemma3")):
        return mt
    if config_class in OWN_SHAPES:  # the memory model sizes these itself, however they were described
        return None
    if isinstance(mt, str) and built.cached(config) is not None:  # built on the meta device before
        return mt
    return CONFIG_CLASS_TYPES.get(config_class)
