"""What a model built on the meta device does not need, kept out of the process that builds it (engine/data/built.py).

    apply(cache)    in the build worker only, before torch and transformers are imported

A build imports torch and transformers and nothing else runs in that process; most of its seconds go to imports
the build never uses. Four things are kept out, each with the reason it cannot change the description:

- **Optional packages** transformers loads when installed (quantizing, offloading, kernels, chat templates,
  tokenizers): hidden (a None in sys.modules reads as "not installed"). A model on the meta device uses none.
- **The compiler** (`torch._dynamo`: half a second to a second, and sympy behind it). transformers imports it to
  decorate functions (`torch.compiler.disable`, `allow_in_graph`, `assume_constant_result`) and to ask whether it
  is compiling. The worker never compiles, where those decorators return the function unchanged and the answer
  is False; so until something asks for more, `torch._dynamo` is the real package not yet run, holding those
  stand-ins. Any other name loads the real one into the same module (the stand-ins then replaced).
- **torch.distributed** is said unavailable (`torch.distributed.is_available()` False), so transformers does
  not import DTensor and FSDP (half a second). One process on the meta device shards nothing.
- **transformers' import table** (`create_import_structure_from_path`: it reads some 3,000 source files to map
  names to modules, twice as it starts) is remembered, in memory and as JSON in the cache directory by
  the folder's path and time and the scanner's file's time (another transformers, another table); a table that does not read back is scanned again.

built.py runs the worker this way first and, where anything fails under it, once more as it would be without
(TUI_PLANNER_PLAIN_BUILD=1): the description is the plain build's, only sooner. tests/test_built.py checks the
two agree and that the trimmed imports stay out.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from engine.data.files import write_quietly

# Hidden from the worker only: transformers imports these when installed, a meta build uses none of them.
NOT_NEEDED = ("torchao", "accelerate", "deepspeed", "bitsandbytes", "kernels", "jinja2", "triton", "tokenizers")
PLAIN = "TUI_PLANNER_PLAIN_BUILD"  # set: the worker imports everything as usual


def _same(fn: Any = None, *args: Any, **kwargs: Any) -> Any:
    """A compiler decorator outside compilation: the function itself (called bare or with options)."""
    return fn if callable(fn) else (lambda f: f)


# What transformers asks of torch._dynamo as it imports and builds, answered as in a process that never compiles.
STAND_INS: dict[str, Callable[..., Any]] = {
    "disable": _same, "allow_in_graph": _same, "assume_constant_result": _same,
    "is_compiling": lambda: False, "mark_static_address": lambda *a, **k: None,
}


def apply(cache: Path) -> None:
    """Trim the worker's imports (see the module's docstring); transformers' table remembered in `cache`."""
    hidden = [name for name in NOT_NEEDED if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    import torch

    if "torch._dynamo" not in sys.modules:
        _defer_compiler(torch)
    torch.distributed.is_available = lambda: False  # type: ignore[assignment]
    sys.meta_path.insert(0, _AfterLoad("transformers.utils.import_utils", lambda m: _remember_table(m, cache)))
    try:  # a transformers that imports a hidden package as it starts (5.17 did tokenizers) gets it back
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: F401
    except Exception:  # noqa: BLE001 - the build says what is wrong as a message
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def _defer_compiler(torch: Any) -> None:
    """torch._dynamo as its package not yet run (its submodules import as usual), holding STAND_INS; the first
    other name asked of it runs the real package in the same module object."""
    spec = importlib.util.find_spec("torch._dynamo")
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)

    def load(name: str) -> Any:
        del module.__getattr__  # type: ignore[attr-defined]
        for key in STAND_INS:
            module.__dict__.pop(key, None)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return getattr(module, name)

    module.__dict__.update(STAND_INS)
    module.__getattr__ = load  # type: ignore[attr-defined]  # PEP 562: asked only for names it lacks
    sys.modules["torch._dynamo"] = module
    torch._dynamo = module


class _AfterLoad(importlib.abc.MetaPathFinder):
    """Run `then(module)` once a module has been loaded (before anything imported after it sees it)."""

    def __init__(self, name: str, then: Callable[[Any], None]):
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            try:
                self.then(module)
            except Exception:  # noqa: BLE001 - a table not remembered is scanned, as without this
                pass

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _remember_table(import_utils: Any, cache: Path) -> None:
    scan = import_utils.create_import_structure_from_path
    try:  # the scanner's own code: another transformers is another table
        version = os.stat(import_utils.__file__).st_mtime_ns
    except (OSError, AttributeError, TypeError):
        return
    memo: dict[str, Any] = {}
    inside = [0]

    def remembered(module_path: Any) -> Any:
        if inside[0]:  # the scan calls itself for each sub-folder: only the outermost call is remembered
            return scan(module_path)
        key = str(module_path)
        if key in memo:
            return memo[key]
        try:
            stamp = os.stat(key).st_mtime_ns
        except OSError:
            stamp = 0
        name = hashlib.sha256(f"{version}:{key}:{stamp}".encode()).hexdigest()[:32]
        path = cache / f"{name}.json"
        table = _read(path)
        if table is None:
            inside[0] += 1
            try:
                table = scan(module_path)
            finally:
                inside[0] -= 1
            _write(path, table)
        memo[key] = table
        return table

    import_utils.create_import_structure_from_path = remembered



# The table is {folder: {frozenset of backends: {module: set of names}}} (nested by folder); as JSON, a dict is a
# list of [key, value] pairs and a set or frozenset a tagged sorted list.

def _encode(x: Any) -> Any:
    if isinstance(x, dict):
        return {"d": [[_encode(k), _encode(v)] for k, v in x.items()]}
    if isinstance(x, frozenset):
        return {"f": sorted(x)}
    if isinstance(x, set):
        return {"s": sorted(x)}
    if isinstance(x, str):
        return x
    raise TypeError(f"not a table: {type(x).__name__}")


def _decode(x: Any) -> Any:
    if isinstance(x, str):
        return x
    if isinstance(x, dict) and len(x) == 1:
        (tag, v), = x.items()
        if tag == "d" and isinstance(v, list):
            return {_decode(k): _decode(val) for k, val in v}
        if tag in ("f", "s") and isinstance(v, list) and all(isinstance(s, str) for s in v):
            return frozenset(v) if tag == "f" else set(v)
    raise ValueError("not a table")


def _read(path: Path) -> Any:
    try:
        return _decode(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _write(path: Path, table: Any) -> None:
    try:
        text = json.dumps(_encode(table))
    except TypeError:
        return  # not a table this module knows: the next worker scans again
    write_quietly(path, text)  # unwritable: the same
