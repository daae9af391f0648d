"""Where the shipped data lives: presets/ and db/ at the repository top, or inside the wheel.

A wheel carries them as engine/_data/{presets,db} (pyproject.toml, force-include); a source checkout
or editable install reads them from the repository root. User presets live in the config directory.
"""

from __future__ import annotations

import os
from pathlib import Path

_ENGINE = Path(__file__).resolve().parent.parent


def _data_dir(name: str) -> Path:
    packaged = _ENGINE / "_data" / name
    if packaged.is_dir():
        return packaged
    return _ENGINE.parent / name


def presets_dir() -> Path:
    """The shipped presets (models, GPUs, machines, cloud prices)."""
    return _data_dir("presets")


def db_dir() -> Path:
    """The shipped benchmark databases."""
    return _data_dir("db")


def external_dir() -> Path:
    """Published measurements from other sources (data/external/), which calibrate and check the predictor
    on GPUs we cannot run."""
    packaged = _ENGINE / "_data" / "external"
    return packaged if packaged.is_dir() else _ENGINE.parent / "data" / "external"


def shipped_db() -> Path:
    """The database the app opens when no --db is given: measured results and the paper's."""
    return db_dir() / "tui-planner.duckdb"


def user_presets_dir() -> Path:
    """TOML files here override or extend the shipped presets ($XDG_CONFIG_HOME/tui-planner/presets)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tui-planner" / "presets"


def user_db() -> Path:
    """Where the app writes this machine's benchmarks by default ($XDG_DATA_HOME/tui-planner)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tui-planner" / "results.duckdb"


def is_shipped(path: Path) -> bool:
    """Shipped databases open read-only: a file in the shipped folder, reached by any path or link, or
    another name (a hard link) of the shipped database itself."""
    try:
        if Path(path).resolve().parent == db_dir().resolve():
            return True
        return Path(path).exists() and os.path.samefile(path, shipped_db())
    except (OSError, ValueError):
        return False
