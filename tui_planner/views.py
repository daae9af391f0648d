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

import datetime as dt

from engine.data.presets import Presets, is_stale
from engine.data.store import plain
from tui_planner import format as fmt
from tui_planner import glossary

FLAG_STYLE = {"implausible": "yellow", "impossible": "bold red"}
# Form factors and cooling in a narrow column: `tui-planner presets --format json` has the words.
SHORT = {"consumer": "cons", "passive": "pass", "blower": "blow", "open-air": "open", "water": "wat"}


def presets_json(presets: Presets, kind: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("models", "gpus", "systems", "machines", "cloud", "electricity", "networks"):
        if kind in (name, "all") or (kind == "prices" and name in ("gpus", "systems", "cloud", "electricity")):
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
    today = dt.date.today()

    def when(d: dt.date | None) -> str:
        return "—" if d is None else fmt.date(d) + (f"[yellow]{fmt.STALE_MARK}[/]" if is_stale(d, today) else "")

    if kind in ("gpus", "all"):
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title="GPUs (dense peaks)", title_justify="left")
        for col in ("id", "form", "GB", "TF/s", "GB/s", "W", "price", "price date"):
            t.add_column(col, justify="left" if col in ("id", "form", "price date") else "right", no_wrap=True)
        for g in presets.gpus.values():
            form = "—" if g.form_factor is None else "/".join(
                [SHORT.get(g.form_factor, g.form_factor)] + ([str(g.slots), SHORT.get(g.cooling, g.cooling)]
                                                            if g.slots else []))
            t.add_row(e(g.id), e(form), f"{g.memory_gb:g}", f"{g.peak_16bit_tflops:g}", f"{g.memory_bandwidth_gbs:g}",
                      f"{g.tdp_w:g}", fmt.usd(g.price.usd if g.price else None), when(g.price.date if g.price else None))
        console.print(t)
    if kind in ("systems", "all"):
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  title="Systems (price without GPUs; HGX: the server less its GPUs)", title_justify="left")
        for col in ("id", "GPUs", "takes", "W/GPU", "price", "date"):
            t.add_column(col, justify="right" if col in ("W/GPU", "price") else "left", no_wrap=True)
        for sy in presets.systems.values():
            takes = ",".join(sy.gpu_models) if sy.gpu_models else (
                "/".join(SHORT.get(f, f) for f in sy.gpu_form_factors) + " "
                + "/".join(SHORT.get(c, c) for c in sy.gpu_cooling)
                + (f" {sy.max_gpu_slots}sl" if sy.max_gpu_slots else ""))
            t.add_row(e(sy.id), e(",".join(map(str, sy.gpu_counts))), e(takes), f"{sy.max_gpu_tdp_w:g}",
                      fmt.usd(sy.price.usd), when(sy.price.date))
        console.print(t)
    if kind in ("networks", "all") and presets.networks:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title_justify="left",
                  title="Networks between machines (rank/predict --nodes N --network ID; not priced)")
        for col in ("id", "ports", "Gb/s", "transport", "reached", "GB/s a machine"):
            t.add_column(col, justify="left" if col in ("id", "transport") else "right", no_wrap=True)
        for n in presets.networks.values():
            t.add_row(e(n.id), str(n.ports), f"{n.gbps:g}", e(n.transport), f"{n.efficiency:.0%}",
                      f"{n.node_bytes_per_s / 1e9:.1f}")
        console.print(t)
        if kind == "networks":
            for n in presets.networks.values():
                console.print(f"  {e(n.id)} ({e(n.name)}): {n.efficiency:.0%} of line rate: {e(n.efficiency_source)}"
                              + (f". {e(n.note)}" if n.note else ""), highlight=False)
    if kind in ("machines", "all"):
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                  title="The paper's machines (base system without GPUs; its own view only)", title_justify="left")
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
            t.add_row(e(c.gpu), e(c.provider), f"{c.usd_per_gpu_hour:.2f}", when(c.date))
        console.print(t)
    if kind in ("prices", "all"):
        console.print(Text("Prices and their sources", style="bold"))
        for g in presets.gpus.values():
            for label, p in (("", g.price), (" (the paper's)", g.paper_price)):
                if p is not None:
                    console.print(f"  {e(g.id)}{label} {fmt.usd(p.usd)}, {when(p.date)}: {e(p.source)}")
        for sy in presets.systems.values():
            console.print(f"  {e(sy.id)} ({e(sy.name)}) {fmt.usd(sy.price.usd)}, {when(sy.price.date)}: "
                          f"{e(sy.price.source)}")
        if presets.electricity is not None:
            el = presets.electricity
            console.print(f"  electricity ${el.usd_per_kwh:g}/kWh, {when(el.date)}: {e(el.source)}")
        if kind == "prices":
            for c in presets.cloud:
                console.print(f"  {e(c.gpu)} on {e(c.provider)} ${c.usd_per_gpu_hour:.2f}/GPU-h, {when(c.date)}: "
                              f"{e(c.source)}")
        console.print(f"[dim]{fmt.STALE_MARK} older than 12 months: set today's price with rank --price ID=USD, "
                      f"the Plan screen's Prices field, or {e('[gpus.ID.price]')} / {e('[systems.ID.price]')} in a "
                      "presets file.[/dim]")
    console.print(f"[dim]preset files: {e(', '.join(presets.files))}[/dim]")


def print_results(rows: Iterable[dict[str, Any]], console: Console | None = None) -> None:
    console = console or fmt.console()
    e = fmt.esc
    rows = list(rows)
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title=f"{len(rows)} trials", title_justify="left")
    # Where 80 columns are short, a model id or a setting folds onto a second line: nothing is cut, and the
    # GPU count stays beside its GPU.
    banded = any(fmt.band(r.get("days_low"), r.get("days_high")) for r in rows if r.get("days") is not None)
    longest_model = max([len(str(r["model"])) for r in rows] or [8])
    for col in ("model", "GPUs", "days", "band", "MFU", "setting", "batch", "from") if banded else (
            "model", "GPUs", "days", "MFU", "setting", "batch", "from"):
        wraps = col in ("model", "setting")
        least = min(12, longest_model) if col == "model" else 8  # a short model id stays on one line
        t.add_column(col, justify="right" if col in ("days", "band", "MFU", "batch") else "left",
                     no_wrap=not wraps, overflow="fold", min_width=least if wraps else None)
    for r in rows:
        flag = r.get("plausibility")
        mfu = fmt.mfu(r.get("mfu"), flag)
        if flag in FLAG_STYLE:
            mfu = f"[{FLAG_STYLE[flag]}]{mfu}[/]"
        if r.get("days") is not None:
            days = fmt.days(r["days"]) + ("[yellow]†[/]" if fmt.dense_mask(r) else "")
        else:
            days = f"[dim]{e(r.get('failure_kind') or 'infeasible')}[/dim]"
        mb = f"{r['micro_batch']}x{r['grad_accum']}" if r.get("micro_batch") and r.get("grad_accum") else "—"
        n = r["num_gpus"] * (r.get("num_nodes") or 1)
        band = fmt.band(r.get("days_low"), r.get("days_high")) if r.get("days") is not None else ""
        t.add_row(*[e(r["model"]), f"{n}x {e(r['gpu'])}", days] + ([band] if banded else [])
                  + [mfu, e(fmt.methods(r)), mb, e(glossary.SOURCE_SHORT.get(r["source"], r["source"]))])
    console.print(t)
    runs = sorted({(r["model"], r.get("training_run"), r.get("steps")) for r in rows if r.get("training_run")},
                  key=lambda x: (str(x[0]), str(x[1])))
    if runs:  # what each row's days are for (engine/data/runs.py)
        console.print("[dim]runs: " + "; ".join(
            f"{e(m)} {e(run)}" + (f", {steps:,} steps" if steps else "") for m, run, steps in runs[:6])
            + (f"; and {len(runs) - 6} more (--format json has each row's)" if len(runs) > 6 else "") + "[/dim]")
    if any(fmt.dense_mask(r) for r in rows if r.get("days") is not None):
        console.print("[yellow]†[/] timed with a dense causal mask (engine before its 2026-11-23 fix): today's "
                      "engine is faster there.")
    console.print(f"[dim]setting: {e(glossary.SETTING_LEGEND)}. batch: micro-batch x accumulation. "
                  + ("band: a prediction's low-high days. " if banded else "")
                  + "MFU: share of the GPU's peak math used. "
                  + f"{e(glossary.FROM_LEGEND)}. (The app's ? then g: the glossary.)[/dim]")
    if any(r.get("plausibility") in FLAG_STYLE for r in rows):
        console.print("[yellow]![/] implausible: above its GPU generation's plausible share of dense 16-bit peak "
                      f"({glossary.LINES}).  "
                      "[bold red]!![/] impossible: above 100%. The paper's timer did not synchronize the GPU.")


def _predicted(message: str | None) -> str:
    """'predicted 49.8 days (40.1-77.4)' from a cannot-win row's message."""
    import re

    found = re.search(r"predicted ([\d.e+]+) days(?: \(([^)]*)\))?", message or "")
    if not found:
        return "predicted"
    return f"predicted {found.group(1)} d" + (f", band {found.group(2)}" if found.group(2) else "")


def _vs(days: float | None, base: float | None) -> str:
    if days is None or not base:
        return "—"
    return fmt.change(days / base - 1)


def print_findings(cells: Iterable[Any], console: Console | None = None, scaling: Iterable[Any] = (),
                   links: Iterable[Any] = ()) -> None:
    console = console or fmt.console()
    for part in findings_renderables(cells) + multi_gpu_renderables(scaling, links):
        console.print(part)


def multi_gpu_renderables(scaling: Iterable[Any], links: Iterable[Any]) -> list[Any]:
    """Scaling 1 -> 2 -> 4 ... GPUs (the best measured time at each count, its speed-up and efficiency against
    one GPU), and what other links cost per setting (host-staged: no peer access; nodes over sockets)."""
    out: list[Any] = []
    e = fmt.esc
    scaling, links = list(scaling), list(links)
    if scaling:
        out.append(Text("Scaling on one node (the best measured setting at each GPU count)", style="bold"))
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for col in ("model", "GPU", "GPUs", "days", "MFU", "speed-up", "efficiency", "setting"):
            t.add_column(col, justify="left" if col in ("model", "GPU", "setting") else "right", no_wrap=True)
        for sc in scaling:
            for p in sc.points:
                up, eff = sc.speedup(p), sc.efficiency(p)
                t.add_row(e(sc.model), e(sc.gpu), str(p.num_gpus), fmt.days(p.days), fmt.mfu(p.mfu),
                          "—" if up is None else f"{up:.2f}x", "—" if eff is None else f"{eff:.0%}", e(p.label))
        out.append(t)
        above = sorted({f"{sc.model} on {p.num_gpus} x {sc.gpu}" for sc in scaling for p in sc.points
                        if (sc.efficiency(p) or 0) > 1.0})
        if above:
            out.append(Text("efficiency above 100% (" + ", ".join(above) + "): one GPU had to run a slower "
                            "memory-saving setting than the model's state split over several GPUs needs",
                            style="dim"))
    if links:
        out.append(Text("What the links cost (the same setting and GPU count over the machine's own links, "
                        "and over another path)", style="bold"))
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for col in ("model", "GPU", "GPUs", "setting", "own", "other path", "days", "cost"):
            t.add_column(col, justify="left" if col in ("model", "GPU", "setting", "other path") else "right",
                         no_wrap=True)
        for c in links:
            path = "host-staged (no P2P)" if c.link == "host-staged" else f"{c.num_nodes} nodes, {c.link}"
            t.add_row(e(c.model), e(c.gpu), str(c.num_gpus), e(c.label), fmt.days(c.own_days), e(path),
                      fmt.days(c.other_days), f"{c.cost:+.0%}")
        out.append(t)
        out.append(Text("own: NVLink or PCIe as the machine has it; host-staged: NCCL_P2P_DISABLE=1, GPU-to-GPU "
                        "traffic through host memory, as on cards without peer access; nodes: torchrun's c10d "
                        "rendezvous, NCCL over TCP", style="dim"))
    return out


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
        if getattr(c, "link", ""):
            nodes += ", host-staged (no P2P)" if c.link == "host-staged" else f", {c.link}"
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
            marked.append(x.changes_numerics)
            t.add_row(e(role), e(fmt.setting(x.label, x.changes_numerics, short=True)), mb, days, fmt.mfu(x.mfu),
                      _vs(x.days, fl))

        timed = c.timed
        marked: list[bool] = []
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
        notes = [fmt.NUMERICS_NOTE] if any(marked) else []
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
        unrun = [x for x in c.not_timed if x.failure_kind == "cannot-win"]
        if c.not_timed and len(unrun) < len(c.not_timed):
            notes.append("not timed: " + ", ".join(f"{x.label} ({x.failure_kind})" for x in c.not_timed
                                                   if x not in unrun))
        if unrun:
            notes.append("left unrun by the guided search (cannot win even at its band's low end; --exhaustive "
                         "measures them): " + ", ".join(f"{x.label} ({_predicted(x.failure_message)})" for x in unrun))
        for search in c.searches:
            notes.append(search.describe())
        if c.never_tried:
            notes.append("not tried: " + ", ".join(c.never_tried))
        out.extend(Padding(fmt.text(note, style="dim"), (0, 0, 0, 2)) for note in notes)
        out.append("")
    out.append(Text("vs FL: a setting's time against free-lunch alone (FL: compile, fused attention, TF32) on "
                    "the same GPUs; -30% is 30% less time. mb x acc: micro-batch x accumulation.", style="dim"))
    return out


# --- what to buy: the verdict's words ------------------------------------------------------------------


def _article(name: str) -> str:
    if name.startswith("the ") or name.startswith("your "):
        return ""
    an = name[:1].lower() in "aeiou8" or name.startswith(("HGX", "11", "18"))
    return "an " if an else "a "


def option_name(r: dict[str, Any]) -> str:
    """'4 x RTX6000ADA in a 4-GPU workstation', as markup (ids and names come from presets)."""
    name = r.get("system_name")
    where = f" in {_article(name)}{fmt.esc(name)}" if name else ""
    return f"{r['num_gpus']} x {fmt.esc(str(r['gpu']).upper())}{where}"


def days_with_band(r: dict[str, Any]) -> str:
    b = fmt.band(r.get("days_low"), r.get("days_high"))
    return f"{fmt.days(r['days'])} days" + (f" ({b})" if b else "")


def evidence(r: dict[str, Any]) -> str:
    """What an option's figure rests on, as plain text (the caller escapes it): its source and MFU; a
    prediction's band and, where nobody measured its GPU generation, that it is extrapolated; the paper's
    figure for the cell beside it when the cell is ranked on something else."""
    src = (r.get("source") or "").replace("paper-table", "paper Table ")
    mfu = f"MFU {fmt.mfu(r['mfu'], r.get('plausibility'), r.get('capped'))}" if r.get("mfu") is not None else ""
    if r.get("capped") and mfu:
        mfu += f" capped at {fmt.mfu(r['mfu'])} (this generation's line)"
    if r.get("plausibility") in fmt.FLAG_MARK:
        text = f"{src}: {mfu} is {r['plausibility']}, expect longer"
    elif src == "predicted":
        text = f"predicted, not measured, {mfu}"
        if r.get("extrapolated"):
            text += f"; extrapolated to {r['extrapolated']} GPUs, a generation nobody measured here"
    else:
        text = f"{src}, {mfu}" if mfu else src
    if r.get("paper_days") is not None and not src.startswith("paper"):
        text += (f"; paper: {fmt.days(r['paper_days'])} days, implies {fmt.mfu(r.get('paper_mfu'))} of peak"
                 + (f" ({r['paper_plausibility']})" if r.get("paper_plausibility") in fmt.FLAG_MARK else ""))
        if r.get("paper_plausibility") == "ok" and src == "predicted" and r["paper_days"] >= r.get("days_high", 0) \
                and r["paper_days"] > r["days"]:
            # engine/plan/uncertainty.band widened the band's top to it: say why the band reaches there.
            text += ": slower than the prediction, so the band reaches it"
    return text


def price_text(r: dict[str, Any], source_limit: int | None = 40) -> str:
    """An option's prices with their dates and (shortened) sources, plain text; stale ones say so."""
    def one(what: str, usd_value, when, source, stale) -> str:
        src = fmt.short_source(source, source_limit) if source_limit else " ".join(str(source).split())
        return f"{what} {fmt.priced(usd_value, when, stale)}: {src}"

    parts = [one(f"{r['num_gpus']} x {r['gpu']} at", r["gpu_price_usd"], r["gpu_price_date"],
                 r["gpu_price_source"], r["gpu_price_stale"])]
    if r.get("system_price_usd") is not None:
        parts.append(one(f"+ {r['system']}", r["system_price_usd"], r["system_price_date"],
                         r["system_price_source"], r["system_price_stale"]))
    return "; ".join(parts)


def stale_ids(r: dict[str, Any]) -> list[str]:
    """The ids whose price in this option is stale and that a price override can replace (the paper's own
    machines are not: `[machines.N] cost_usd` in a presets file is)."""
    return [i for i, stale in ((r["gpu"], r.get("gpu_price_stale")),
                               (r.get("system") if r.get("system_kind") != "paper" else None,
                                r.get("system_price_stale"))) if stale and i]


def unsold_text(rows, measured_only: bool = False) -> str:
    """The GPUs with a figure that are not an option because no system sold takes them so many at a time,
    and why, as plain text ('1 x h100 (measured): h100 goes 4 or 8 to a system (...)'), as `rank` says it under its table: a
    ranking of measured rows alone may have nothing else to show. `measured_only`: those measured alone (the
    evidence a person looks for beside the options)."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for r in rows:
        if r.get("system") is None and r.get("days") is not None and \
                (not measured_only or r.get("source") == "measured"):
            key = (str(r["gpu"]), str(r.get("source") or ""), (r.get("why") or "").split("; ")[0])
            groups.setdefault(key, []).append(r["num_gpus"])
    return "; ".join(f"{'/'.join(map(str, sorted(ns)))} x {gpu}" + (f" ({src})" if src else "") + f": {why}"
                     for (gpu, src, why), ns in groups.items())


def stale_fix(r: dict[str, Any]) -> str:
    """How to replace the stale prices of an option (plain text), or ''."""
    if not (r.get("gpu_price_stale") or r.get("system_price_stale")):
        return ""
    which = " ".join(f"{i}=USD" for i in stale_ids(r)) or "ID=USD"
    return (f"price older than 12 months: set today's with --price {which}, the Plan screen's Prices field, "
            f"or [gpus.ID.price] / [systems.ID.price] ([machines.N] for the paper's) in "
            f"~/.config/tui-planner/presets/")


def interval_lines(v: Any) -> list[str]:
    """What the pick's interval says about the choice (issue 39): a cheaper option as good a bet, and which cell
    to measure to narrow the pick's interval most (engine/plan/verdict.py, engine/plan/uncertainty.py)."""
    e = fmt.esc
    buy, lines = v.buy, []
    if buy is None:
        return lines
    ag = getattr(v, "as_good", None)
    if ag is not None:
        saved = buy["hardware_cost_usd"] - ag["hardware_cost_usd"]
        lines.append(f"[b]As good a bet[/]: {option_name(ag)} ({fmt.usd(ag['hardware_cost_usd'])}, {fmt.usd(saved)} "
                     f"less): {days_with_band(ag)}; each figure lies inside the other's interval, so the difference is "
                     "smaller than what either is known to.")
    nw = buy.get("narrow")
    if nw:
        now = fmt.band(buy.get("days_low"), buy.get("days_high"))
        if nw.get("width_after"):
            lines.append(f"To narrow the pick's interval ({now} days, {nw['width_now']:.2f}x high/low) most, measure "
                         f"{e(nw['model'])} on {nw['measure_num_gpus']} x {e(str(nw['measure_gpu']).upper())}: "
                         f"{nw['width_after']:.2f}x ({e(nw['kind_after'])})"
                         + ("; the rest is its GPU generation's and the cap's, which only measuring the pick itself "
                            "removes." if nw["width_after"] > nw["width_now"] ** 0.8 else "."))
        else:
            lines.append(f"Only measuring the pick itself ({nw['num_gpus']} x {e(str(nw['gpu']).upper())}) narrows its "
                         f"interval ({now} days, {nw['width_now']:.2f}x high/low): most of it is its GPU "
                         "generation's or the cap's, which a measurement elsewhere does not touch.")
    return lines


def verdict_lines(v: Any, model: str, budget: float, deadline: float | None, prices: bool = True,
                  brief: bool = False) -> list[str]:
    """The verdict (engine/plan/verdict.py) in words: rich markup, every value from a preset or a database
    escaped. The app shows it under the ranking (brief: no prices, the line under its table has the
    highlighted option's), `rank` under its table."""
    e = fmt.esc
    if v.outcome == "no results":
        return [f"[b]No results for {e(model)}[/b] on the allowed GPUs, systems and sources.",
                "Widen the GPUs or sources, or benchmark it."]
    lines: list[str] = []
    need = v.to_meet
    if v.outcome == "over budget":
        c = v.cheapest
        lines.append(f"[b yellow]Nothing fits the budget[/]: the cheapest option is {option_name(c)} at "
                     f"{fmt.usd(c['hardware_cost_usd'])} ({days_with_band(c)}).")
        if need is not None:
            lines.append(f"Meeting the deadline for sure needs {fmt.usd(need['hardware_cost_usd'])}: "
                         f"{option_name(need)}, {days_with_band(need)}.")
        return lines
    buy, fastest = v.buy, v.fastest
    if v.outcome in ("met", "no deadline"):
        banded = buy.get("days_low") is not None and buy.get("days_low") != buy.get("days_high")
        why = ("the fastest within budget" if v.outcome != "met" else
               "meets the deadline even at its band's top" if banded else "meets the deadline")
        lines.append(f"[b green]Buy {option_name(buy)}[/] ({fmt.usd(buy['hardware_cost_usd'])}): "
                     f"{days_with_band(buy)}, {fmt.usd(buy['cost_per_experiment_usd'])}/run; {why}.")
    elif v.outcome == "at risk":
        lines.append(f"[b yellow]Deadline at risk[/] within {fmt.usd(budget)}: the fastest, {option_name(buy)} "
                     f"({fmt.usd(buy['hardware_cost_usd'])}), takes {fmt.days(buy['days'])} days but its band "
                     f"reaches {fmt.days(buy['days_high'])} ({fmt.band(buy['days_low'], buy['days_high'])}), "
                     f"past {deadline:g}.")
    else:
        lines.append(f"[b yellow]Nothing meets the deadline[/] within {fmt.usd(budget)}: the fastest is "
                     f"{option_name(buy)} at {days_with_band(buy)} ({fmt.usd(buy['hardware_cost_usd'])}).")
    detail = evidence(buy) + (f"; {buy['config']}" if buy.get("config") else "")
    lines.append(f"[dim]{e(detail)}.[/]")
    if (prices or brief) and (fix := stale_fix(buy)):
        if brief:  # the Plan screen: its Prices field and price list are a key away
            ids = " ".join(f"{i}=USD" for i in stale_ids(buy)) or "ID=USD"
            fix = f"its price is over 12 months old: type today's in Prices (e: {ids}); $ lists every price"
        lines.append(f"[yellow]{fmt.STALE_MARK} {e(fix)}[/]")
    if v.outcome == "met" and fastest is not None and fastest is not buy:
        lines.append(f"[yellow]Fastest[/] {option_name(fastest)} ({fmt.usd(fastest['hardware_cost_usd'])}): "
                     f"{days_with_band(fastest)}, at risk: its band reaches past {deadline:g} days"
                     + ("." if brief else f" [dim]({e(evidence(fastest))})[/]."))
    if need is not None:
        lines.append(f"Meeting the deadline for sure needs {fmt.usd(need['hardware_cost_usd'])}: "
                     f"{option_name(need)}, {days_with_band(need)}.")
    ru = v.runner_up
    if ru is not None and ru is not fastest:
        saved = buy["hardware_cost_usd"] - ru["hardware_cost_usd"]
        slower = ru["days"] - buy["days"]
        trade = (f"saves {fmt.usd(saved)}" if saved > 0 else f"costs {fmt.usd(-saved)} more") + (
            f" but takes {fmt.days(slower)} more days" if slower > 0 else "")
        risk = ru.get("deadline_verdict")
        if deadline is not None and risk and risk != "met":
            b = fmt.band(ru.get("days_low"), ru.get("days_high"))
            trade += f"; {'at risk' if risk == 'at risk' else 'misses the deadline'}" + (
                f": its band is {b} days" if b else "")
        lines.append(f"Runner-up {option_name(ru)}: {trade}.")
    lines += interval_lines(v)
    if prices and not brief:
        lines.append(f"[dim]Prices: {e(price_text(buy))}.[/]")
    return lines
