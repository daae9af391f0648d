"""`tui-planner export` and `tui-planner verify`: a measured winner as ready-to-run training settings,
and a real training run that checks them (engine/recipe/export.py, engine/recipe/verify.py)."""

from __future__ import annotations

import argparse
import shlex
import sys

from tui_planner import args as arg
from tui_planner.format import visible

EXPORT_HELP = "write the best measured setting as Hugging Face / DeepSpeed / FSDP settings"
EXPORT_DESCRIPTION = """\
Write the fastest usable measured setting for a model on a GPU count (or the
trial you name) as files you can train with: training_args.json (Hugging Face
TrainingArguments), ds_config.json (DeepSpeed, when the setting uses ZeRO; FSDP
settings sit inside training_args.json), launch.sh (torchrun), EXPLAIN.txt
(the choice, the runner-up, the expected days) and plan.json (the source trial,
which `tui-planner verify` checks). Only measured rows are exported: a refused
row (MFU above 100%) or a paper row is not a setting anyone ran."""
EXPORT_EPILOG = """\
examples:
  tui-planner export --model pythia-1b --gpu h100 --num-gpus 1 --out p1b
  tui-planner export --db mine.duckdb --model pythia-1b --gpu h200 \\
      --num-gpus 2 --out p1b-2gpu
  tui-planner export --db mine.duckdb --trial 97c988af... --out runner-up
then: tui-planner verify p1b"""

VERIFY_HELP = "train an export's settings for a few steps and check its step time"
VERIFY_DESCRIPTION = """\
Train with exactly the settings an export holds (the same Trainer, DeepSpeed or
FSDP stack, under torchrun; random data, random weights) for --warmup steps,
which are not compared (compilation), then --steps timed steps, each
synchronized. The median step is compared with the benchmark's prediction:
more than --tolerance apart, either way, is a failure of the benchmark (exit
status 1), reported with both numbers. On other hardware than the benchmark's
(e.g. a GPU plan with --device cpu) it trains as a smoke test and gives no
verdict. The result, with versions and device, goes to DIR/verify.json."""
VERIFY_EPILOG = """\
examples:
  tui-planner verify p1b
  tui-planner verify p1b --steps 10 --tolerance 0.03
  tui-planner verify tiny --device cpu           (CPU: fp16 becomes fp32)
exit status: 0 pass (or no verdict), 1 fail or training error, 2 bad input"""


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model preset id (tui-planner presets) or path/to/config.json")
    p.add_argument("--gpu", help="GPU preset id (cpu for a CPU sweep)")
    p.add_argument("--num-gpus", type=arg.whole(1), metavar="N", help="GPUs per node")
    p.add_argument("--nodes", type=arg.whole(1), default=1, metavar="K", help="nodes (default 1)")
    p.add_argument("--trial", metavar="ID", help="export this trial instead of the fastest")
    p.add_argument("--out", required=True, metavar="DIR", help="directory to write (created)")


def add_verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="a directory `tui-planner export` wrote")
    p.add_argument("--steps", type=arg.whole(1), default=5, metavar="N", help="timed steps (default 5)")
    p.add_argument("--warmup", type=arg.whole(0), default=2, metavar="N",
                   help="steps first, not compared: compile, warm-up (default 2)")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: the plan's")
    p.add_argument("--tolerance", type=arg.fraction(), default=0.05, metavar="F",
                   help="largest relative difference that passes, from 0 to 1 (default 0.05)")
    p.add_argument("--timeout", type=arg.positive(arg.MAX_SECONDS, "seconds"), default=3600, metavar="S",
                   help="kill the training run after S seconds (default 3600)")
    p.add_argument("-v", "--verbose", action="store_true", help="show the training process's output")


def run_export(args: argparse.Namespace, store, presets) -> int:
    from engine.recipe import export as recipe

    if args.model:
        presets, model = arg.resolve_model(args, presets)
        args.model = model.id
    choice = recipe.pick(store, presets, args.model, args.gpu, args.num_gpus, args.nodes, args.trial)
    r = recipe.build(choice, presets, store.path)
    paths = recipe.write(r, args.out)
    print(visible(r.explain.split("\n\nFiles:")[0], newlines=True))
    print(f"\nwrote {visible(', '.join(p.name for p in paths))} to {visible(args.out)}")
    print(f"check it: tui-planner verify {visible(shlex.quote(str(args.out)))}")
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from engine.recipe.verify import VerifyLog, VerifyRequest, VerifyStep, run_verify

    from engine.recipe import export as recipe

    req = VerifyRequest(args.dir, steps=args.steps, warmup=args.warmup, device=args.device,
                        tolerance=args.tolerance, timeout_s=args.timeout)
    plan, _, _ = recipe.load(args.dir)
    cell = "the CPU" if plan["gpu"] == "cpu" else f"{plan['num_gpus']} x {plan['gpu']}"
    print(visible(f"verify: {plan['model']} on {cell}, {plan['methods']}, micro-batch {plan['micro_batch']} x "
                  f"{plan['grad_accum']}: {args.warmup} warm-up + {args.steps} timed steps on "
                  f"{args.device or plan['device']}"), flush=True)

    def on_event(e: object) -> None:
        if isinstance(e, VerifyStep):
            kind = "warm-up" if e.warmup else "timed"
            print(f"  step {e.index} ({kind}): {e.step_s:.4g} s", flush=True)
        elif isinstance(e, VerifyLog) and args.verbose:
            print(f"  | {visible(e.line)}", flush=True)

    out = run_verify(req, on_event)
    for note in out["notes"]:
        print(f"note: {visible(note, newlines=True)}")
    predicted = out["predicted_step_s"]
    if out["verdict"] == "error":
        print(f"error: the exported settings did not train: {visible(out['error'], newlines=True)}", file=sys.stderr)
        for line in out.get("log_tail", [])[-15:]:
            print(f"  | {visible(line)}", file=sys.stderr)
        print(f"result: {visible(out['path'])}")
        return 1
    measured, diff = out["measured_step_s"], out["difference"]
    print(f"measured {measured:.4g} s per step (median of {len(out['step_times_s'])}, spread "
          f"{out['spread_s']:.2g} s; warm-up {sum(out['warmup_step_times_s']):.3g} s apart), "
          f"predicted {predicted:.4g} s: {diff:+.1%}")
    print(f"  training: {out['measured_days']:.3g} days measured vs {plan['days']:.3g} predicted "
          f"({plan['steps']:,} steps)")
    if out["verdict"] == "no verdict":
        print(f"no verdict: {visible(out['no_verdict_because'])}")
    elif out["verdict"] == "pass":
        print(f"pass: within {args.tolerance:.0%} of the benchmark")
    else:
        print(f"FAIL: the benchmark predicted {predicted:.4g} s per step, training took {measured:.4g} s "
              f"({diff:+.1%}, more than {args.tolerance:.0%} apart)")
    print(f"result: {visible(out['path'])}")
    return 1 if out["verdict"] == "fail" else 0

