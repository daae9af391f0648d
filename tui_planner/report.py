"""The Plan screen's answer as files to take to a department: a Markdown report (the run, the inputs, the
verdict with its reasons, every option with its evidence and dated prices, what is not an option and why)
and a CSV with a line an option; the app adds an SVG of the screen (tui_planner/app/app.py, x).

No Textual here: plain functions of a ranking's rows, so they are tested without an app. Every value from a
preset or a database is data: in Markdown it goes through `md` (no control character, no character that
Markdown reads as markup, `|` included, so a table cell stays one cell), in CSV through fmt.csv_text.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any, Sequence

from rich.text import Text

from tui_planner import format as fmt
from tui_planner import views

# Characters Markdown (CommonMark, GitHub's tables and math) may read as markup inside a line.
_MD = re.compile(r"([\\`*_\[\]<>|~$])")

CSV_FIELDS = ("rank", "mark", "model", "run", "gpu", "num_gpus", "system", "system_name", "hardware_cost_usd",
              "days", "days_low", "days_high", "deadline_verdict", "within_budget", "pareto",
              "cost_per_experiment_usd", "mfu", "plausibility", "capped", "source", "evidence", "config", "status", "why",
              "gpu_price_usd", "gpu_price_date", "gpu_price_source", "gpu_price_stale", "system_price_usd",
              "system_price_date", "system_price_source", "system_price_stale", "paper_days", "paper_mfu",
              "trial_id")


def md(value: Any) -> str:
    """A value as Markdown text that reads as itself: controls written out, markup characters escaped."""
    return _MD.sub(r"\\\1", fmt.visible(value))


def plain(markup: str) -> str:
    """Rich markup of ours (values in it escaped) as the plain text it shows."""
    return Text.from_markup(markup).plain


def _iso(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def stem(model: str, when: dt.datetime) -> str:
    """'plan-pythia-1b-2026-11-24-093015': a file name from the model's id (safe characters only) and the time."""
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", model)[:60]
    return f"plan-{safe}-{when:%Y-%m-%d-%H%M%S}"


def options(rows: Sequence[dict]) -> list[dict]:
    """The options the Plan screen ranks (GPUs in a system that is sold), in its order."""
    return [r for r in rows if r.get("system") is not None]


def markdown(rows: Sequence[dict], state: Any, presets: Any, on_run: Any, db: Any, when: dt.datetime) -> str:
    """The report: `rows` ranked for `state` (tui_planner/app/state.PlanState) on `on_run` (the model on the
    state's run), from database `db`, written at `when`."""
    from engine.data.runs import describe_run
    from engine.plan.ranking import energy_price
    from engine.plan.verdict import decide
    from tui_planner.app import state as st
    from tui_planner.rank_cli import legend, mark

    req = state.request(on_run)
    opts = options(rows)
    kwh, kwh_date, kwh_source = energy_price(req, presets)
    energy = (f"${kwh:g}/kWh" + (f" ({fmt.date(kwh_date)}: {fmt.visible(kwh_source)})" if kwh_date else
                                 f" ({fmt.visible(kwh_source)})") if kwh else f"none ({fmt.visible(kwh_source)})")
    gpus = ", ".join(state.gpus_allowed) if state.gpus_allowed else "every GPU type with a price"
    yours = ", ".join(f"{g} = {fmt.usd(usd)}" for g, usd in state.price_overrides) or "none"
    deadline = f"{state.deadline_days:g} days" if state.deadline_days else "none"
    out = [f"# What to buy for {md(on_run.id)}: {md(fmt.usd(state.budget_usd))}, deadline {md(deadline)}", "",
           f"Written by tui-planner on {when:%Y-%m-%d %H:%M} from the results database {md(db)}.", "",
           "## The run", "", md(describe_run(on_run)), "",
           "## Inputs", "", "| input | value |", "|---|---|",
           f"| model | {md(on_run.id)} |", f"| budget (hardware) | {md(fmt.usd(state.budget_usd))} |",
           f"| deadline | {md(deadline)} |", f"| lifespan (amortisation) | {state.lifespan_years:g} years |",
           f"| electricity | {md(energy)} |", f"| your prices | {md(yours)} |",
           f"| sources trusted | {md(st.sources_label(state.sources))} ({md(', '.join(state.sources))}) |",
           f"| GPU types | {md(gpus)} |", f"| at most | {state.max_gpus} GPUs |", ""]
    out += ["## Verdict", ""]
    lines = views.verdict_lines(decide(list(rows), state.deadline_days), on_run.id, state.budget_usd,
                                state.deadline_days, prices=False)
    out += [f"- {md(plain(line))}" for line in lines] + [""]
    out += ["## Options", "", "Each option is GPUs in a system that is sold to hold them, in the Plan screen's "
            "order; band: a prediction's likely range of days.", "",
            "| # | mark | GPUs | in | hardware | days | band | deadline | MFU | \\$/run | from | evidence |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(opts, 1):
        has = r.get("days") is not None
        cells = [str(i), mark(r).strip() or " ", f"{r['num_gpus']} x {r['gpu']}", r.get("system_short") or "",
                 fmt.usd(r["hardware_cost_usd"]) + (fmt.STALE_MARK if r.get("price_stale") else ""),
                 fmt.days(r["days"]) if has else r.get("status") or "",
                 fmt.band(r.get("days_low"), r.get("days_high")) if has else "",
                 r.get("deadline_verdict") or "", fmt.mfu(r.get("mfu"), r.get("plausibility"), r.get("capped")) if has else "",
                 fmt.usd(r.get("cost_per_experiment_usd")) if has else "", r.get("source") or "",
                 views.evidence(r) + (f"; {r['config']}" if r.get("config") else "") if has else r.get("why") or ""]
        out.append("| " + " | ".join(md(c) for c in cells) + " |")
    if not opts:
        out.append("| | | nothing on the allowed GPUs, systems and sources | | | | | | | | | |")
    out += ["", "### Prices (each dated, with its source)", ""]
    seen: set[tuple[str, str]] = set()
    for r in opts:
        for kind, key, what, usd, when_, source, stale in (
                ("gpu", r["gpu"], "per GPU", r["gpu_price_usd"], r["gpu_price_date"], r["gpu_price_source"],
                 r.get("gpu_price_stale")),
                ("system", r.get("system"), r.get("system_name"), r.get("system_price_usd"),
                 r.get("system_price_date"), r.get("system_price_source"), r.get("system_price_stale"))):
            if key is None or usd is None or (kind, key) in seen:
                continue
            seen.add((kind, key))
            old = f" ({fmt.STALE_MARK} older than 12 months)" if stale else ""
            out.append(f"- {md(key)} ({md(what)}): {md(fmt.usd(usd))}, {md(fmt.date(when_))}{md(old)}: {md(source)}")
    fixes = {views.stale_fix(r) for r in opts} - {""}
    out += [f"- {md(fmt.STALE_MARK)} {md(fix)}" for fix in sorted(fixes)]
    unsold = sorted((r for r in rows if r.get("system") is None), key=lambda r: (str(r["gpu"]), r["num_gpus"]))
    if unsold:
        out += ["", "### Not an option", ""]
        out += [f"- {md(str(r['num_gpus']) + ' x ' + str(r['gpu']))}: {md((r.get('why') or '').split('; ')[0])}"
                for r in unsold]
    out += ["", "### What the columns and marks mean", ""]
    out += [f"- {md(plain(line))}" for line in legend(req, opts, f"energy at {energy}")
            if not line.startswith(("from:", "paper:"))]  # the table here spells its sources and the paper out
    return "\n".join(out) + "\n"


def options_csv(rows: Sequence[dict], on_run: Any) -> str:
    """A line an option, in the Plan screen's order, with its evidence and its prices' dates and sources."""
    from engine.data.runs import describe_run
    from tui_planner.rank_cli import mark

    run = describe_run(on_run)
    lines = []
    for i, r in enumerate(options(rows), 1):
        line = {k: _iso(r.get(k)) for k in CSV_FIELDS}
        line.update(rank=i, mark=mark(r).strip(), model=on_run.id, run=run,
                    evidence=views.evidence(r) if r.get("days") is not None else r.get("why"))
        lines.append(line)
    return fmt.csv_text(CSV_FIELDS, lines)


def write(folder: Path, name: str, texts: dict[str, str]) -> list[Path]:
    """Write each text as `folder/name.suffix` (the folder made if missing); the paths written. OSError says
    why not."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, text in texts.items():
        path = folder / f"{name}.{suffix}"
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
