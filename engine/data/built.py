"""A model described by building it: any architecture transformers can build, from its config.json alone.

    check(config, where)            sizes checked before anything is built (a message naming the file and field)
    cached(config, where) -> dict   the description built before for this config (its hash), or None; no torch
    start(config, where)            begin the build in the background, for a caller with other work to do first
    build(config, where) -> dict    build it in a process of its own (or wait for the one begun), describe it, cache it

The model is built on the meta device (`torch.device("meta")`: shapes only, no memory, no weights, nothing
downloaded, never `trust_remote_code`) with the Auto class its config asks for (causal LM, masked LM or
sequence-to-sequence LM). What is read from the real module tree: the parameter counts (total, input
embeddings, per repeated block, the experts a token does not reach), the repeated block class (what FSDP wraps
and checkpointing recomputes: transformers' `_no_split_modules`), and the FLOPs of one training step (forward
+ backward) counted with `torch.utils.flop_counter`'s formulas on meta tensors at two sequence lengths,
which pins down a per-sample count F(s) = a x s + b x s^2 exactly for attention models (a: everything linear
in the tokens; b: attention's s x s products). Encoder-decoders are counted over five pairs of input and
target lengths (s, t): F = a_s s + a_t t + b_s s^2 + b_t t^2 + b_x s t. A mixture of experts runs its experts
as one batched product per token (transformers' `batched_mm` experts), so the count is of the experts a token
is routed to: its active FLOPs, router included. Counting costs time per block, not per FLOP, so a model of
many like blocks is counted with its first block and one more of each kind, and the rest added by difference
(engine/data/counting.py: exact, and checked against counting the whole model in tests/test_built.py).

The build runs in its own process (`python -m engine.data.describer FILE`: torch and transformers are imported
there only), so the planner never loads torch and a build that fails or hangs costs a message, not the app. That
process keeps out what a meta build never uses (engine/data/lean.py: the compiler, torch.distributed, optional
packages; transformers' table of its modules remembered) and counts on two cores; where anything fails that
way, it is run once more as plain as it can be, and that answer is the one said. A build takes some 2-3 s on
2 cores, most of it importing torch; the CLI begins it as soon as it has read `--model` (start), while it reads
its presets and results. A build begun and never asked for is stopped when the planner exits. The
description is cached as JSON by the config's hash in the user's cache directory
($XDG_CACHE_HOME/tui-planner/described/, else ~/.cache/...): a later `predict` reads it without torch.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from engine.data.errors import PlannerError
from engine.data.files import write_quietly

VERSION = 2  # of the description's layout: a cached description of another version is built again
BUILD_TIMEOUT_S = 300
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")  # a config's count of experts, as models name it
# Sizes past these are a mistake in the file (or a model no one can train this decade), said before building:
# a million layers would be a million modules even on the meta device.
SIZE_LIMITS = {
    "layers": (("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
                "num_decoder_layers"), 1_000),
    "width": (("hidden_size", "d_model", "n_embd", "dim"), 200_000),
    "ffn": (("intermediate_size", "d_ff", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner",
             "moe_intermediate_size", "ffn_hidden_size", "shared_expert_intermediate_size"), 2_000_000),
    "heads": (("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
               "decoder_attention_heads", "num_key_value_heads", "num_kv_heads"), 10_000),
    "vocab": (("vocab_size",), 10_000_000),
    "experts": (EXPERTS, 10_000),
    "positions": (("max_position_embeddings", "n_positions", "max_seq_len"), 100_000_000),
}
MAX_PARAMS = 1e14  # a rough count from the sizes above, before building: 100 trillion parameters at most
REMOTE_CODE_KEYS = ("auto_map", "trust_remote_code")


class BuildError(PlannerError):
    """A config.json that cannot be described by building it; the message names the file and the field."""


class Refused(BuildError):
    """A config refused for what it says (its sizes, its model type, its values): the same however it is built."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tui-planner" / "described"


def imports_dir() -> Path:
    """Where the build worker remembers transformers' table of its modules (engine/data/lean.py)."""
    return cache_dir().parent / "imports"


def config_hash(config: Mapping[str, Any]) -> str:
    """The config's values (not its `_name_or_path` and other private keys), canonical JSON, SHA-256."""
    clean = {k: v for k, v in config.items() if not str(k).startswith("_") and v is not None}
    text = json.dumps(clean, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{VERSION}:{text}".encode()).hexdigest()[:32]


def _whole(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def check(config: Mapping[str, Any], where: str) -> None:
    """Refuse, before building, a config asking for remote code or sizes no real model has."""
    for key in REMOTE_CODE_KEYS:
        if config.get(key):
            raise Refused(f"{where}: {key} asks for the model's own Python code from its repository; the planner "
                             "runs no code from a config (no trust_remote_code): use a model transformers ships")
    mt = config.get("model_type")
    if not isinstance(mt, str) or not mt or len(mt) > 64:
        raise Refused(f"{where}: model_type = {str(mt)[:40]!r}: a config.json names its model type "
                         "(transformers needs it to build the model)")
    found: dict[str, int] = {}
    for what, (keys, hi) in SIZE_LIMITS.items():
        for key in keys:
            value = config.get(key)
            if value is None:
                continue
            if not _whole(value) or not 0 <= value <= hi:
                raise Refused(f"{where}: {key} = {str(value)[:40]!r} is not a whole number from 0 to {hi:,} "
                                 f"(no real model has that {what}); nothing was built")
            found[what] = max(found.get(what, 0), int(value))
    layers, width = found.get("layers", 1), found.get("width", 1)
    ffn = found.get("ffn", 4 * width) * max(1, found.get("experts", 1))
    rough = layers * (4 * width * width + 3 * width * ffn) + 2 * found.get("vocab", 1) * width
    if rough > MAX_PARAMS:
        raise Refused(f"{where}: its sizes make some {rough:.2g} parameters (more than {MAX_PARAMS:.0e}): "
                         "check num_hidden_layers, hidden_size and vocab_size; nothing was built")


def _path_for(config: Mapping[str, Any]) -> Path:
    return cache_dir() / f"{config_hash(config)}.json"


def cached(config: Mapping[str, Any], where: str = "config.json") -> dict | None:
    """The description built before for this config, or None (no torch, no process)."""
    path = _path_for(config)
    try:
        desc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(desc, dict) or desc.get("version") != VERSION:
        return None
    return desc


class _Job:
    """A worker building one config: its process, the folder it runs in, when it began."""

    def __init__(self, payload: str, plain: bool):
        from engine.data.lean import PLAIN

        self.tmp = tempfile.mkdtemp(prefix="tui-planner-describe-")
        src = Path(self.tmp) / "config.json"
        src.write_text(payload)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
               "PYTHONWARNINGS": "ignore"}
        env.pop(PLAIN, None)
        if plain:
            env[PLAIN] = "1"
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.plain, self.began = plain, time.monotonic()
        try:
            self.proc = subprocess.Popen([sys.executable, "-m", "engine.data.describer", str(src)],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                         text=True, env=env, cwd=self.tmp)
        except OSError:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise

    def stop(self) -> None:
        """The worker and the copy it forked to count (engine/data/counting.py: in_two) killed; its folder gone."""
        if self.proc.poll() is None:
            try:  # the copy first: Linux lists a process's children; elsewhere the copy ends with its count
                kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            except OSError:
                kids = []
            for kid in kids:
                try:
                    os.kill(int(kid), 9)
                except (OSError, ValueError):
                    pass
            self.proc.kill()
            self.proc.communicate()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def result(self, config: Mapping[str, Any], where: str, timeout_s: float) -> dict:
        """Its description; {"again": ...} where the trimmed worker asks for the plain one."""
        try:
            out, err = self.proc.communicate(timeout=max(1.0, timeout_s - (time.monotonic() - self.began)))
        except subprocess.TimeoutExpired:
            raise BuildError(f"{where}: building model_type {config.get('model_type')!r} on the meta device took "
                             f"more than {timeout_s:.0f} s; nothing was described") from None
        finally:
            self.stop()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        try:
            desc = json.loads(lines[-1])
        except (IndexError, ValueError):
            desc = None
        if not isinstance(desc, dict):
            if not self.plain:
                return {"again": "no description"}
            tail = (err.strip().splitlines() or ["no output"])[-1][:200]
            raise BuildError(f"{where}: describing it by building it failed ({tail})")
        return desc


_STARTED: dict[str, _Job] = {}  # builds begun by start(), by what the worker is given


def _payload(config: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in config.items() if not str(k).startswith("_")})  # in the file's order


@atexit.register
def _stop_started() -> None:
    """Builds begun and never asked for (the command failed first): stopped, so none outlives the planner."""
    while _STARTED:
        _STARTED.popitem()[1].stop()


def start(config: Mapping[str, Any], where: str = "config.json") -> bool:
    """Begin the build `build()` would run, in its process, while the caller does other work (the CLI reading its
    presets and results); `build()` for the same config then waits for it. False where nothing needs building
    (cached) or the config is refused (build() says why). A build never asked for is stopped at exit."""
    try:
        check(config, where)
    except BuildError:
        return False
    if cached(config, where) is not None:
        return False
    key = _payload(config)
    if key not in _STARTED:
        try:
            _STARTED[key] = _Job(key, plain=False)
        except OSError:  # no process to be had now: build() tries again and says why
            return False
    return True


def build(config: Mapping[str, Any], where: str = "config.json", timeout_s: float = BUILD_TIMEOUT_S) -> dict:
    """Describe the model by building it on the meta device in a process of its own; cache the description.
    A BuildError (naming the file and the field) where it cannot be built, or where torch and transformers
    are not installed."""
    check(config, where)
    hit = cached(config, where)
    if hit is not None:
        return hit
    key = _payload(config)
    began = time.monotonic()
    try:
        job = _STARTED.pop(key, None) or _Job(key, plain=False)
        desc = job.result(config, where, timeout_s)
        if desc.get("again"):  # the trimmed worker failed: the plain one says what is wrong, or describes it
            # and what the trimmed one remembered of transformers is forgotten (an edited transformers)
            shutil.rmtree(imports_dir(), ignore_errors=True)
            desc = _Job(key, plain=True).result(config, where, timeout_s - (time.monotonic() - began))
    except OSError as e:
        raise BuildError(f"{where}: no process to build it in ({e})") from None
    if "error" in desc:
        raise BuildError(f"{where}: {desc['error']}")
    desc["version"] = VERSION
    write_quietly(_path_for(config), json.dumps(desc, indent=1))  # unwritable: the next call builds again
    return desc
