"""`tui-planner predict`: training days on a GPU type and count nobody measured (engine/predict/),
the memory model's micro-batch per method, the error band, and `--validate` to say how good it is."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from engine.data.errors import PlannerError
from tui_planner import args as arg
from tui_planner import format as fmt

HELP = "predict days on GPUs nobody measured, with an error band"

DESCRIPTION = """\
Predict training days for a model on a GPU type and count with no
measurement. A roofline fitted to the measured rows (paper rows only where an
architecture was never measured, and only plausible ones):

  pass = micro-batch x (FLOPs/sample / peak / fitted % of peak
                        + memory-bound bytes/sample / bandwidth / fitted %)
         + gradient traffic / interconnect + offload copies / PCIe
  step = pass x accumulation + update;  days = step x steps / 86400

The micro-batch is the largest power of two the memory model fits (weights,
gradients, optimizer states and activations per sample under each method);
an option that cannot fit is infeasible, not slow. No prediction exceeds its
GPU generation's line (65% of the dense peak on A100, H100 and H200; 60%
elsewhere). The band is an 80% interval from held-out errors.
"""

EPILOG = """\
examples:
  tui-planner predict --model pythia-1b --gpu h200 --num-gpus 2
                      every setting on 2 x H200, the fastest explained
  tui-planner predict --model pythia-1b --gpu rtx4090 --num-gpus 4 \\
                      --methods zero3       one setting explained
  tui-planner predict --model pythia-2.8b --all
                      the best setting on every GPU x 1, 2, 4, 8
  tui-planner predict --validate            how good the predictions are
  tui-planner predict --model pythia-1b --all --db mine.duckdb --write

The basis is the shipped database plus --db FILE's measured and paper rows
(never predicted ones). --write stores each prediction (source 'predicted',
its basis, band and terms) in --db FILE; `rank --db FILE` then shows it,
marked predicted, where no measurement or paper row covers the cell.
"""

COUNTS = (1, 2, 4, 8)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model preset id (tui-planner presets) or path/to/config.json")
    p.add_argument("--gpu", help="GPU preset id")
    p.add_argument("--num-gpus", type=arg.whole(1), default=1, metavar="N", help="GPUs in the machine (default 1)")
    p.add_argument("--nodes", type=arg.whole(1), default=1, metavar="K",
                   help="K machines of --num-gpus GPUs each in one run, joined by --network (default 1)")
    p.add_argument("--network", metavar="ID", help="the network between the machines, a preset (eth-25g, eth-100g, "
                   "roce-200g, ib-hdr-200, ib-ndr-400, ib-ndr-400x8: `tui-planner presets --kind networks`)")
    p.add_argument("--methods", default="all", metavar="LABEL",
                   help="one combination to explain (e.g. free-lunch, ckpt, zero3+offload) or all (default)")
    p.add_argument("--extras", nargs="+", default=[], metavar="EXTRA", choices=("fused", "fp8"),
                   help="methods beyond the paper's, opt-in: fused (liger-kernel's fused kernels, same maths) and/or "
                        "fp8 (torchao float8 matmuls: changes numerics); each free-lunch setting is predicted with "
                        "them too (their effect on time is an assumption until measured: wider bands)")
    p.add_argument("--max-micro-batch", type=arg.whole(1, 1 << 20), default=None, metavar="N",
                   help="at the largest micro-batch that fits, but at most N (as `bench --max-micro-batch N` "
                        "measures it)")
    p.add_argument("--all", action="store_true", help="every GPU preset x 1, 2, 4, 8 GPUs for --model")
    p.add_argument("--validate", action="store_true",
                   help="leave-one-out over the measured cells: median and worst error")
    p.add_argument("--write", action="store_true", help="store the predictions in --db FILE (not the shipped one)")
    p.add_argument("--format", choices=["table", "json"], default="table")


def run(args: argparse.Namespace) -> int:
    from engine.predict import build_predictor
    from engine.data.presets import load_presets

    presets = load_presets(args.presets)
    if args.write:
        _writable_target(args)
    rows = _basis_rows(args, presets)
    if args.validate:
        return _validate(args, rows, presets)
    if not args.model:
        raise PlannerError("predict needs --model M (and --gpu G, or --all), or --validate")
    from engine.data.runs import describe_run, rows_on_run, run_key

    presets, model = arg.resolve_model(args, presets)
    args.model = model.id
    run = run_key(model)
    rows = rows_on_run(rows, model)  # rows of this model on another run time another step: not its basis
    if args.num_gpus < 1:
        raise PlannerError(f"--num-gpus must be at least 1, not {args.num_gpus}")
    if args.nodes > 1 and not args.network:
        raise PlannerError(f"{args.nodes} machines need a network between them: --network, one of "
                           + ", ".join(presets.networks))
    network = presets.network(args.network) if args.network else None
    nodes = args.nodes
    predictor = build_predictor(rows, presets, for_model=model.id)
    if args.all:
        if args.gpu:
            raise PlannerError("--all predicts every GPU preset: leave --gpu out (or drop --all)")
        cells = [(g, n) for g in presets.gpus for n in COUNTS if model.training.batch_size % n == 0]
    else:
        if not args.gpu:
            raise PlannerError("predict needs --gpu G (one of: " + ", ".join(presets.gpus) + "), or --all")
        presets.gpu(args.gpu)
        cells = [(args.gpu, args.num_gpus)]
    from engine.data import space

    method_set = "all"
    only = None
    extras = tuple(e for e in space.EXTRAS if e in args.extras)
    if args.methods != "all":
        # a setting beyond the paper's ('fp8', 'fused+fsdp3') names its extras itself
        labels = {m.label: m for n in {c[1] for c in cells} for m in space.search_space("all", n, space.EXTRAS)}
        if args.methods not in labels:
            raise PlannerError(f"no combination called {args.methods!r}; on {cells[0][1]} GPU(s) they are: "
                               + ", ".join(m.label for m in space.search_space("all", cells[0][1], extras)))
        only = args.methods
        extras = tuple(e for e in space.EXTRAS if e in extras or e in labels[only].extras)
    measured = _measured_cells(rows, model.id) if nodes == 1 else set()
    results = []
    for gpu, per_node in cells:
        n = per_node * nodes
        if model.training.batch_size % n:
            if args.all:
                continue
            raise PlannerError(f"{n} GPUs do not divide {model.id}'s batch of {model.training.batch_size}")
        if args.all and (model.id, gpu, n) in measured:
            continue  # measured: nothing to predict
        preds = predictor.predict_cell(model.id, gpu, n, method_set, nodes=nodes, network=network, extras=extras,
                                       max_micro_batch=args.max_micro_batch)
        if only:
            preds = [p for p in preds if p.label == only]
            if not preds:
                raise PlannerError(f"{only} is not in the search space on {n} GPU(s)")
        results.append((gpu, n, preds))
    # Stored before anything is printed: a reader that stops early (`| head`) must not lose the predictions,
    # which are the record of what was expected before a cell is measured.
    wrote = _write(args, [p for _, _, preds in results for p in preds], presets, predictor) if args.write else None
    if args.format == "json":
        print(json.dumps([{**_json(p), "run": describe_run(model), "training_run": run}
                          for _, _, preds in results for p in preds], indent=2, default=str))
    elif args.all:
        print(fmt.visible(f"run: {describe_run(model)}"))
        _print_all(model.id, results, predictor, measured)
    else:
        gpu, n, preds = results[0]
        print(fmt.visible(f"run: {describe_run(model)}"))
        _print_cell(preds, predictor, only, measured=(model.id, gpu, n) in measured)
    if wrote is not None:
        print(f"wrote {wrote} predicted rows to {fmt.visible(args.db)}", file=sys.stderr)
    return 0


# --- inputs -------------------------------------------------------------------------------------------


def _writable_target(args: argparse.Namespace) -> None:
    from engine.data.paths import is_shipped

    if not args.db:
        raise PlannerError("--write stores predictions in a database of your own: pass --db FILE")
    if is_shipped(Path(args.db)):
        raise PlannerError(f"{args.db} is the shipped database, which is read-only: pass --db FILE of your own "
                           "(scripts/build_db.py rebuilds the shipped one, predictions included)")


def _basis_rows(args: argparse.Namespace, presets: Any = None) -> list[dict[str, Any]]:
    """Measured and paper rows of the shipped database and of --db FILE (never predicted ones)."""
    from contextlib import ExitStack

    from engine.data.paths import shipped_db
    from engine.data.store import Store, evidence_rows

    paths = [shipped_db()]
    if args.db and Path(args.db).expanduser().exists():
        paths.append(Path(args.db).expanduser())
    with ExitStack() as stack:
        if presets is None:
            from engine.data.presets import load_presets

            presets = load_presets(getattr(args, "presets", ()))
        return evidence_rows([stack.enter_context(Store.open(p, read_only=True, create=False, presets=presets))
                              for p in paths])


def _measured_cells(rows: list[dict[str, Any]], model: str) -> set[tuple[str, str, int]]:
    from engine.predict import measured_cells

    return {c for c in measured_cells(rows) if c[0] == model}


# --- output -------------------------------------------------------------------------------------------


def _days(p) -> str:
    if not p.feasible:
        return "—"
    band = ""
    if p.days_low is not None and p.days_high is not None:  # a short run's band keeps two digits: 0.15-0.21, not 0-0
        text = f"{p.days_low:.2g}-{p.days_high:.2g}" if p.days_high < 1 else fmt.band(p.days_low, p.days_high)
        band = f" ({text})" if text else ""
    return fmt.days(p.days) + band


def _print_cell(preds, predictor, only: str | None, measured: bool = False) -> None:
    console = fmt.console()
    e = fmt.esc
    first = preds[0]
    where = (f"{first.nodes} machines x {first.num_gpus // first.nodes} x {e(first.gpu)} over "
             f"{e(first.network)}" if first.nodes > 1 else f"{first.num_gpus} x {e(first.gpu)}")
    title = f"{e(first.model)} on {where}: " + (
        "predicted, although measured" if measured else "predicted (no measurement of this cell)")
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title=title, title_justify="left")
    for col in ("setting", "micro-batch", "memory", "days (band)", "MFU"):
        t.add_column(col, justify="left" if col == "setting" else "right", no_wrap=True)
    for p in preds:
        if p.feasible:
            mem = f"{p.memory_need_gb:.0f}/{p.memory_capacity_gb:.0f} GB"
            t.add_row(e(fmt.setting(p.label, p.methods.changes_numerics, short=True)), str(p.micro_batch), mem, _days(p),
                      fmt.mfu(p.mfu) + ("^" if p.capped else ""))
        else:
            why = "does not fit" if "does not fit" in p.reason else "no prediction"
            mem = f"{p.memory_need_gb:.0f}/{p.memory_capacity_gb:.0f} GB" if p.memory_need_gb else "—"
            why = "no FP8 tensor cores" if p.reason.startswith("no FP8 tensor cores") else why
            t.add_row(e(fmt.setting(p.label, p.methods.changes_numerics, short=True)), "0", mem, why, "—", style="dim")
    console.print(t)
    if any(p.methods.changes_numerics for p in preds):
        console.print(e(fmt.NUMERICS_NOTE), highlight=False)
    if measured:
        console.print(f"[yellow]This cell is measured[/] (tui-planner results --model {e(shlex.quote(first.model))} "
                      f"--gpu {e(shlex.quote(first.gpu))} --num-gpus {first.num_gpus}). Its own rows are in the "
                      "basis below, so this "
                      "reproduces them rather than predicting; `predict --validate` holds the cell out.",
                      highlight=False)
    best = next((p for p in preds if p.feasible), None)
    chosen = preds[0] if only else best
    if chosen is None:
        reasons = sorted({p.reason for p in preds})
        console.print("[yellow]Infeasible: no combination fits.[/] " + e(reasons[0]))
        return
    if not chosen.feasible:
        console.print(f"[yellow]{e(chosen.label)}: {e(chosen.reason)}[/]")
        _lines(console, chosen.lines)
        return
    chosen_label = fmt.setting(chosen.label, chosen.methods.changes_numerics)
    console.print(f"[bold]{e(chosen_label)}[/], how it is derived:" if only else
                  f"fastest: [bold]{e(chosen_label)}[/], how it is derived:")
    _lines(console, chosen.lines + [f"basis: {chosen.basis}"])
    console.print("[dim]memory = need at that micro-batch / usable. ^ capped at 60% (this generation's line; A100 "
                  "65%), its band centred on it. (lo-hi): an 80% interval, from held-out errors of the same kind of "
                  "extrapolation. Check it: tui-planner predict --validate[/]")


def _lines(console: Console, lines: list[str]) -> None:
    """Each term on its own line, wrapped under itself so the explanation reads in 80 columns."""
    for line in lines:
        console.print(fmt.text(textwrap.fill(fmt.visible(line), width=78, initial_indent="  ",
                                             subsequent_indent="      "), newlines=True),
                      highlight=False, soft_wrap=True)


def _print_all(model: str, results, predictor, measured) -> None:
    console = fmt.console()
    e = fmt.esc
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, title_justify="left",
              title=f"{e(model)}: predicted best setting per GPU type and count")
    for col in ("GPUs", "days (band)", "MFU", "setting", "micro-batch"):
        t.add_column(col, justify="right" if col in ("days (band)", "MFU", "micro-batch") else "left", no_wrap=True)
    for gpu, n, preds in results:
        best = next((p for p in preds if p.feasible), None)
        if best is None:
            reason = "infeasible" if any("does not fit" in p.reason for p in preds) else "no prediction"
            t.add_row(_gpus(preds[0], gpu), reason, "—", "", "", style="dim")
        else:
            t.add_row(_gpus(best, gpu), _days(best), fmt.mfu(best.mfu),
                      e(fmt.setting(best.label, best.methods.changes_numerics)), str(best.micro_batch))
    console.print(t)
    if measured:
        cells = ", ".join(f"{n} x {g}" for _, g, n in sorted(measured))
        console.print(f"[dim]Measured, so not predicted: {e(cells)} (tui-planner results --model "
                      f"{e(shlex.quote(model))}).[/dim]")
    console.print("[dim]band: leave-one-out error spread. One cell in detail: --gpu G --num-gpus N.[/dim]")


def _gpus(p, gpu: str) -> str:
    """'4 x h100', or '2 x 4 x h100' for two machines of four."""
    return (f"{p.nodes} x " if p.nodes > 1 else "") + f"{p.num_gpus // p.nodes} x {fmt.esc(gpu)}"


def _json(p) -> dict[str, Any]:
    return {"model": p.model, "gpu": p.gpu, "num_gpus": p.num_gpus, "nodes": p.nodes, "network": p.network,
            "setting": p.label, "feasible": p.feasible, "changes_numerics": p.methods.changes_numerics,
            "reason": p.reason or None, "micro_batch": p.micro_batch, "grad_accum": p.grad_accum,
            "days": p.days, "days_low": p.days_low, "days_high": p.days_high, "mfu": p.mfu, "capped": p.capped,
            "pass_s": p.pass_s, "update_s": p.update_s, "step_s": p.step_s, "memory_need_gb": p.memory_need_gb,
            "memory_capacity_gb": p.memory_capacity_gb, "basis": p.basis, "explanation": p.lines}


# --- validation ---------------------------------------------------------------------------------------


def _validate(args: argparse.Namespace, rows, presets) -> int:
    from engine.predict import validation_report

    report = validation_report(rows, presets)
    if args.format == "json":
        print(json.dumps(report, indent=2, default=str))
        return 0
    console = fmt.console()
    e = fmt.esc
    m = report["measured"]
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=0, title_justify="left",  # one space apart: 80 columns
              title=f"Leave-one-out: {e(m['what'])}")
    for col in ("held out", "setting", "measured", "predicted", "error", "mb m/p"):
        t.add_column(col, justify="left" if col in ("held out", "setting") else "right", no_wrap=True)
    for c in m["checks"]:
        err = "—" if c["error"] is None else fmt.change(c["error"])
        pred = fmt.days(c["predicted_days"]) if c["predicted_days"] is not None else "—"  # why: listed below
        mb = f"{c['actual_micro_batch'] or '—'} / {c['predicted_micro_batch'] or '—'}"
        t.add_row(e(f"{c['model']} {c['num_gpus']}x{c['gpu']}"), e(c["label"]), fmt.days(c["actual_days"]), pred, err, mb)
    console.print(t)
    if m["median_abs"] is None:
        console.print("[yellow]No measured cell to validate against: measure with `tui-planner bench`.[/]")
    else:
        # the counts the title gave: those with no prediction are listed below, not in the errors
        unpredicted = len(m["checks"]) - len(m["errors"])
        console.print(f"median |error| {m['median_abs']:.1%}, worst {m['worst_abs']:.1%} over the {len(m['errors'])} "
                      f"of {len(m['checks'])} configurations predicted"
                      + (f" ({unpredicted} measured but not predicted: below)" if unpredicted else "")
                      + f"; best setting per cell: median {m['best_median_abs']:.1%}, worst "
                      f"{m['best_worst_abs']:.1%} over {len(m['best_errors'])} cells")
        target = m["target"]
        above = "; ".join(f"{e(cell)} {fmt.change(err)}" for cell, err in
                          sorted(target["cells_above"].items(), key=lambda x: -abs(x[1])))
        console.print(f"target (best setting per cell: median < {target['median_below']:.0%}, none > "
                      f"{target['none_above']:.0%}): " + ("[green]met[/]" if target["met"] else "[bold red]missed[/]"
                      + (f": {len(target['cells_above'])} cell{'s' if len(target['cells_above']) > 1 else ''} "
                         f"above {target['none_above']:.0%} ({above})" if above
                         else f": median {m['best_median_abs']:.1%}")))
        console.print(f"micro-batch (measured / predicted): {m['micro_batch_agree']} of {m['micro_batch_checked']} agree")
    for miss in m["missed"]:
        console.print(f"[yellow]measured, but not predicted:[/] {e(miss)}", highlight=False)
    console.print("[dim]Each cell (model x GPU x count) is held out whole and predicted from every other cell, "
                  "memory calibration included.[/dim]")
    _print_extras(console, report["extras"])
    for line in report["memory"]:
        console.print(f"memory model: {e(line)}", highlight=False)
    sk, today = report["skip"], report["skip_today"]
    if sk["trials"]:
        share = sk["saved_s"] / sk["search_s"] if sk["search_s"] else 0.0
        console.print(f"sweep memory skip, replayed on the measured sweeps with the dominance they ran with: "
                      f"{len(sk['skipped'])} of {sk['trials']} trials skipped, {sk['saved_s'] / 60:.1f} of "
                      f"{sk['search_s'] / 60:.1f} min of search saved ({share:.0%}), {len(sk['wrong'])} of them "
                      f"wrong (timed, and fitted or beat what was to dominate it); with today's dominance rule: {len(today['skipped'])} trials, "
                      f"{today['saved_s'] / 60:.1f} min", highlight=False)
    for x in report["cross"]:
        if x["median_abs"] is None:
            continue
        console.print(f"{e(x['title'])}: median |error| {x['median_abs']:.0%}, worst {x['worst_abs']:.0%} over "
                      f"{len(x['errors'])} rows ({e(x['note'])})", highlight=False)
    _print_published(console, report["published"])
    _print_intervals(console, report["intervals"])
    return 0


def _print_extras(console, x: dict) -> None:
    """fused and fp8 held out by cell: each configuration predicted without its cell, against its measurement."""
    e = fmt.esc
    if not x["checks"]:
        return
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=0, title_justify="left", title=e(x["what"]))
    for col in ("held out", "setting", "measured", "predicted (band)", "error", "from"):
        t.add_column(col, justify="left" if col in ("held out", "setting", "from") else "right", no_wrap=col != "from")
    for c in x["checks"]:
        if c["predicted_days"] is None:
            pred, err = "—", "—"
        else:
            band = f" ({fmt.days(c['low'])}-{fmt.days(c['high'])})" if c["low"] is not None else ""
            pred, err = fmt.days(c["predicted_days"]) + band, fmt.change(c["error"])
        t.add_row(e(f"{c['model']} {c['num_gpus']}x{c['gpu']}"), e(c["label"]), fmt.days(c["actual_days"]), pred, err,
                  e(c["how"].split(",")[0] if c["predicted_days"] is not None else c["reason"]))
    console.print(t)
    if x["count"]:
        console.print(f"fused and fp8: {x['within']} of {x['count']} within {x['target']:.0%} (median |error| "
                      f"{x['median_abs']:.1%}), {x['inside']} inside their band; target (every one within "
                      f"{x['target']:.0%}): " + ("[green]met[/]" if x["met"] else "[bold red]missed[/]"), highlight=False)
    for why in x["skipped"]:
        console.print(f"[yellow]not checked:[/] {e(why)}", highlight=False)
    console.print("[dim]from: whose measured ratio the prediction took (this model's or this card's other cells, "
                  "else any); each cell held out whole, the setting without the method too.[/dim]")


def _print_intervals(console, iv: dict) -> None:
    """The calibrated intervals: per kind of extrapolation, its held-out cases and how many the interval held."""
    from engine.predict.intervals import FLOOR_BOUND, FLOOR_LIFT

    e = fmt.esc
    level = iv["level"]
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), title_justify="left",
              title=f"{level:.0%} intervals by kind of extrapolation ({iv['cases']} held-out cases: cells, "
                    "architectures, GPU types and counts held out whole)")
    for col in ("kind", "cases", "inside", "coverage", "width"):
        t.add_column(col, justify="left" if col == "kind" else "right", no_wrap=True)
    for k in iv["kinds"] + iv["published"]:
        if k["coverage"] is None:
            t.add_row(e(k["kind"]), "—", "—", "—", "—")
            continue
        cov = f"{k['coverage']:.0%}"
        t.add_row(e(k["kind"]), str(k["cases"]), str(k["inside"]), f"[bold red]{cov}[/]" if k["off"] else cov,
                  f"{k['median_width']:.2f}x")
    console.print(t)
    console.print("[dim]width: the median interval's high / low, each case's width worked out without its own model's "
                  "cases (published rows: without their own source's, or generation's)[/dim]")
    if any(k["kind"] == FLOOR_BOUND for k in iv["kinds"]):
        console.print(f"[dim]{FLOOR_BOUND}: whatever the evidence, a pass its floor lifts by more than "
                      f"{(FLOOR_LIFT - 1) * 100:.0f}% over its GPU work (a small micro-batch; the capped measurements "
                      "among them, each predicted at its cap); never narrower than its evidence's own kind[/dim]")
    if iv["met"]:
        console.print(f"coverage: [green]met[/] within {iv['tolerance'] * 100:.0f} points of {level:.0%} on every kind "
                      f"with at least {iv['min_cases']} cases", highlight=False)
    for k in iv["kinds"] + iv["published"]:
        if k["off"]:
            side = "too narrow" if k["coverage"] < level else "wider than it needs"
            console.print(f"[bold red]coverage missed:[/] {e(k['kind'])}: {k['inside']} of {k['cases']} held-out cases "
                          f"inside, {k['coverage']:.0%} against the stated {level:.0%} (its interval is {side})",
                          highlight=False)
        elif k["coverage"] is None:
            console.print(f"[yellow]not checked:[/] {e(k['kind'])}: its {k['rows']} rows are all from "
                          f"{e(', '.join(k['groups']))}, with nothing outside to calibrate on", highlight=False)
        elif k["cases"] < iv["min_cases"]:
            console.print(f"[yellow]too few to judge:[/] {e(k['kind'])}: {k['cases']} cases", highlight=False)
    if iv["single_cell"]:
        words = ", ".join(f"{e(a)} {w:.2f}x" for a, w in sorted(iv["single_cell"].items(), key=lambda x: -x[1]))
        console.print(f"measured in one cell only, so at least as wide as their own held-out errors (high / low): "
                      f"{words}", highlight=False)


def _print_published(console, pub: dict) -> None:
    """Other GPU generations, checked on published measurements (data/external)."""
    e = fmt.esc
    if not pub.get("rows"):
        console.print(f"published measurements: none used ({e(pub.get('why', ''))})", highlight=False)
        return
    for title, key in (("Published rows, each group held out, per source", "by_source"),
                       ("... per GPU generation", "by_generation"),
                       ("Each generation predicted as if nobody had measured it (its fallback's factors)",
                        "extrapolated")):
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), title_justify="left", title=title)
        for col in ("group", "rows", "median |error|", "worst", "median"):
            t.add_column(col, justify="left" if col == "group" else "right", no_wrap=True)
        for s in pub[key]:
            t.add_row(e(s["group"]), str(s["count"]), f"{s['median_abs']:.1%}", f"{s['worst_abs']:.1%}",
                      fmt.change(s["median"]))
        console.print(t)
    r = pub["ratios"]
    if r["count"]:
        console.print(f"speed ratio of two GPUs on the same published run: {r['within_20']} of {r['count']} within "
                      f"20%, median |error| {r['median_abs']:.1%}, worst {r['worst_abs']:.1%}", highlight=False)
    rel = pub.get("relative", [])
    if rel:
        t = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), title_justify="left",
                  title="Speed against the H100 on the same published run (the A100 where a source ran no H100; "
                        "held out; median over the source's runs)")
        for col in ("source", "card", "runs", "published", "predicted", "error", "worst"):
            t.add_column(col, justify="left" if col in ("source", "card") else "right", no_wrap=True)
        for r in rel:
            vs = r.get("against", "h100")
            t.add_row(e(r["source"]), e(r["gpu"] + ("" if vs == "h100" else f"/{vs}")), str(r["runs"]),
                      f"{r['published']:.2f}x", f"{r['predicted']:.2f}x", fmt.change(r["error"]), fmt.change(r["worst"]))
        console.print(t)
        missed = [r for r in rel if not r["met"]]
        for r in missed:
            console.print(f"[bold red]relative speed missed:[/] {e(r['gpu'])} against the "
                          f"{e(r.get('against', 'h100')).upper()} in {e(r['source'])}: "
                          f"predicted {r['predicted']:.2f}x, published {r['published']:.2f}x ({r['error']:+.0%}, "
                          f"target 15%)", highlight=False)
    factors = ", ".join(f"{e(g)} compute x {f['compute']:.2f} memory x {f['memory']:.2f} ({f['rows']} rows)"
                        for g, f in pub["factors"].items())
    console.print(f"generation factors against Hopper: {factors}", highlight=False)
    cards = ", ".join(f"{e(c)} x {f['compute']:.2f} ({f['rows']} rows)" for c, f in pub.get("cards", {}).items())
    if cards:
        console.print(f"a card's own factor on its generation's compute: {cards}", highlight=False)
    borrowed = ", ".join(f"{e(c)} from {e(s)}" for c, s in pub.get("borrowed", {}).items())
    if borrowed:
        console.print(f"a card without rows at the factor of the card on its chip (same_chip_as): {borrowed}",
                      highlight=False)
    console.print(f"attention against the matmuls x {pub['attention']:.2f}; communication exposed on one machine: "
                  f"{pub['exposed']:.0%} of the modelled (our predictions take the overlap from pairs measured over two "
                  "paths instead: engine/predict/comm.py)", highlight=False)
    left = "; ".join(f"{n} {e(why)}" for why, n in sorted(pub["left_out"].items(), key=lambda x: -x[1]))
    console.print(f"[dim]{pub['rows']} published rows used; left out: {left}[/dim]", highlight=False)


# --- writing ------------------------------------------------------------------------------------------


def _write(args: argparse.Namespace, preds, presets, predictor) -> int:
    from engine.predict import write_predictions
    from engine.data.store import Store

    with Store.open(args.db, read_only=False) as store:
        return write_predictions(store, preds, presets, command=shlex.join(["predict"] + _argv(args)))


def _argv(args: argparse.Namespace) -> list[str]:
    out = []
    if args.model:
        out += ["--model", args.model]
    if args.gpu:
        out += ["--gpu", args.gpu, "--num-gpus", str(args.num_gpus)]
    if args.nodes > 1:
        out += ["--nodes", str(args.nodes), "--network", args.network]
    if args.all:
        out.append("--all")
    if args.methods != "all":
        out += ["--methods", args.methods]
    if args.extras:
        out += ["--extras", *args.extras]
    if args.max_micro_batch:
        out += ["--max-micro-batch", str(args.max_micro_batch)]
    return out
