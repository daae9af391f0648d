"""`tui-planner rank`: what to buy for a model, a budget and a deadline (engine/plan/ranking.py's SQL)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys

from rich import box
from rich.table import Table

from tui_planner import args as arg
from tui_planner import format as fmt

JSON_FIELDS = ("gpu", "num_gpus", "hardware_cost_usd", "days", "cost_per_experiment_usd", "energy_usd",
               "rent_usd", "buy_or_rent", "within_budget", "within_deadline", "source", "status", "config",
               "pareto", "mfu", "plausibility", "trial_id", "days_low", "days_high", "basis")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model preset id")
    p.add_argument("--budget", type=arg.positive(arg.MAX_USD, money=True), required=True, metavar="USD",
                   help="hardware budget in USD")
    p.add_argument("--deadline", type=arg.positive(arg.MAX_DAYS, "days"), metavar="DAYS",
                   help="training must finish within this many days")
    p.add_argument("--gpus-allowed", nargs="+", metavar="GPU", default=[], help="GPU ids to consider (default: all)")
    p.add_argument("--max-gpus", type=arg.whole(1), default=8, help="most GPUs in one machine (default 8)")
    p.add_argument("--price", type=arg.gpu_price, action="append", default=[], metavar="GPU=USD",
                   help="override a GPU's price")
    p.add_argument("--lifespan-years", type=arg.positive(arg.MAX_YEARS, "years"), default=5.0,
                   help="hardware lifespan for amortising (default 5)")
    p.add_argument("--kwh-price", type=arg.non_negative(arg.MAX_KWH_USD, money=True), metavar="USD",
                   help="electricity price per kWh: adds energy cost")
    p.add_argument("--utilisation", type=arg.fraction(low_open=True), default=1.0,
                   help="share of TDP drawn while training, above 0 and at most 1 (default 1)")
    p.add_argument("--source", default="measured,paper,predicted",
                   help="sources to trust, in order of preference when a cell has several (default measured,paper,predicted)")
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")


def request_from(args: argparse.Namespace):
    from engine.plan.ranking import RankRequest

    overrides = dict(args.price)  # (GPU, USD) pairs, checked as they were parsed (tui_planner/args.py)
    return RankRequest(
        model=args.model, budget_usd=args.budget, deadline_days=args.deadline, gpus_allowed=tuple(args.gpus_allowed),
        max_gpus=args.max_gpus, lifespan_years=args.lifespan_years, kwh_price_usd=args.kwh_price,
        utilisation=args.utilisation, price_overrides=overrides,
        sources=tuple(s.strip() for s in args.source.split(",") if s.strip()),
    )


def _short(r: dict) -> str:
    if r["days"] is None:
        return ""
    mb = f" {r['micro_batch']}x{r['grad_accum']}" if r["micro_batch"] and r["grad_accum"] else ""
    return fmt.methods(r).replace("shard?", "").replace("ckpt?", "").replace("  ", " ").strip() + mb


def run(args: argparse.Namespace, store, presets) -> int:
    from engine.plan.ranking import no_data_gpus, rank

    req = request_from(args)
    rows = rank(store, req, presets)
    if args.format == "json":
        print(json.dumps([{k: r.get(k) for k in JSON_FIELDS} for r in rows], indent=2))
        return 0
    if args.format == "csv":
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=JSON_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
        sys.stdout.write(out.getvalue())
        return 0
    console = fmt.console()
    e = fmt.esc
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title_justify="left",
              title=f"{e(req.model)}: budget {fmt.usd(req.budget_usd)}"
                    + (f", deadline {req.deadline_days:g} days" if req.deadline_days else ""))
    for col in ("", "GPUs", "hardware", "days", "MFU", "$/run", "source", "setting"):
        t.add_column(col, justify="right" if col in ("hardware", "days", "MFU", "$/run") else "left", no_wrap=True)
    for r in rows:
        mark = ("*" if r["pareto"] else " ") + ("" if r["within_budget"] else "$") + ("" if r["within_deadline"] else "d")
        style = "bold green" if r is rows[0] and r["within_budget"] and r["within_deadline"] else (
            "dim" if not r["within_budget"] or r["days"] is None else "")
        days = fmt.days(r["days"]) if r["days"] is not None else e(r["status"])
        if r["days"] is not None and r.get("days_low") is not None and r.get("days_high") is not None:
            # A prediction's error band, as its wider side (JSON and CSV carry days_low and days_high).
            days += f" ±{fmt.days(max(r['days_high'] - r['days'], r['days'] - r['days_low']))}"
        t.add_row(mark, f"{r['num_gpus']} x {e(r['gpu'])}", fmt.usd(r["hardware_cost_usd"]), days,
                  fmt.mfu(r["mfu"], r["plausibility"]) if r["days"] is not None else "—",
                  fmt.usd(r["cost_per_experiment_usd"]) if r["days"] is not None else "—",
                  e((r["source"] or "—").replace("paper-table", "paper T")), e(_short(r)), style=style)
    console.print(t)
    console.print("[dim]* Pareto frontier (no option is both cheaper and faster)  $ over budget  d misses the "
                  "deadline or has no result. $/run: hardware x days / lifespan (+ energy). MFU ! above 60% of "
                  "peak: implausible (the paper's timer did not synchronize the GPU). predicted: no measurement, "
                  "± its error band (tui-planner predict explains it).[/dim]")
    fits = [r for r in rows if r["within_budget"] and r["within_deadline"]]
    if not fits:
        cheapest = min((r for r in rows if r["days"] is not None), key=lambda r: r["hardware_cost_usd"], default=None)
        msg = "Nothing fits both the budget and the deadline."
        if cheapest:
            msg += f" The cheapest option with a result costs {fmt.usd(cheapest['hardware_cost_usd'])}."
        console.print(f"[yellow]{msg}[/]")
    missing = no_data_gpus(store, req, presets)
    if missing:
        console.print(f"[dim]No data for {e(req.model)} on: {e(', '.join(missing))}.[/dim]")
    return 0
