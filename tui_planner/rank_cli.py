"""`tui-planner rank`: what to buy for a model, a budget and a deadline (engine/plan/ranking.py's SQL)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from rich import box
from rich.table import Table

from tui_planner import args as arg
from tui_planner import format as fmt
from tui_planner import glossary
from tui_planner import views

HELP = "what to buy: systems that are sold, ranked for a budget and a deadline"
DESCRIPTION = textwrap.fill(
    "Rank what to buy for a model: every GPU type and count in a system sold to hold them (an SXM GPU on "
    "its HGX board, a card where its width, cooling and power fit), on one figure per option: measured, "
    "else predicted (with its band), else a paper row whose implied MFU is plausible (an implausible one "
    "is shown beside, never ranked on). Each option: hardware cost from dated prices (older than 12 "
    "months: stale), training days with their low-high band, the deadline verdict (met: even the band's "
    "top is inside; at risk; missed), cost per experiment (hardware over a 5-year life, the paper's "
    "amortisation, plus energy at a dated default price), renting at a dated cloud price, the Pareto "
    "frontier. --source paper is the paper's own view: its rows with their flags, its 2024 prices and "
    "machines, no energy.", width=78)
EPILOG = (
    textwrap.fill("JSON and CSV rows carry system, days_low, days_high, deadline_verdict, price_date, "
                  "price_stale and the prices' sources.", width=78) + "\n\n"
    "examples:\n  tui-planner rank --model pythia-1b --budget 50000 --deadline 60\n"
    "  tui-planner rank --model pythia-2.8b --budget 120000 --price h100=22000\n"
    "  tui-planner rank --model pythia-2.8b --budget 120000 --kwh-price 0.09\n"
    "  tui-planner rank --model pythia-1b --budget 130000 --source paper\n"
    "  tui-planner rank --model vit-large --budget 30000 --format json"
)

JSON_FIELDS = ("gpu", "num_gpus", "system", "system_name", "hardware_cost_usd", "gpu_price_usd", "gpu_price_date",
               "gpu_price_source", "system_price_usd", "system_price_date", "system_price_source", "price_date",
               "price_stale", "days", "days_low", "days_high", "deadline_verdict", "extrapolated",
               "cost_per_experiment_usd", "energy_usd", "kwh_price_usd", "lifespan_years", "rent_usd",
               "rent_provider", "rent_date", "buy_or_rent", "within_budget", "within_deadline", "source", "status",
               "why", "config", "pareto", "mfu", "plausibility", "capped", "paper_days", "paper_mfu", "paper_plausibility",
               "trial_id", "basis")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model preset id (tui-planner presets) or path/to/config.json")
    p.add_argument("--budget", type=arg.positive(arg.MAX_USD, money=True), required=True, metavar="USD",
                   help="hardware budget in USD")
    p.add_argument("--deadline", type=arg.positive(arg.MAX_DAYS, "days"), metavar="DAYS",
                   help="training must finish within this many days")
    p.add_argument("--gpus-allowed", nargs="+", metavar="GPU", default=[], help="GPU ids to consider (default: all)")
    p.add_argument("--max-gpus", type=arg.whole(1), default=8, help="most GPUs in one machine (default 8)")
    p.add_argument("--nodes", type=arg.whole(1), default=1, metavar="N",
                   help="several machines in one run: N of each option's system, joined by --network "
                        "(predicted: nothing is measured over a real network; the network is not priced)")
    p.add_argument("--network", metavar="ID", help="the network between the machines, a preset: "
                   "eth-25g, eth-100g, roce-200g, ib-hdr-200, ib-ndr-400, ib-ndr-400x8 (`tui-planner presets "
                   "--kind networks`)")
    p.add_argument("--price", type=arg.gpu_price, action="append", default=[], metavar="ID=USD",
                   help="today's price of a GPU (per GPU) or a system (without GPUs), e.g. h100=25000 or "
                        "ws4=14000; replaces a stale one")
    p.add_argument("--lifespan-years", type=arg.positive(arg.MAX_YEARS, "years"), default=5.0,
                   help="hardware lifespan for amortising (default 5, the paper's)")
    p.add_argument("--kwh-price", type=arg.non_negative(arg.MAX_KWH_USD, money=True), metavar="USD",
                   help="electricity price per kWh (default: the presets' dated price, `tui-planner presets`; "
                        "0: leave energy out)")
    p.add_argument("--utilisation", type=arg.fraction(low_open=True), default=1.0,
                   help="share of TDP drawn while training, above 0 and at most 1 (default 1)")
    p.add_argument("--source", default="measured,predicted,paper",
                   help="sources to trust (default measured,predicted,paper; a cell is ranked on the first it "
                        "has, a paper row only if plausible); paper alone: the paper's own view")
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")


def request_from(args: argparse.Namespace):
    from engine.plan.ranking import RankRequest

    overrides = dict(args.price)  # (ID, USD) pairs, checked as they were parsed (tui_planner/args.py)
    return RankRequest(
        model=args.model, budget_usd=args.budget, deadline_days=args.deadline, gpus_allowed=tuple(args.gpus_allowed),
        max_gpus=args.max_gpus, lifespan_years=args.lifespan_years, kwh_price_usd=args.kwh_price,
        utilisation=args.utilisation, price_overrides=overrides,
        sources=tuple(s.strip() for s in args.source.split(",") if s.strip()),
        nodes=args.nodes, network=args.network,
    )


def _plain(value):
    return value.isoformat() if hasattr(value, "isoformat") else value


def legend(req, options: list[dict], energy: str) -> list[str]:
    """What every abbreviation in the table and the verdict means, one line each (markup, values escaped):
    the words of tui_planner/glossary.py, so the app's glossary says the same."""
    life = f"{req.lifespan_years:g} years" + (" (the paper's amortisation)" if req.lifespan_years == 5 else "")
    sources = sorted({(r.get("source") or "") for r in options if r["days"] is not None})
    words = {"measured": "meas measured here (GPU synchronized)", "predicted": "pred predicted, with a band "
             "(`tui-planner predict` shows how)", "paper-table1": "T1 the paper's Table 1",
             "paper-table4": "T4 the paper's Table 4"}
    lines = [
        "marks: * Pareto (nothing else is both cheaper and faster)  $ over budget  ? at risk (the deadline "
        "falls inside the band)  d misses the deadline (or has no figure)",
        "in: the system holding the GPUs: ws2/ws4 a 2-/4-GPU workstation, 2U/4U a PCIe server, HGX NVIDIA's "
        "board for SXM GPUs, T6/T7 the paper's machines",
        "hardware: the system + its GPUs at dated prices" + (f" ({fmt.STALE_MARK} a price older than 12 months)"
                                                              if any(r.get("price_stale") for r in options) else ""),
        "days: training days for the run; band: a prediction's low-high days (its likely range; measured and "
        "paper figures have none)",
        "MFU: model FLOPs utilisation, the share of the GPU's peak 16-bit math used (40-55% is good); ! above "
        f"its GPU generation's plausible line ({glossary.LINES}), !! above 100%: too fast to be true"
        + ("; ^ a prediction capped at that line (60%^: capped at 60% (this generation's line); its band is centred "
           "on it, wider by how far past the line the time model put it)"
           if any(r.get("capped") for r in options) else ""),
        f"$/run: cost per experiment: hardware x days / {life} + {energy}",
        "from: " + "  ".join(fmt.esc(words.get(s, s)) for s in sources if s),
        "paper: the paper's Table 1 days and implied MFU for the cell, shown beside, not ranked on",
        "in the verdict: free-lunch = torch.compile, fused attention, TF32; micro-batch A x B = A sequences a "
        "GPU per pass, B passes accumulated a step",
    ]
    if not any(r.get("paper_days") is not None and not (r.get("source") or "").startswith("paper")
               for r in options):
        lines.remove(lines[7])
    return lines


def mark(r: dict) -> str:
    """'*' Pareto, '$' over budget, '?' at risk, 'd' misses the deadline (or has no figure)."""
    late = {"met": "", "at risk": "?"}.get(r.get("deadline_verdict"), "d" if r.get("deadline_verdict") else "")
    if r["days"] is None:
        late = "d"
    return ("*" if r["pareto"] else " ") + ("" if r["within_budget"] else "$") + late


def run(args: argparse.Namespace, store, presets) -> int:
    from engine.plan.ranking import store_for

    presets, model = arg.resolve_model(args, presets)
    args.model = model.id
    request_from(args).validate(presets)  # a missing or unknown network says so before anything is predicted
    # predictions made now where the store has none, and for several machines over a network
    ranked_on = store_for(store, presets, model.id, args.nodes, args.network)
    try:
        return _run(args, ranked_on, presets, model)
    finally:
        if ranked_on is not store:
            ranked_on.close()


def _run(args: argparse.Namespace, store, presets, model) -> int:
    from engine.data.runs import describe_run
    from engine.plan.ranking import energy_price, no_data_gpus, rank
    from engine.plan.verdict import decide

    req = request_from(args)
    rows = rank(store, req, presets)
    if args.format == "json":
        print(json.dumps([{k: _plain(r.get(k)) for k in JSON_FIELDS} for r in rows], indent=2))
        return 0
    if args.format == "csv":
        sys.stdout.write(fmt.csv_text(JSON_FIELDS, [{k: _plain(r.get(k)) for k in JSON_FIELDS} for r in rows]))
        return 0
    console = fmt.console()
    e = fmt.esc
    view = " (the paper's view: its rows, prices and machines)" if req.paper_view else ""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title_justify="left",
              title=f"{e(req.model)}: budget {fmt.usd(req.budget_usd)}"
                    + (f", deadline {req.deadline_days:g} days" if req.deadline_days else "") + view
                    + (f"\n{req.nodes} machines a run over {e(presets.network(req.network).name)}" if req.nodes > 1
                       else "")
                    + f"\nrun: {e(describe_run(model))}"
                    # measured rows that are not an option, and why, above the options (issue 41, item 17: the
                    # one-H100 cell measured was explained a hundred lines down, after every price)
                    + (f"\n[yellow]measured, not an option[/] (no system sold takes them): {e(measured)}"
                       if (measured := views.unsold_text(rows, measured_only=True)) else ""))
    for col in ("", "GPUs", "in", "hardware", "days", "band", "MFU", "$/run", "from", "paper"):
        # The paper's figure folds onto a second line where 80 columns are short, never cut.
        t.add_column(col, justify="right" if col in ("hardware", "days", "band", "MFU", "$/run") else "left",
                     no_wrap=col != "paper", overflow="fold", min_width=4 if col == "paper" else None)
    options = [r for r in rows if r["system"] is not None]
    for r in options:
        style = "dim" if not r["within_budget"] or r["days"] is None else ""
        has = r["days"] is not None
        paper = ""
        if r.get("paper_days") is not None and not (r.get("source") or "").startswith("paper"):
            paper = f"{fmt.compact_days(r['paper_days'])} {fmt.mfu(r['paper_mfu'], r['paper_plausibility'])}"
        cost = fmt.usd(r["hardware_cost_usd"]) + (fmt.STALE_MARK if r["price_stale"] else "")
        gpus = (f"{req.nodes}x{r['num_gpus'] // req.nodes}" if req.nodes > 1 else f"{r['num_gpus']}x")
        t.add_row(mark(r), f"{gpus} {e(r['gpu'])}", e(r["system_short"]), cost,
                  fmt.days(r["days"]) if has else e(r["status"]),
                  fmt.band(r["days_low"], r["days_high"]) if has else "",
                  fmt.mfu(r["mfu"], r["plausibility"], r.get("capped")) if has else "—",
                  fmt.usd(r["cost_per_experiment_usd"]).lstrip("$") if has else "—",
                  e((r["source"] or "—").replace("paper-table", "T").replace("predicted", "pred")
                    .replace("measured", "meas")), e(paper), style=style)
    console.print(t)
    kwh, kwh_date, kwh_source = energy_price(req, presets)
    energy = (f"energy at ${kwh:g}/kWh" + (f" ({fmt.date(kwh_date)}: {e(fmt.short_source(kwh_source, 60))})"
                                           if kwh_date else "") if kwh else f"no energy ({e(kwh_source)})")
    for line in legend(req, options, energy):
        console.print(f"[dim]{line}[/dim]")
    if req.nodes > 1:
        net = presets.network(req.network)
        console.print(f"[dim]GPUs {req.nodes}xN: {req.nodes} machines of N GPUs each, one run over all of them; "
                      f"hardware is {req.nodes} systems and their GPUs. Between the machines {e(net.name)} carries "
                      f"{net.node_bytes_per_s / 1e9:.1f} GB/s a machine each way ({net.efficiency:.0%} of its line "
                      f"rate: {e(fmt.short_source(net.efficiency_source, 90))}); every figure is predicted, and its "
                      "band widens by the network's share. Not priced: NICs, cables and a switch."
                      + (f" {e(net.note)}" if net.note else "") + "[/dim]")
    v = decide(rows, req.deadline_days)
    for line in views.verdict_lines(v, req.model, req.budget_usd, req.deadline_days, prices=False):
        console.print(line)
    named: list[dict] = []
    for r in (v.buy, v.fastest, v.runner_up, v.to_meet, v.cheapest):
        if r is not None and all(r is not x for x in named):
            named.append(r)
    if named:
        console.print("[b]Prices[/b] [dim](of the options named; `tui-planner presets --kind prices` lists every "
                      "one with its source)[/dim]")
        seen: set[str] = set()
        for r in named:
            items = [(r["gpu"], "per GPU", r["gpu_price_usd"], r["gpu_price_date"], r["gpu_price_source"],
                      r["gpu_price_stale"]),
                     (r["system"], r["system_one"], r["system_price_usd"], r["system_price_date"],
                      r["system_price_source"], r["system_price_stale"])]
            for key, what, usd_value, when, source, stale in items:
                if key in seen:
                    continue
                seen.add(key)
                flag = f"[yellow]{fmt.STALE_MARK} stale[/] " if stale else ""
                console.print(f"  {flag}{e(key)} ({e(what)}) {fmt.usd(usd_value)}, {fmt.date(when)}: {e(source)}")
        if any(views.stale_fix(r) for r in rows if r["system"] is not None):
            console.print(f"[yellow]{fmt.STALE_MARK} A price older than 12 months: give today's with --price "
                          f"ID=USD, the Plan screen's Prices field, or {e('[gpus.ID.price]')} / "
                          f"{e('[systems.ID.price]')} in a presets file (~/.config/tui-planner/presets/).[/]")
        for r in named:
            if r.get("rent_usd") is not None:
                console.print(f"  renting {r['num_gpus']} x {e(r['gpu'])} instead: {fmt.usd(r['rent_usd'])} for "
                              f"this run at ${r['cloud_usd_per_gpu_hour']:.2f}/GPU-h, {e(r['rent_provider'])} "
                              f"({fmt.date(r['rent_date'])}" + (", stale" if r["rent_stale"] else "")
                              + f"); {e(r['buy_or_rent'])} is cheaper per run")
    unsold = [r for r in rows if r["system"] is None]
    if unsold:
        groups: dict[tuple[str, str], list[int]] = {}
        for r in unsold:  # the first system's reason stands for the rest (`--format json` has them all)
            groups.setdefault((r["gpu"], (r["why"] or "").split("; ")[0]), []).append(r["num_gpus"] // req.nodes)
        machines = f"{req.nodes} machines of " if req.nodes > 1 else ""
        parts = [f"{machines}{'/'.join(map(str, sorted(ns)))} x {e(g)}: {e(why)}" for (g, why), ns in groups.items()]
        console.print("[dim]Not an option (no system sold takes them; their figures stay in JSON): "
                      + "; ".join(parts) + ".[/dim]")
    missing = no_data_gpus(store, req, presets) if req.nodes == 1 else []  # several machines: predicted for all
    if missing:
        console.print(f"[dim]No data for {e(req.model)} on: {e(', '.join(missing))}.[/dim]")
    return 0
