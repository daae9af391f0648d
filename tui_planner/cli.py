"""The `tui-planner` command: the app with no arguments, headless jobs as subcommands.

Errors a user can act on (engine.data.errors.PlannerError) are printed once, without a traceback, and the
command exits 2. Nothing here imports torch; `bench` imports the engine's launcher, which starts
trial processes that do.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from engine.data.errors import PlannerError
from tui_planner import args as arg
from tui_planner import format as fmt

DESCRIPTION = """\
How long will pre-training take on these GPUs, with which settings, and what
should I buy? Built on "$100K or 100 Days" (Khandelwal et al., 2024): ships the
paper's results (flagged where faster than the hardware allows) and measured
benchmarks, and measures your own GPUs honestly (synchronized timings, MFU on
every result). With no command: the interactive planner (in a terminal), or
the database at a glance (when the output is not a terminal).
"""

EPILOG = """\
examples:
  tui-planner                               the planner: plan, chart, bench, results
  tui-planner --db mine.duckdb              ... browsing your own results file
  tui-planner presets                       models, GPUs, systems and dated prices
  tui-planner results --model pythia-1b     every result for Pythia-1B
  tui-planner rank --model pythia-1b --budget 50000 --deadline 60
                                            what to buy, fastest within budget
  tui-planner bench --model pythia-1b --db mine.duckdb
                                            measure on this machine's GPU

Your presets: TOML files in ~/.config/tui-planner/presets/ ($XDG_CONFIG_HOME)
and --presets FILE|DIR override the shipped ones, one key at a time, e.g.
  [gpus.h100.price]
  usd = 25000
  date = 2026-11-01
  source = "quote from our vendor"

MFU marks: ! implausible (above its GPU generation's line: 60% of the dense 16-bit
peak; A100, H100 and H200 65%), !! impossible (above 100%). Many of the paper's
figures are: its timer did not synchronize.
Each command has --help.
"""


def _common(top: bool) -> argparse.ArgumentParser:
    """Options that work before or after the command. A subcommand's copy has no defaults, so
    `tui-planner --db X results` keeps X (argparse would otherwise reset it)."""
    common = argparse.ArgumentParser(add_help=False)
    default = (lambda v: v) if top else (lambda v: argparse.SUPPRESS)
    common.add_argument("--db", metavar="FILE", default=default(None),
                        help="results database (default: the shipped one)")
    common.add_argument(
        "--presets", metavar="PATH", action="append", default=default([]),
        help="extra preset TOML file or directory, read after the shipped and user presets (repeatable)",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    common = _common(top=False)
    p = argparse.ArgumentParser(
        prog="tui-planner", description=DESCRIPTION, epilog=EPILOG, parents=[_common(top=True)],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from engine import __version__

    p.add_argument("--version", action="version", version=f"tui-planner {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    ap = sub.add_parser("app", parents=[common], help="the interactive planner (the default in a terminal)",
                        description="Open the interactive planner: Plan (what to buy, what-if by keyboard), "
                                    "Chart, Benchmark (live sweeps on this machine) and Results. Keys: ? for help, "
                                    "ctrl+p for every action by name.")
    ap.add_argument("--model", help="model to start with: a preset id or path/to/config.json (default pythia-1b)")
    arg.add_run_flags(ap)
    ap.add_argument("--budget", type=arg.positive(arg.MAX_USD, money=True), metavar="USD",
                    help="the Plan screen's budget (default: the last plan's, else 50000)")
    ap.add_argument("--deadline", type=arg.positive(arg.MAX_DAYS, "days"), metavar="DAYS",
                    help="the Plan screen's deadline in days (default: the last plan's, else 100)")
    ap.add_argument("--light", action="store_true", help="light theme (ctrl+t switches)")
    ap.add_argument("--fresh", action="store_true",
                    help="open on the defaults, not on the last plan (which is kept in "
                         "$XDG_CONFIG_HOME/tui-planner/last-plan.json; R on the Plan screen resets it too)")
    sub.add_parser("summary", parents=[common], help="print the database at a glance",
                   description="Print what the database holds and the fastest single GPU per model.")

    ps = sub.add_parser("presets", parents=[common], help="list models, GPUs, systems, prices and machines",
                        description="List the presets in use: shipped, then yours (see --presets). Every price "
                                    "with its date and source; one older than 12 months is marked stale.")
    ps.add_argument("--kind", choices=["models", "gpus", "systems", "machines", "cloud", "networks", "prices", "all"],
                    default="all")
    ps.add_argument("--format", choices=["table", "json"], default="table")

    rs = sub.add_parser(
        "results", parents=[common], help="print trials from a results database",
        description="Print trials (paper rows and measurements) from a results database, with MFU and "
                    "its plausibility flag.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="JSON rows carry model, gpu, num_gpus, days, mfu, plausibility, source and every method setting.\n\n"
               "examples:\n  tui-planner results --model pythia-1b --gpu h100\n"
               "  tui-planner results --summary --model pythia-410m --gpu h200\n"
               "  tui-planner results --summary --format json --db mine.duckdb",
    )
    rs.add_argument("--model", help="only this model id (see `tui-planner presets`)")
    rs.add_argument("--gpu", help="only this GPU id")
    rs.add_argument("--num-gpus", type=arg.whole(1), help="only this GPU count")
    rs.add_argument("--source", help="only this source, e.g. measured, paper-table1, paper-* ")
    rs.add_argument("--feasible", action="store_true", help="only results that fit")
    rs.add_argument("--format", choices=["table", "json", "csv"], default="table")
    rs.add_argument("--summary", action="store_true",
                    help="what each measured search found: winner, free-lunch, best memory-saving combination "
                         "and its time saved, median, worst, naive, and the paper's pick for the cell")
    rs.add_argument("--paper-gpu", metavar="GPU",
                    help="with --summary: compare with the paper's cell on this GPU (default: the same GPU, else "
                         "one of the same architecture: H100 for H200)")

    from tui_planner import rank_cli as _rank

    rk = sub.add_parser("rank", parents=[common], help=_rank.HELP, description=_rank.DESCRIPTION,
                        epilog=_rank.EPILOG + "\n\n" + arg.RUN_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _rank.add_arguments(rk)
    arg.add_run_flags(rk)

    bs = sub.add_parser(
        "bench", parents=[common], help="measure a model on this machine's GPUs over the paper's search space",
        description="Benchmark a model on the local GPUs: each combination of methods runs in its own "
                    "torchrun process with a timeout; each result is written to --db as it finishes, and "
                    "running the same command again resumes. Timings synchronize the GPU; every result "
                    "carries its MFU.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  tui-planner bench --model pythia-1b --db mine.duckdb\n"
               "  tui-planner bench --model pythia-160m --methods free-lunch --db mine.duckdb\n"
               "  tui-planner bench --model tiny --device cpu --presets my-tiny.toml --db ci.duckdb\n"
               "  tui-planner bench --model path/to/config.json --seq-len 4096 --db mine.duckdb\n\n" + arg.RUN_EPILOG,
    )
    from tui_planner import bench as _bench

    _bench.add_arguments(bs)
    arg.add_run_flags(bs)
    bs.add_argument("-v", "--verbose", action="store_true", help="show the trial processes' output")

    from tui_planner import export_cli as _export

    ex = sub.add_parser("export", parents=[common], help=_export.EXPORT_HELP, description=_export.EXPORT_DESCRIPTION,
                        epilog=_export.EXPORT_EPILOG + "\n\n" + arg.RUN_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _export.add_export_arguments(ex)
    arg.add_run_flags(ex)
    vf = sub.add_parser("verify", help=_export.VERIFY_HELP, description=_export.VERIFY_DESCRIPTION,
                        epilog=_export.VERIFY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _export.add_verify_arguments(vf)

    from tui_planner import predict_cli as _predict

    pr = sub.add_parser("predict", parents=[common], help=_predict.HELP, description=_predict.DESCRIPTION,
                        epilog=_predict.EPILOG + "\n\n" + arg.RUN_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _predict.add_arguments(pr)
    arg.add_run_flags(pr)

    from tui_planner import numerics_cli as _numerics

    nm = sub.add_parser("numerics", parents=[common], help=_numerics.HELP, description=_numerics.DESCRIPTION,
                        epilog=_numerics.EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _numerics.add_arguments(nm)

    db = sub.add_parser("db", parents=[common], help="inspect or migrate a results database")
    dbs = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    info = dbs.add_parser("info", help="schema version, runs and trial counts")
    info.add_argument("file", nargs="?")
    mig = dbs.add_parser("migrate", help="bring an older database file up to this version's schema (in place)")
    mig.add_argument("file")
    return p


BUILDS_EARLY = ("predict", "rank", "export")  # the commands whose --model may be a config.json to build


def _start_building_early(raw: list[str]) -> None:
    """A config.json that needs building begins its build before the parser is made (a sixth of a second): its
    seconds overlap everything the command does before it needs the model (engine/data/built.py). Read from the
    raw arguments; whatever is wrong with them is said by the parser, and a build never asked for is stopped at exit."""
    if "-h" in raw or "--help" in raw or "--" in raw:
        return
    # the command: the first word that is not an option or a global option's value (--db FILE, --presets PATH)
    words = [a for i, a in enumerate(raw) if not a.startswith("-") and (i == 0 or raw[i - 1] not in ("--db", "--presets"))]
    if not words or words[0] not in BUILDS_EARLY:
        return
    model = None
    for i, a in enumerate(raw):  # the last --model, as argparse takes it
        if a == "--model" and i + 1 < len(raw):
            model = raw[i + 1]
        elif a.startswith("--model="):
            model = a.split("=", 1)[1]
    if model and not model.startswith("-"):
        from engine.data.runs import start_describing

        start_describing(model)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        _start_building_early(list(sys.argv[1:] if argv is None else argv))
    except Exception:  # noqa: BLE001 - only an early start: the command reads the model for real and says what is wrong
        pass
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # a bad flag (argparse said why), --help or --version: its status, as a return
        return e.code if isinstance(e.code, int) else 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what to run again to resume a bench
    try:
        if args.command in BUILDS_EARLY and getattr(args, "model", None):
            from engine.data.runs import start_describing

            # begun already from the raw arguments, unless they hid it from the early scan (an abbreviated --mod):
            # a build begun is not begun again (engine/data/built.py: start)
            start_describing(args.model)
        if args.command is None:
            if sys.stdin.isatty() and sys.stdout.isatty():
                return _app(args)
            return _default(args)
        if args.command == "app":
            return _app(args)
        if args.command == "summary":
            return _default(args)
        if args.command == "presets":
            return _presets(args)
        if args.command == "results":
            return _results(args)
        if args.command == "db":
            return _db(args)
        if args.command == "rank":
            from tui_planner import rank_cli

            return _with_store(args, rank_cli.run)
        if args.command == "bench":
            from tui_planner import bench

            return bench.run(args)
        if args.command == "numerics":
            from tui_planner import numerics_cli

            return numerics_cli.run(args)
        if args.command == "predict":
            from tui_planner import predict_cli

            return predict_cli.run(args)
        if args.command == "export":
            from tui_planner import export_cli

            return _with_store(args, export_cli.run_export)
        if args.command == "verify":
            from tui_planner import export_cli

            return export_cli.run_verify(args)
    except PlannerError as e:
        # Its message holds file names and values from files: shown, never acted on by the terminal.
        print(f"tui-planner: error: {fmt.visible(e, newlines=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


# --- commands ---------------------------------------------------------------------------------------


def _open_store(args: argparse.Namespace, path: str | None = None, presets=None):
    from engine.data.paths import is_shipped, shipped_db
    from engine.data.presets import load_presets
    from engine.data.store import Store

    target = path or args.db or shipped_db()
    if presets is None and not is_shipped(Path(target)):  # the shipped file is not read into a checked copy
        presets = load_presets(getattr(args, "presets", ()))
    # browsing never locks a file a sweep writes; another's file is checked against the presets read with
    return Store.open(target, read_only=True, create=False, presets=presets)


def _with_store(args: argparse.Namespace, command) -> int:
    """Run a command that reads the presets and the results database (read-only)."""
    from engine.data.presets import load_presets

    presets = load_presets(args.presets)
    with _open_store(args, presets=presets) as store:
        return command(args, store, presets)


def _app(args: argparse.Namespace) -> int:
    """The app on the last plan (tui_planner/app/saved.py), the flags given winning over it."""
    from engine.data.paths import shipped_db
    from engine.data.presets import load_presets
    from tui_planner.app.app import PlannerApp

    flags = arg.run_flags(args)
    presets = load_presets(tuple(args.presets))
    app = PlannerApp(presets, args.db or shipped_db(), model=getattr(args, "model", None),
                     preset_paths=tuple(args.presets), light=getattr(args, "light", False),
                     run=None if flags.empty else flags, budget=getattr(args, "budget", None),
                     deadline=getattr(args, "deadline", None), remember=not getattr(args, "fresh", False))
    app.run()
    return app.return_code or 0


def _default(args: argparse.Namespace) -> int:
    from tui_planner.summary import print_summary

    with _open_store(args) as store:
        print_summary(store)
    return 0


def _presets(args: argparse.Namespace) -> int:
    from engine.data.presets import load_presets
    from tui_planner.views import presets_json, print_presets

    presets = load_presets(args.presets)
    if args.format == "json":
        print(json.dumps(presets_json(presets, args.kind), indent=2, default=str))
    else:
        print_presets(presets, args.kind)
    return 0


RESULT_FIELDS = (
    "model", "gpu", "num_gpus", "num_nodes", "days", "days_low", "days_high", "mfu", "plausibility", "source", "feasible",
    "free_lunch", "compile", "tf32", "attention", "kernel", "activation_checkpointing", "sharding",
    "offloading", "fused", "fp8", "micro_batch", "grad_accum", "step_s", "pass_s", "pass_spread_s", "update_s",
    "samples_per_s", "tokens_per_s", "analytic_days", "peak_memory_gb", "failure_kind",
    "failure_message", "config_source", "provenance", "run_id", "trial_id", "training_run", "steps",
)


def _results(args: argparse.Namespace) -> int:
    from engine.data.store import plain
    from tui_planner.views import print_results

    if args.summary:
        return _findings(args)
    if args.paper_gpu:
        raise PlannerError("--paper-gpu goes with --summary")
    with _open_store(args) as store:
        rows = store.trials(model=args.model, gpu=args.gpu, num_gpus=args.num_gpus, source=args.source,
                            feasible=True if args.feasible else None)
    rows = [{k: plain(r.get(k)) for k in RESULT_FIELDS} for r in rows]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    elif args.format == "csv":
        sys.stdout.write(fmt.csv_text(RESULT_FIELDS, rows))  # control characters written out, never sent
    else:
        print_results(rows)
    return 0


def _findings(args: argparse.Namespace) -> int:
    from engine.plan.findings import findings
    from tui_planner.views import print_findings

    if args.source or args.feasible or args.format == "csv":
        raise PlannerError("--summary reads measured searches only: leave out --source, --feasible and "
                           "--format csv")
    from engine.data.presets import load_presets

    presets = load_presets(args.presets)
    if args.paper_gpu:
        presets.gpu(args.paper_gpu)  # an unknown id: a clear error naming the ones known
    from engine.plan.scaling import link_costs, scaling

    with _open_store(args, presets=presets) as store:
        cells = findings(store, presets, model=args.model, gpu=args.gpu, num_gpus=args.num_gpus,
                         paper_gpu=args.paper_gpu)
        scales = [] if args.num_gpus else scaling(store, model=args.model, gpu=args.gpu)
        links = [c for c in link_costs(store, model=args.model, gpu=args.gpu)
                 if not args.num_gpus or c.num_gpus == args.num_gpus]
    if args.format == "json":
        out = []
        for c in cells:  # each cell with its model's scaling on this GPU and what other links cost in it
            d = c.as_dict()
            d["scaling"] = next((x.as_dict() for x in scales if (x.model, x.gpu) == (c.model, c.gpu)), None)
            d["links"] = [x.as_dict() for x in links
                          if (x.model, x.gpu, x.num_gpus) == (c.model, c.gpu, c.num_gpus * c.num_nodes)]
            out.append(d)
        print(json.dumps(out, indent=2, default=str))
    else:
        print_findings(cells, scaling=scales, links=links)
    return 0


def _db(args: argparse.Namespace) -> int:
    from engine.data.store import Store

    if args.db_command == "migrate":
        path = Path(args.file)
        with Store.open(path, read_only=False, create=False) as store:
            print(f"{fmt.visible(path)}: schema v{store.schema_version}")
        return 0
    with _open_store(args, args.file) as store:
        print(f"{fmt.visible(store.path)}: schema v{store.schema_version}{' (read-only)' if store.read_only else ''}")
        for row in store.summary():
            print(f"  {fmt.visible(row['source']):>14}: {row['trials']} trials, {row['feasible']} feasible, "
                  f"{row['flagged']} flagged")
        print(f"  runs: {len(store.runs())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
