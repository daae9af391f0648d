"""The base install browses and ranks with no torch; engine/ never loads Textual.

Each check imports in a fresh interpreter and looks at sys.modules: static rules miss deferred imports.
"""

import json
import subprocess
import sys

import pytest

from conftest import ROOT

CODE = """
import json, sys
sys.path.insert(0, {root!r})
{body}
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'textual', 'transformers', 'deepspeed'))))
"""


def _loaded(body: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CODE.format(root=str(ROOT), body=body)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["engine.data.presets", "engine.data.store", "engine.data.formulas", "engine.data.paperdb",
                                    "engine.plan.shipped", "engine.data.paths"])
def test_headless_modules_load_neither_torch_nor_textual(module):
    assert _loaded(f"import {module}") == []


def test_browsing_commands_run_without_torch():
    body = ("from tui_planner.cli import main\n"
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main([]) == 0\n"
            "    assert main(['results', '--format', 'json']) == 0\n"
            "    assert main(['presets']) == 0\n")
    loaded = _loaded(body)
    assert not [m for m in loaded if m.split(".")[0] in ("torch", "transformers", "deepspeed")]


def test_the_app_and_its_screens_load_no_torch():
    body = ("import tui_planner.app.app, tui_planner.app.screens.bench, tui_planner.app.screens.dialogs\n"
            "import engine.bench.sweep, engine.plan.ranking, engine.bench.environment, engine.bench.events\n")
    loaded = _loaded(body)
    assert any(m.startswith("textual") for m in loaded)
    assert not [m for m in loaded if m.split(".")[0] in ("torch", "transformers", "deepspeed")]
