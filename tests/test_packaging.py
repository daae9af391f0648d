"""A wheel built from the repository carries presets/ and db/, and finds them once installed."""

import subprocess
import sys
import zipfile

from conftest import ROOT


def test_wheel_carries_presets_and_db(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("tui_planner-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("engine/_data/presets/models.toml", "engine/_data/presets/gpus.toml",
                   "engine/_data/presets/machines.toml", "engine/_data/db/tui-planner.duckdb",
                   "engine/_data/presets/cpu/tiny.toml",  # the Benchmark screen's models without a GPU
                   "tui_planner/cli.py", "engine/data/store.py"):
        assert needed in names
    # Installed from the wheel alone (no repository on the path), the command finds its data.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                          "from tui_planner.cli import main; raise SystemExit(main(['db', 'info']))", str(target)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert str(target) in out.stdout and "read-only" in out.stdout
