"""The interactive planner (Textual). `tui-planner` with no command opens it; see app.py."""

from __future__ import annotations


def run_app(db: str | None, preset_paths: tuple[str, ...] = (), model: str | None = None, light: bool = False) -> int:
    from engine.data.paths import shipped_db
    from engine.data.presets import load_presets
    from tui_planner.app.app import PlannerApp

    presets = load_presets(preset_paths)
    app = PlannerApp(presets, db or shipped_db(), model=model, preset_paths=preset_paths, light=light)
    app.run()
    return app.return_code or 0
