"""Rich tables for the headless commands (presets, results).

Every cell and title that holds a value from a preset or a database goes in through fmt.esc: rich reads
a str cell as markup, and a results file from someone else may hold `[/]` or an escape sequence."""

from __future__ import annotations

from typing import Any, Iterable

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from engine.data.presets import Presets
from engine.data.store import plain
from tui_planner import format as fmt

FLAG_STYLE = {"implausible": "yellow", "impossible": "bold red"}


def presets_json(presets: Presets, kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("models", "gpus", "machines", "cloud"):
        if kind in (name, "all"):
            out[name] = plain(getattr(presets, name))
    out["files"] = list(presets.files)
    return out


def print_presets(presets: Presets, kind: str, console: Console | None = None) -> None:
    console = console or fmt.console()
    e = fmt.esc
    if kind in ("models", "all"):
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title="Models (replication recipe)", title_justify="left")
        for col in ("id", "params", "task", "input", "batch", "steps", "prec.", "FLOPs"):
            t.add_column(col, justify="right" if col in ("batch", "steps", "FLOPs") else "left", no_wrap=True)
        for m in presets.models.values():
            shape = f"{m.seq_len} tok" if m.seq_len else f"{m.image_size} px"
            task = {"image-classification": "image-cls"}.get(m.objective, m.objective)
            t.add_row(e(m.id), e(m.params_label), e(task), shape, f"{m.training.batch_size:,}",
                      f"{m.training.steps:,}", e(m.training.precision), f"{m.training_flops:.2g}".replace("e+", "e"))
        console.print(t)
    if kind in ("gpus", "all"):
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title="GPUs (dense peaks)", title_justify="left")
        for col in ("id", "GB", "16-bit TF/s", "TF32", "GB/s", "W", "price", "price date"):
            t.add_column(col, justify="left" if col in ("id", "price date") else "right", no_wrap=True)
        for g in presets.gpus.values():
            t.add_row(e(g.id), f"{g.memory_gb:g}", f"{g.peak_16bit_tflops:g}",
                      f"{g.peak_tf32_tflops:g}" if g.tf32 else "no", f"{g.memory_bandwidth_gbs:g}", f"{g.tdp_w:g}",
                      fmt.usd(g.price.usd if g.price else None), e(g.price.date) if g.price else "—")
        console.print(t)
    if kind in ("machines", "all"):
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title="Machines (base system without GPUs)", title_justify="left")
        for col in ("GPUs", "kind", "cost", "source"):
            t.add_column(col)
        for m in presets.machines.values():
            t.add_row(str(m.num_gpus), e(m.kind), fmt.usd(m.cost_usd), e(m.source))
        console.print(t)
    if kind in ("cloud", "all") and presets.cloud:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title="Cloud prices (on demand)", title_justify="left")
        for col in ("gpu", "provider", "$/GPU-h", "date"):
            t.add_column(col)
        for c in presets.cloud:
            t.add_row(e(c.gpu), e(c.provider), f"{c.usd_per_gpu_hour:.2f}", e(c.date))
        console.print(t)
    console.print(f"[dim]preset files: {e(', '.join(presets.files))}[/dim]")


def print_results(rows: Iterable[dict[str, Any]], console: Console | None = None) -> None:
    console = console or fmt.console()
    e = fmt.esc
    rows = list(rows)
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title=f"{len(rows)} trials", title_justify="left")
    for col in ("model", "gpu", "n", "days", "MFU", "methods", "mb x acc", "source"):
        t.add_column(col, justify="right" if col in ("n", "days", "MFU", "mb x acc") else "left", no_wrap=True)
    for r in rows:
        flag = r.get("plausibility")
        mfu = fmt.mfu(r.get("mfu"), flag)
        if flag in FLAG_STYLE:
            mfu = f"[{FLAG_STYLE[flag]}]{mfu}[/]"
        if r.get("days") is not None:
            days = fmt.days(r["days"]) + ("[yellow]†[/]" if fmt.dense_mask(r) else "")
        else:
            days = f"[dim]{e(r.get('failure_kind') or 'infeasible')}[/dim]"
        mb = f"{r['micro_batch']} x {r['grad_accum']}" if r.get("micro_batch") and r.get("grad_accum") else "—"
        t.add_row(e(r["model"]), e(r["gpu"]), str(r["num_gpus"]), days, mfu, e(fmt.methods(r)), mb, e(r["source"]))
    console.print(t)
    if any(fmt.dense_mask(r) for r in rows if r.get("days") is not None):
        console.print("[yellow]†[/] timed with a dense causal mask (engine before its 2026-11-23 fix): today's "
                      "engine is faster there.")
    if any(r.get("plausibility") in FLAG_STYLE for r in rows):
        console.print("[yellow]![/] implausible: above 60% of dense 16-bit peak.  "
                      "[bold red]!![/] impossible: above 100%. The paper's timer did not synchronize the GPU.")


def _vs(days: float | None, base: float | None) -> str:
    if days is None or not base:
        return "—"
    return fmt.change(days / base - 1)


def print_findings(cells: Iterable[Any], console: Console | None = None) -> None:
    console = console or fmt.console()
    for part in findings_renderables(cells):
        console.print(part)


def findings_renderables(cells: Iterable[Any]) -> list[Any]:
    """One small table per measured cell: winner, free-lunch, best memory-saving, median, worst, naive and
    the paper's pick, each with its time against free-lunch's; the lines under it say what that means.
    The CLI prints them, the app shows them in a dialog."""
    out: list[Any] = []
    e = fmt.esc
    cells = list(cells)
    if not cells:
        return ["no measured searches match; run `tui-planner bench` or widen the filters"]
    for c in cells:
        fl = c.free_lunch.days if c.free_lunch else None
        nodes = f" x {c.num_nodes} nodes" if c.num_nodes > 1 else ""
        title = (f"{c.model} on {c.num_gpus} x {c.gpu}{nodes}: {len(c.timed)} of {c.space_size} "
                 f"combinations timed")
        out.append(Text(fmt.visible(title), style="bold"))
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for col in ("", "methods", "mb x acc", "days", "MFU", "vs FL"):
            t.add_column(col, justify="right" if col in ("mb x acc", "days", "MFU", "vs FL") else "left",
                         no_wrap=True)

        def row(role: str, x: Any) -> None:
            if x is None:
                return
            mb = f"{x.micro_batch} x {x.grad_accum}" if x.micro_batch and x.grad_accum else "—"
            days = fmt.days(x.days) if x.days is not None else f"[dim]{e(x.failure_kind)}[/dim]"
            if x.dense_mask:
                days = f"[yellow]{days}†[/]"
            t.add_row(e(role), e(x.label), mb, days, fmt.mfu(x.mfu), _vs(x.days, fl))

        timed = c.timed
        row("winner", c.winner)
        if c.winner is not c.free_lunch:
            row("free-lunch", c.free_lunch)
        if c.best_memory_saving is not c.winner:
            row("best saving", c.best_memory_saving)
        if c.median not in (None, c.winner, c.free_lunch, c.best_memory_saving) and len(timed) > 2:
            row(f"median {(len(timed) - 1) // 2 + 1}/{len(timed)}", c.median)
        if c.worst not in (c.winner, c.free_lunch, c.best_memory_saving, c.median):
            row("worst", c.worst)
        row("naive", c.naive)
        p = c.paper
        if p is not None:
            mfu = fmt.mfu(p.mfu, p.plausibility)
            if p.plausibility in FLAG_STYLE:
                mfu = f"[{FLAG_STYLE[p.plausibility]}]{mfu}[/]"
            mb = f"{p.micro_batch} x {p.grad_accum}" if p.micro_batch and p.grad_accum else "—"
            days = fmt.days(p.days) if p.days is not None else "[dim]infeasible[/dim]"
            t.add_row(f"paper {e(p.gpu)}", e(p.label) if p.days is not None else "—", mb, days, mfu, _vs(p.days, fl))
            row("  its pick here", c.paper_pick_measured)
        out.append(t)
        notes = []
        if c.time_saved is not None:
            notes.append(f"best memory-saving setting: {_vs(c.best_memory_saving.days, fl)} time vs free-lunch "
                         f"(paper: up to -71%)")
        elif c.free_lunch is not None and not c.free_lunch.measured and timed:
            notes.append(f"free-lunch alone does not run ({c.free_lunch.failure_kind}): only memory-saving "
                         f"methods train it here")
        if p is not None and p.days is None:
            notes.append(f"the paper could not train it on {c.num_gpus} x {p.gpu}")
        elif p is not None and not p.readable:
            notes.append(f"the paper's pick on {p.gpu} cannot be read from Appendix J ({p.label})")
        elif p is not None and c.winner_agrees is not None:
            agree = "agrees with" if c.winner_agrees else "differs from"
            notes.append(f"the winner {agree} the paper's pick on {p.gpu} ({p.label}, Appendix J)")
        elif p is not None:
            notes.append(f"the paper's pick on {p.gpu} ({p.label}) was not measured here")
        if c.dense_mask:
            notes.append(f"† {len(c.dense_mask)} timed with a dense causal mask (engine before its 2026-11-23 "
                         f"fix): today's engine runs them faster; measure again to rank them")
        if c.not_timed:
            notes.append("not timed: " + ", ".join(f"{x.label} ({x.failure_kind})" for x in c.not_timed))
        if c.never_tried:
            notes.append("not tried: " + ", ".join(c.never_tried))
        out.extend(Padding(fmt.text(note, style="dim"), (0, 0, 0, 2)) for note in notes)
        out.append("")
    return out
