"""What `tui-planner` with no arguments prints until the app lands: the database at a glance."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from engine.data.store import Store
from tui_planner import format as fmt


def print_summary(store: Store, console: Console | None = None) -> None:
    console = console or fmt.console()
    e = fmt.esc
    console.print(f"[bold]tui-planner[/bold] — database [cyan]{e(store.path)}[/cyan]"
                  f"{' (read-only)' if store.read_only else ''}, schema v{store.schema_version}")
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="What it holds", title_justify="left")
    for col in ("source", "trials", "models", "GPU types", "feasible", "MFU flagged"):
        t.add_column(col, justify="left" if col == "source" else "right")
    for r in store.summary():
        t.add_row(e(r["source"]), str(r["trials"]), str(r["models"]), str(r["gpus"]), str(r["feasible"]), str(r["flagged"]))
    console.print(t)
    best = store.query(
        """SELECT model, gpu, num_gpus, days, mfu, plausibility, source FROM trials
           WHERE feasible AND num_gpus = 1 AND source IN ('measured', 'paper-table1')
           QUALIFY row_number() OVER (PARTITION BY model ORDER BY source = 'measured' DESC, days) = 1
           ORDER BY days"""
    )
    if best:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="Fastest single GPU per model", title_justify="left")
        for col in ("model", "gpu", "days", "MFU", "source"):
            t.add_column(col, justify="right" if col in ("days", "MFU") else "left")
        for r in best:
            t.add_row(e(r["model"]), e(r["gpu"]), fmt.days(r["days"]), fmt.mfu(r["mfu"], r["plausibility"]), e(r["source"]))
        console.print(t)
    console.print("In a terminal, [bold]tui-planner[/bold] opens the planner; see also [bold]tui-planner results --help[/bold], "
                  "[bold]tui-planner presets[/bold] and [bold]tui-planner --help[/bold].")
