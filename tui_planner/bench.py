"""`tui-planner bench`: run a sweep headless with a rich progress display (fine in a SLURM log too).

SIGTERM (SLURM's scancel, `kill`) or ctrl+c stops the running trial and ends the command with 143 or
130, saying how to resume: only a sweep that ran to its end (or to --stop-after) exits 0. What is
printed from the presets, the database or the flags goes through fmt.esc (a model id may hold `[/]`);
the commands it prints are shell-quoted.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engine.bench.events import BatchTried, Log, Measuring, SearchGuided, SweepFinished, SweepStarted, TrialFinished, TrialSkipped, TrialStarted
from engine.bench.sweep import COMPILE_MODES, SweepRequest, run_sweep
from engine.data.space import EXTRAS
from tui_planner import args as arg
from tui_planner import format as fmt

STATUS_STYLE = {"measured": "green", "dominated": "dim", "memory": "dim", "cannot-win": "dim", "oom": "yellow", "failed": "red", "timeout": "red",
                "refused": "bold red", "stopped": "yellow", "unavailable": "yellow"}


def _counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"GPU counts are whole numbers like 1 or 1,2,4, not {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"GPU counts must be at least 1, not {text!r}")
    return counts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model preset id (tui-planner presets) or path/to/config.json")
    p.add_argument("--gpus", "--gpus-per-node", type=_counts, default=[1], metavar="N[,N...]",
                   help="GPUs per node; several counts sweep each in turn, e.g. 1,2,4 (default 1)")
    p.add_argument("--nodes", type=arg.whole(1), default=1, help="nodes (default 1); more need --launcher")
    p.add_argument("--launcher", choices=["local", "srun", "local-nodes"], default=None,
                   help="how trials start: local (one node); srun (one agent per node inside a SLURM "
                        "allocation; default when --nodes > 1 under SLURM); local-nodes (emulate the nodes "
                        "on this machine)")
    p.add_argument("--methods", choices=["naive", "free-lunch", "all"], default="all",
                   help="naive baseline; + free-lunch; or every memory-saving combination (default)")
    p.add_argument("--network", metavar="ID",
                   help="with --nodes: the network preset between them, for the guided search's predictions "
                        "(default with local-nodes: loopback, the emulated nodes' TCP sockets on this machine; "
                        "`tui-planner presets --kind networks`)")
    p.add_argument("--no-p2p", action="store_true",
                   help="GPU-to-GPU traffic through host memory (NCCL_P2P_DISABLE=1 in every trial), as on cards "
                        "without peer access (most PCIe workstations): stored as the 'host-staged' interconnect, "
                        "apart from this machine's own (NVLink or PCIe) rows")
    p.add_argument("--gpu", help="GPU preset id of this machine's GPUs (detected when left out)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: tiny models, for CI")
    p.add_argument("--timeout", type=arg.positive(arg.MAX_SECONDS, "seconds"), default=900,
                   help="seconds before a trial is killed (default 900)")
    p.add_argument("--exhaustive", action="store_true",
                   help="measure every combination (the paper's full search). By default the search is "
                        "guided: every combination is predicted first (without this cell's own rows), "
                        "measured fastest predicted first, and one whose band's low end cannot beat the best "
                        "measured, or that is dominated, is left unrun with its reason and prediction stored. "
                        "Run on a database of a guided sweep, it measures only what that one left")
    p.add_argument("--repetitions", type=arg.whole(1), default=5,
                   help="timed passes per trial, at least (default 5)")
    p.add_argument("--verify-steps", type=arg.whole(0), default=0,
                   help="after timing free-lunch (or each setting --only names), run this many real optimizer "
                        "steps end to end and store "
                        "their mean beside the model's step time (pass x accumulation + update); that is N x "
                        "accumulation passes inside the trial: give --timeout room")
    p.add_argument("--verify-accum", type=arg.whole(0), default=0, metavar="N",
                   help="accumulation of those steps (default: the configuration's own)")
    p.add_argument("--stop-after", type=arg.positive(arg.MAX_SECONDS, "seconds"), default=None, metavar="SECONDS",
                   help="start no trial after this many seconds (a job's time limit); the same command "
                        "resumes")
    p.add_argument("--extras", nargs="+", default=[], choices=EXTRAS, metavar="METHOD",
                   help="also search each combination with the methods beyond the paper's: fused (liger-kernel's "
                        "Triton kernels: fused linear + cross-entropy, norms, SwiGLU, RoPE; same maths) and/or fp8 "
                        "(torchao float8 matrix products on Ada/Hopper/Blackwell; changes numerics). CUDA only; "
                        "e.g. --extras fused fp8 --only free-lunch fused fp8 fused+fp8")
    p.add_argument("--only", nargs="+", default=[], metavar="LABEL",
                   help="run only these combinations, e.g. free-lunch ckpt zero3+offload (a label with fused or "
                        "fp8 in it adds that method, as --extras does)")
    p.add_argument("--no-compile", action="store_true", help="leave torch.compile out of free-lunch")
    p.add_argument("--compile-mode", choices=COMPILE_MODES,
                   help="torch.compile's mode for the compiled combinations (default: torch's default); "
                        "stored as separate trials and exported as torch_compile_mode"),
    p.add_argument("--max-micro-batch", type=arg.whole(1, 1 << 20), default=None, metavar="N",
                   help="time each combination at the largest micro-batch that fits, but at most N (the same "
                        "setting at a smaller micro-batch: what a pass costs beside its work); stored as "
                        "separate trials (their key ends in |max-mb-N), left out of the predictor's fits")
    p.add_argument("--step-up", action="store_true",
                   help="after the uncompiled micro-batch search (the paper's), measure each compiled setting "
                        "once more at twice that micro-batch, compiled, and keep the faster: torch.compile's "
                        "graphs often need less memory, most of all with fused (the logits never held). One GPU; "
                        "tried only where the measured peak leaves room; an out-of-memory is recorded. The row "
                        "says what it tried (provenance step_up)")
    p.add_argument("--no-memory-skip", action="store_true",
                   help="run combinations the memory model says cannot fit or win (skipped by default)")
    p.add_argument("--retry-failed", action="store_true",
                   help="on resume, also try again combinations that crashed or timed out twice (given up on "
                        "by default: a host out of memory kills the same trial every time)")
    p.add_argument("--device-kind", help="provenance: the machine kind (e.g. a cloud instance type)")
    p.add_argument("--note", help="provenance: a note stored with the run")


def command_line(*words: object) -> str:
    """A command to copy into a shell: every word quoted (a --db path may hold spaces or `$(...)`)."""
    return shlex.join(["tui-planner", *(str(w) for w in words)])


def run(args: argparse.Namespace) -> int:
    if not args.db:
        from engine.data.errors import PlannerError

        raise PlannerError("bench writes to a database of your own: pass --db FILE (the shipped one is read-only)")
    import os

    launcher = args.launcher or ("local" if args.nodes == 1 else ("srun" if os.environ.get("SLURM_JOB_ID") else "local"))
    requests = [SweepRequest(
        model=args.model, methods=args.methods, num_gpus=n, num_nodes=args.nodes, launcher=launcher, gpu=args.gpu,
        device=args.device,
        db=args.db, presets=tuple(args.presets), timeout_s=args.timeout, exhaustive=args.exhaustive,
        repetitions=args.repetitions, verify_steps=args.verify_steps, verify_accum=args.verify_accum,
        step_up=args.step_up,
        stop_after_s=args.stop_after, compile=not args.no_compile, compile_mode=args.compile_mode,
        device_kind=args.device_kind, note=args.note, only=tuple(args.only), extras=tuple(args.extras),
        memory_skip=not args.no_memory_skip, retry_failed=args.retry_failed, no_p2p=args.no_p2p,
        network=args.network, max_micro_batch=args.max_micro_batch,
        run={k: v for k, v in vars(arg.run_flags(args)).items() if v is not None},
    ) for n in args.gpus]
    from engine.bench.sweep import check_database, check_launcher

    for req in requests:  # refuse a bad request before anything runs
        check_database(req)
        check_launcher(req)
    from engine.data.presets import load_presets
    from engine.data.runs import describe_run

    _, resolved = arg.resolve_model(args, load_presets(args.presets))  # a bad model or run: said before anything
    e = fmt.esc
    model = e(resolved.id)
    console = fmt.console()
    stop = threading.Event()
    signals: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:  # SLURM's scancel: stop the trial, keep the results
        signals.append(signum)
        stop.set()

    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_signal)
    # The description is plain text (markup=False): it holds the model id and a combination's label.
    progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False)
    state = {"task": None, "current": "", "t0": time.time(), "gpus": 1}
    plain = fmt.visible(resolved.id)

    def on_event(ev: object) -> None:
        if isinstance(ev, SweepStarted):
            where = f"{state['gpus']} GPU{'s' if state['gpus'] > 1 else ''}" + (
                f" x {args.nodes} nodes" if args.nodes > 1 else "")
            console.print(f"[bold]{model} on {where}[/] [dim](run: {e(describe_run(resolved))})[/]")
            state["task"] = progress.add_task(plain, total=ev.total, completed=ev.skipped)
            if ev.skipped:
                console.print(f"resuming: {ev.skipped} of {ev.total} trials already in {e(args.db)}")
            if ev.unavailable_why:
                console.print(f"[yellow]{e(ev.unavailable_why)}: its combinations end unavailable (no rows "
                              "written); install what is missing and run the same command to add them[/]")
        elif isinstance(ev, SearchGuided):
            console.print("guided search: predicted first, measured fastest predicted first; what cannot win "
                          "is left unrun (--exhaustive runs all)" + (f" [dim](basis: {e(ev.basis)})[/]" if ev.basis else ""))
            for label, text in ev.predicted:
                console.print(f"[dim]{'':>10} {e(f'{label:<20}')} {e(text)}[/]", highlight=False)
        elif isinstance(ev, TrialStarted):
            state["current"] = fmt.visible(ev.label)
            progress.update(state["task"], description=f"{plain}: {state['current']} (searching batch size)")
        elif isinstance(ev, BatchTried):
            word = "fits" if ev.fits else "OOM"
            progress.update(state["task"],
                            description=f"{plain}: {state['current']} (micro-batch {ev.micro_batch} {word})")
        elif isinstance(ev, Measuring):
            progress.update(state["task"], description=f"{plain}: {state['current']} (timing at {ev.micro_batch})")
        elif isinstance(ev, TrialFinished):
            progress.advance(state["task"])
            style = STATUS_STYLE.get(ev.status, "white")
            detail = (f"{fmt.days(ev.days)} days, MFU {fmt.mfu(ev.mfu)}, micro-batch {ev.micro_batch}"
                      + (" (cannot win: timing stopped early)" if ev.message else "")
                      if ev.status == "measured" else (ev.message or ""))
            console.print(f"[{style}]{e(f'{ev.status:>10}')}[/] {e(f'{ev.label:<20}')} {e(detail[:160])}  "
                          f"[dim]{ev.duration_s:.0f}s[/]")
            if ev.verify_step_s and ev.verify_predicted_s:
                off = ev.verify_step_s / ev.verify_predicted_s - 1
                console.print(f"{'':>10} steady run: {ev.verify_step_s:.4g} s a step vs {ev.verify_predicted_s:.4g} s "
                              f"from pass x accumulation + update ({off:+.1%})")
            if ev.step_up:
                console.print(f"{'':>10} step-up: {e(ev.step_up[:200])}")
        elif isinstance(ev, TrialSkipped):
            if not ev.reason.startswith("already"):  # a resume's silent skips stay silent; giving up is news
                console.print(f"[yellow]{'skipped':>10}[/] {e(f'{ev.label:<20}')} {e(ev.reason[:200])}")
        elif isinstance(ev, SweepFinished):
            counts = ", ".join(f"{v} {k}" for k, v in sorted(ev.counts.items()))
            took = f" in {fmt.duration(ev.elapsed_s)}"
            results = command_line("results", "--db", args.db, "--model", resolved.id)
            console.print(f"{'stopped' if ev.stopped else 'done'}: {e(counts)}{took}. Results: {e(results)}",
                          highlight=False, soft_wrap=True)  # one line: a command to copy, never broken
            if ev.best:
                console.print(f"fastest so far: [b]{e(ev.best)}[/]")
            if ev.reason:
                console.print(f"[yellow]{e(ev.reason)}[/]")
        elif isinstance(ev, Log) and getattr(args, "verbose", False):
            console.print(f"[dim]{e(ev.line)}[/]", highlight=False)

    def interrupted(signum: int) -> int:
        """Say that the run did not finish and how to resume it; the exit status a shell gives a signal."""
        again = command_line(*getattr(args, "argv", ["bench", "--model", args.model, "--db", args.db]))
        name = signal.Signals(signum).name
        print(f"tui-planner: interrupted ({name}): the sweep did not finish. Finished trials are in "
              f"{fmt.visible(args.db)}; to resume, run the same command again:\n  {fmt.visible(again)}",
              file=sys.stderr, flush=True)
        return 128 + signum

    try:
        with progress:
            for req in requests:
                state["gpus"] = req.num_gpus
                run_sweep(req, on_event=on_event, stop=stop)
                if stop.is_set():
                    break
    except KeyboardInterrupt:
        stop.set()
        return interrupted(signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if signals:
        return interrupted(signals[0])
    return 0
