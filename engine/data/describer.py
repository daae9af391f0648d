"""The build worker: a model built on the meta device and described, in a process of its own.

    python -m engine.data.describer FILE    prints the description of the config.json at FILE as one JSON line
    describe_by_building(config) -> dict    the same in this process (imports torch and transformers)

The only process torch and transformers are imported in; engine/data/built.py starts it and caches what it says. What
is read from the built model, and how its FLOPs are counted, is in built.py's docstring. The process trims its own
imports (engine/data/lean.py) and shares its counting (engine/data/counting.py) with a forked copy of itself on the
machine's other core; where anything fails trimmed, built.py runs it once more untrimmed, and the plain build's answer is what
is said.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from engine.data import counting
from engine.data.built import EXPERTS, BuildError, Refused, check, imports_dir, _whole

OBJECTIVE_OF = {"causal": "causal-lm", "masked": "masked-lm", "seq2seq": "seq2seq-lm"}
PER_TOKEN = ("num_experts_per_tok", "moe_top_k", "num_experts_per_token", "top_k")
# The lengths the FLOPs are counted at: as many as the per-sample count has coefficients (a x s + b x s^2; or
# a_s s + a_t t + b_s s^2 + b_t t^2 + b_x s t), so the fit solves them exactly.
LENGTHS = {"causal": [(64, 0), (128, 0)], "masked": [(64, 0), (128, 0)],
           "seq2seq": [(64, 32), (128, 32), (64, 16), (128, 64), (256, 32)]}


def _attr(cfg: Any, *names: str, default: Any = None) -> Any:
    for n in names:
        v = getattr(cfg, n, None)
        if v is not None and not isinstance(v, bool):
            return v
    return default


def _choose(cfg: Any, config: Mapping[str, Any]) -> tuple[Any, str]:
    """The Auto class the config asks for: the class its `architectures` names where it is a causal, masked or
    sequence-to-sequence LM; else by what transformers maps the config to (an encoder that can also be a
    decoder, such as BERT, as a masked LM unless its config says is_decoder)."""
    import transformers as tf

    autos = {"causal": tf.AutoModelForCausalLM, "seq2seq": tf.AutoModelForSeq2SeqLM, "masked": tf.AutoModelForMaskedLM}
    maps = {k: a._model_mapping for k, a in autos.items()}
    named = config.get("architectures")
    if isinstance(named, list) and named and isinstance(named[0], str):
        for kind, mapping in maps.items():
            try:
                cls = mapping[type(cfg)]
            except KeyError:
                continue
            if cls.__name__ == named[0]:
                return autos[kind], kind
    has = {k: type(cfg) in m for k, m in maps.items()}
    if has["seq2seq"] and getattr(cfg, "is_encoder_decoder", False):
        return autos["seq2seq"], "seq2seq"
    if has["masked"] and (not has["causal"] or not getattr(cfg, "is_decoder", False)):
        return autos["masked"], "masked"
    for kind in ("causal", "seq2seq", "masked"):
        if has[kind]:
            return autos[kind], kind
    raise Refused(f"model_type {cfg.model_type!r} is not a causal, masked or sequence-to-sequence language model "
                     "in this transformers (the planner pre-trains those)")


def _build(config: dict) -> tuple[Any, Any, str, Any, str]:
    """(transformers' config, the Auto class, causal/masked/seq2seq, the model on the meta device, its attention)."""
    import torch
    import transformers as tf

    check(config, "config.json")
    mt = config["model_type"]
    # From its own module: the top-level name is not exported by every transformers 5.x (the device image's lacks
    # it: "Could not import module 'CONFIG_MAPPING'").
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        cfg_cls = CONFIG_MAPPING[mt]
    except KeyError:
        raise Refused(f"model_type = {mt!r} is not a model type transformers {tf.__version__} knows "
                         "(a newer transformers may; the planner runs no model code from a repository)") from None
    values = {k: v for k, v in config.items() if k != "model_type"}
    try:
        cfg = cfg_cls(**values)
    except Exception as e:  # transformers validates configs with many exception types
        raise BuildError(f"transformers refuses its values: {str(e)[:200]}") from None
    auto, kind = _choose(cfg, config)
    for name in ("layerdrop", "encoder_layerdrop", "decoder_layerdrop"):  # a training pass would skip layers at
        if getattr(cfg, name, 0):                                           # random (M2M-100's 0.05): every layer
            setattr(cfg, name, 0.0)                                         # costs its FLOPs, as in the run
    if _attr(cfg, *EXPERTS, default=0):
        try:
            cfg._experts_implementation = "batched_mm"  # one product per routed token: countable on meta tensors
        except Exception:
            pass
    net = None
    for attn in ("sdpa", "eager"):
        try:
            with torch.device("meta"), _no_init():
                net = auto.from_config(cfg, dtype=torch.bfloat16, attn_implementation=attn)
            attention = attn
            break
        except Exception as e:  # a model without SDPA: eager; anything else is the config's
            why = e
    if net is None:
        raise BuildError(f"transformers cannot build model_type {mt!r} from it: {str(why)[:200]}")
    net.train()
    return cfg, auto, kind, net, attention


INIT_FUNCTIONS = ("uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_",
                  "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_")


@contextlib.contextmanager
def _no_init() -> Any:
    """torch.nn.init's functions as no-ops while the model is built: a model on the meta device has no values to
    initialise (transformers itself skips its own initialisation there), and torch's modules initialising theirs
    dispatched some fifty operations a layer in Python (a third of T5-base's build). transformers' init_weights,
    which also ties the embeddings, runs as it would."""
    import torch.nn.init as init

    try:  # transformers keeps its own copy of torch's init functions, taken when this module first loads: not ours
        import transformers.initialization  # noqa: F401
    except ImportError:
        pass

    def leave(tensor: Any = None, *args: Any, **kwargs: Any) -> Any:
        return tensor

    saved = {name: getattr(init, name) for name in INIT_FUNCTIONS if hasattr(init, name)}
    try:
        for name in saved:
            setattr(init, name, leave)
        yield
    finally:
        for name, fn in saved.items():
            setattr(init, name, fn)


def _block_names(net: Any) -> set[str]:
    """The repeated blocks: the classes transformers will not split, as found in the tree."""
    import torch

    names = set(getattr(net, "_no_split_modules", None) or ()) & {type(m).__name__ for m in net.modules()}
    if not names:  # a model that does not say (DeBERTa): the class of its largest list of like modules
        lists = [m for m in net.modules() if isinstance(m, torch.nn.ModuleList) and len(m)
                 and len({type(c) for c in m}) == 1]
        if lists:
            biggest = max(lists, key=lambda m: sum(p.numel() for p in m.parameters()))
            names = {type(biggest[0]).__name__}
    return names


def _counted(cfg: Any, auto: Any, kind: str, net: Any, names: set[str], lengths: list[tuple[int, int]],
             whole: bool | None = None) -> list[float]:
    """The model's FLOPs per training step of one sample at each length; with eager attention where SDPA's mask
    reads the inputs' values (which meta tensors do not have)."""
    import torch

    try:
        return counting.count_by_blocks(net, kind, lengths, names, whole)
    except Exception:
        eager = None
        try:  # the same model switched to eager attention (transformers 5), else built again with it
            net.set_attn_implementation("eager")  # (a model that cannot switch only logs a warning)
            if getattr(net.config, "_attn_implementation", None) == "eager":
                eager = net
        except Exception:  # noqa: BLE001
            pass
        if eager is None:
            with torch.device("meta"), _no_init():
                eager = auto.from_config(cfg, dtype=torch.bfloat16, attn_implementation="eager")
        eager.train()
        return counting.count_by_blocks(eager, kind, lengths, names, whole)


def describe_by_building(config: dict) -> dict:
    """The description (see the module's docstring) of the model a config.json describes. Imports torch."""
    import torch
    import transformers as tf

    cfg, auto, kind, net, attention = _build(config)
    mt = config["model_type"]
    experts = _attr(cfg, *EXPERTS, default=0) or 0
    params = {id(p): p for p in net.parameters()}
    total = sum(p.numel() for p in params.values())
    emb_ids = {id(m.weight) for m in net.modules() if isinstance(m, torch.nn.Embedding)}
    embedding = sum(params[i].numel() for i in emb_ids if i in params)
    # Experts a token is not routed to: every experts container's parameters x (1 - k / E).
    k = _attr(cfg, *PER_TOKEN, default=0) or 0
    expert_params = moe_layers = 0
    if experts:
        for name, m in net.named_modules():
            if name.rsplit(".", 1)[-1] == "experts":
                expert_params += sum(p.numel() for p in m.parameters())
                moe_layers += 1
    inactive = round(expert_params * (1 - min(k, experts) / experts)) if experts and k else 0
    names = _block_names(net)
    blocks: dict[str, list] = {}
    dec_blocks = enc_blocks = enc_params = 0
    for name, m in net.named_modules():
        cls = type(m).__name__
        if cls in names:
            entry = blocks.setdefault(cls, [cls, 0, sum(p.numel() for p in m.parameters())])
            entry[1] += 1
            if kind == "seq2seq" and "decoder" in name:
                dec_blocks += 1
            else:
                enc_blocks += 1
                enc_params += entry[2]
    hidden = int(_attr(cfg, "hidden_size", "d_model", "n_embd", default=0))
    heads = int(_attr(cfg, "num_attention_heads", "n_head", "num_heads", "encoder_attention_heads", default=0))
    kv = _attr(cfg, "num_key_value_heads", "num_kv_heads", default=None)
    if kv is None:
        kv = 1 if getattr(cfg, "multi_query", False) else heads
    head_dim = int(_attr(cfg, "head_dim", "d_kv", default=hidden // heads if heads else 0))
    expansion = _attr(cfg, "expansion_ratio", default=4)
    ffn = int(_attr(cfg, "moe_intermediate_size" if experts else "intermediate_size", "intermediate_size", "d_ff",
                    "ffn_dim", "encoder_ffn_dim", "n_inner", "ffn_hidden_size", default=expansion * hidden))
    shared_ffn = 0
    if experts:
        shared_ffn = int(_attr(cfg, "shared_expert_intermediate_size", default=0) or 0)
        shared_ffn += int(_attr(cfg, "n_shared_experts", default=0) or 0) * ffn
    gated = any(isinstance(getattr(cfg, n, None), str) and ("glu" in getattr(cfg, n) or "silu" in getattr(cfg, n))
                for n in ("hidden_act", "hidden_activation", "feed_forward_proj", "activation_function"))
    vocab = int(_attr(cfg, "vocab_size", default=0))
    out_emb, in_emb = net.get_output_embeddings(), net.get_input_embeddings()
    tied = bool(out_emb is not None and in_emb is not None and out_emb.weight is in_emb.weight)
    lengths = LENGTHS[kind]
    try:
        counted = _counted(cfg, auto, kind, net, names, lengths)
        coef = counting.fit(kind, lengths, counted)
        source = (f"counted by torch's FLOP formulas on the meta device (transformers {tf.__version__}, torch "
                  f"{torch.__version__.split('+')[0]})" + ("; the experts a token is routed to" if experts else ""))
    except Exception as e:  # counting is best effort: 6 x the active matrix parameters, attention by formula
        matmul = total - inactive - embedding + (vocab * hidden if tied else 0)
        L = enc_blocks + dec_blocks
        if kind == "seq2seq":  # the encoder's blocks run on the input, the rest (decoder, LM head) on the target
            coef = [6.0 * enc_params, 6.0 * (matmul - enc_params), 12.0 * enc_blocks * heads * head_dim,
                    12.0 * dec_blocks * heads * head_dim, 12.0 * dec_blocks * heads * head_dim]
        else:
            coef = [6.0 * matmul, 12.0 * L * heads * head_dim]
        source = f"{FORMULA} (counting on the meta device failed: {str(e)[:120]})"
    positions = _attr(cfg, "max_position_embeddings", "n_positions", "max_seq_len", default=None)
    kinds = {"causal": "decoder", "masked": "encoder", "seq2seq": "encoder-decoder"}
    return {
        "model_type": mt, "config_class": type(cfg).__name__, "hf_class": type(net).__name__,
        "objective": OBJECTIVE_OF[kind], "kind": kinds[kind],
        "params": int(total), "embedding_params": int(embedding), "active_params": int(total - inactive),
        "blocks": list(blocks.values()), "block_class": next(iter(blocks), ""),
        "layers": enc_blocks + dec_blocks, "decoder_layers": dec_blocks,
        "hidden": hidden, "heads": heads, "kv_heads": int(kv), "head_dim": head_dim, "ffn": ffn, "gated": gated,
        "vocab": vocab, "tied": tied, "max_positions": int(positions) if _whole(positions) else None,
        "experts": int(experts), "experts_per_token": int(k), "shared_ffn": shared_ffn, "moe_layers": moe_layers,
        "expert_params": int(expert_params),
        "attention": attention, "flops": coef, "flops_source": source, "transformers": tf.__version__,
    }


FORMULA = "6 x active parameters + attention by formula"  # the source when counting failed


def _main(argv: list[str]) -> int:
    import logging
    import warnings

    from engine.data import lean

    trimmed = not os.environ.get(lean.PLAIN)
    counting.FORK = trimmed  # the plain build counts in one process: nothing of the trimmed worker's ways
    if trimmed:  # else nothing is left out: the plain build is the one that says what is wrong
        lean.apply(imports_dir())
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    try:
        config = json.loads(Path(argv[0]).read_text())
        desc = describe_by_building(config)
    except Refused as e:  # the config's own doing: said as it is, however the worker imported
        desc = {"error": str(e).removeprefix("config.json: "), "refused": True}
    except BuildError as e:
        desc = {"error": str(e).removeprefix("config.json: ")}
    except ImportError as e:
        cause = f" ({type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""  # transformers' lazy imports hide it
        desc = {"error": f"describing this model needs torch and transformers (`pip install '.[bench]'`): {e}{cause}"}
    except Exception as e:  # the config's doing: said as a message, never a traceback
        desc = {"error": f"transformers cannot build it: {type(e).__name__}: {str(e)[:200]}"}
    failed = "error" in desc and not desc.pop("refused", False)
    if trimmed and (failed or str(desc.get("flops_source", "")).startswith(FORMULA)):
        desc = {"again": "plain"}  # whatever failed is said by the plain build, not blamed on the trimming
    print(json.dumps(desc), flush=True)
    return 0


if __name__ == "__main__":
    code = _main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # not Python's teardown of torch and transformers: it takes a second or two, for nothing
