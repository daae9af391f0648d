"""The interactive planner (Textual). `tui-planner` with no command opens it; see app.py."""

from __future__ import annotations

from typing import Any


def run_app(db: str | None, preset_paths: tuple[str, ...] = (), model: str | None = None, light: bool = False,
            run: Any = None) -> int:
    """`model`: a preset id or path/to/config.json; `run`: the run flags (engine.data.runs.RunFlags) or None
    for the model's own run. A model or run that cannot be raises PlannerError before the app opens."""
    from engine.data.paths import shipped_db
    from engine.data.presets import load_presets
    from tui_planner.app.app import PlannerApp

    presets = load_presets(preset_paths)
    app = PlannerApp(presets, db or shipped_db(), model=model, preset_paths=preset_paths, light=light, run=run)
    app.run()
    return app.return_code or 0
