"""The direction of imports is the architecture: engine.data at the bottom, the app at the top, no cycles.

Every import statement counts, module-level or deferred inside a function (a deferred import still ties
the two modules together); the rules are the ones each package's docstring states (engine/__init__.py).
"""

import ast
from pathlib import Path

import pytest

from conftest import ROOT

# What each engine package may import of ours, besides itself.
ALLOWED = {
    "engine.data": set(),
    "engine.predict": {"engine.data"},
    "engine.plan": {"engine.data", "engine.predict"},
    "engine.bench": {"engine.data", "engine.predict"},
    "engine.recipe": {"engine.data", "engine.bench"},
}
OURS = ("engine", "tui_planner")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for top in OURS for p in sorted((ROOT / top).rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Our modules this one imports: `from pkg import sub` names the submodule where there is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m.split(".")[0] in OURS and m != name}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imports(name, path, set(mods)) for name, path in mods.items()}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_every_engine_module_lives_in_a_package_with_rules():
    for name in _modules():
        if name.startswith("engine.") and name != "engine":
            assert _package(name) in ALLOWED, f"{name}: put it in one of {sorted(ALLOWED)}"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_engine_packages_import_only_what_their_layer_allows(package):
    wrong = []
    for module, targets in _graph().items():
        if _package(module) != package:
            continue
        for t in targets:
            if t.startswith("tui_planner") or (_package(t) != package and _package(t) not in ALLOWED[package]):
                wrong.append(f"{module} imports {t}")
    assert not wrong, f"{package} may import {sorted(ALLOWED[package]) or 'nothing of ours'}: " + "; ".join(wrong)


def test_the_engine_root_imports_nothing():
    assert _graph()["engine"] == set()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_anywhere():
    assert _cycles(_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
