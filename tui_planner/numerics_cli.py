"""`tui-planner numerics`: what fused kernels or FP8 do to the loss, measured (engine/bench/numerics.py)."""

from __future__ import annotations

import argparse
import json

from tui_planner import args as arg
from tui_planner import format as fmt

HELP = "measure what fused kernels or FP8 do to the loss: a short training run against bf16"
DESCRIPTION = (
    "Train a model twice from one initialisation on real text (CPython's reference documentation, as bytes: "
    "nothing to download): bf16 free-lunch, and with the method (fused: liger-kernel's kernels; fp8: torchao's "
    "float8 matrix products). Prints each run's loss at the end and the largest gap along the way, and, over "
    "the second half, the gap paired step by step on the same batches with its 95% interval: 'under 1%' only "
    "where the whole interval is, 'not resolved' where the run is too short or its batches too small to tell "
    "(then: more steps, or more tokens a step). Bf16 from a second initialisation gives the noise floor. With "
    "--db, stores them on the model's measured rows that used the same method, where the results table and "
    "the details show them. Runs on the first GPU, one run after another; with three or more GPUs visible, the "
    "runs go side by side, one a card, and a fourth card trains the method from the second initialisation too "
    "(the gap measured twice). --device cpu emulates fp8 (slow, for checking the tool).")
EPILOG = ("examples:\n"
          "  tui-planner numerics --model pythia-1b --extras fp8 --db mine.duckdb\n"
          "  tui-planner numerics --model llama-3.2-1b --extras fused fp8 --steps 500 --db mine.duckdb\n"
          "  tui-planner numerics --model pythia-2.8b --extras fp8 --ckpt --micro-batch 4\n"
          "  CUDA_VISIBLE_DEVICES=0,1,2,3 tui-planner numerics --model pythia-6.9b --extras fp8 --ckpt \\\n"
          "      --micro-batch 8 --json fp8.json    # four runs at once, one a GPU\n\n"
          "One GPU holds the model's fp32 weights, gradients and Adam states (16 bytes a parameter: Pythia-6.9B\n"
          "needs 110 GB before activations, an H200's 141 GB). Results measured on the CPU (fp8 emulated) are\n"
          "printed, never stored. An fp8 run here is not compiled (the maths, not the speed): its casts run unfused, so\n"
          "it takes longer than the bf16 run beside it; give --timeout room.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from engine.data.space import EXTRAS

    p.add_argument("--model", required=True, help="a model preset id, or the path of a config.json")
    p.add_argument("--extras", nargs="+", required=True, choices=EXTRAS, metavar="METHOD",
                   help="the method to compare with bf16: fused, fp8, or both (one run with both)")
    p.add_argument("--steps", type=arg.whole(10, 1_000_000), default=300, help="optimizer steps of each run (default 300)")
    p.add_argument("--micro-batch", type=arg.whole(1, 65_536), default=8, help="sequences a step (default 8)")
    p.add_argument("--seq-len", type=arg.whole(16, 1 << 20), default=512, dest="numerics_seq_len",
                   help="tokens a sequence (default 512, at most the model's)")
    p.add_argument("--ckpt", action="store_true", help="activation checkpointing in both runs (a model too "
                                                       "large for one GPU without it)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--seed", type=arg.whole(0, 2**31 - 1), default=0)
    p.add_argument("--one-card", action="store_true",
                   help="one run after another on the first GPU, even with three or more visible")
    p.add_argument("--timeout", type=arg.whole(60, 7 * 86_400), default=3600,
                   help="seconds the side-by-side runs may take before they are stopped (default 3600)")
    p.add_argument("--lr", type=float, metavar="RATE",
                   help="peak learning rate of every run (default: the model's own, which a large model sets for "
                        "batches of millions of tokens: at a few thousand a step it can spike)")
    p.add_argument("--json", metavar="FILE", help="also write the result (losses, gaps, curves) to FILE as JSON")


def run(args: argparse.Namespace) -> int:
    from engine.bench import fast, numerics
    from engine.data.errors import PlannerError
    from engine.data.presets import load_presets
    from engine.data.space import Methods
    from engine.data.store import Store

    methods = Methods(activation_checkpointing=args.ckpt, fused="fused" in args.extras, fp8="fp8" in args.extras)
    name = capability = None
    if args.device == "cuda":
        try:
            import torch

            if torch.cuda.is_available():
                name = torch.cuda.get_device_name()
                capability = "{}.{}".format(*torch.cuda.get_device_capability())
        except ImportError:
            pass
    why = fast.unavailable(methods, args.device, name, capability)
    if why and not (args.device == "cpu" and methods.extras == ("fp8",) and "not installed" not in why):
        raise PlannerError(f"numerics {methods.label}: {why}")
    _, model = arg.resolve_model(args, load_presets(args.presets))
    cards = None
    if args.device == "cuda" and not args.one_card:
        here = numerics.cards_here()
        cards = here[:4] if len(here) >= 3 else None
        if cards:
            print(fmt.visible(f"side by side on {len(cards)} GPUs ({', '.join(cards)}): one run a card"))
    try:
        result = numerics.compare(model, methods, steps=args.steps, micro_batch=args.micro_batch,
                                  seq_len=args.numerics_seq_len, device=args.device, seed=args.seed, cards=cards,
                                  timeout=args.timeout, lr=args.lr)
    except ValueError as e:
        raise PlannerError(f"numerics: {e}") from None
    except numerics.Unfinished as e:
        kept = ""
        if args.json and e.finished:  # the runs that finished are a measurement too: kept, never stored
            partial = {"model": model.id, "method": methods.label, "unfinished": str(e), "steps": args.steps,
                       "micro_batch": args.micro_batch, "seq_len": args.numerics_seq_len, "seed": args.seed,
                       **({"lr": args.lr} if args.lr is not None else {}), "finished_runs": e.finished}
            if _write(args.json, partial):
                kept = f"; the losses of {', '.join(e.finished)} written to {args.json}"
        raise PlannerError(f"numerics {methods.label} on {model.id}: {e}{kept}") from None
    except RuntimeError as e:
        raise PlannerError(f"numerics {methods.label} on {model.id}: {e}") from None
    print(fmt.visible(f"{model.id}: {numerics.sentence(result)}"))
    if args.json:
        if not _write(args.json, {"model": model.id, **result}):
            raise PlannerError(f"numerics: cannot write {args.json} (the result is printed above)")
        print(fmt.visible(f"written to {args.json}"))
    if args.db and result.get("fp8_emulated"):
        print(f"not stored in {fmt.visible(args.db)}: fp8 was emulated on the CPU, which says nothing of a GPU's numerics")
    elif args.db:
        with Store.open(args.db, read_only=False) as store:
            n = store.set_numerics(model.id, methods.fused, methods.fp8, json.dumps(result))
        print(fmt.visible(f"stored on {n} measured row(s) of {model.id} with {'+'.join(methods.extras)} in {args.db}"
                          if n else f"no measured row of {model.id} with {'+'.join(methods.extras)} in {args.db} "
                                    "yet: nothing stored (bench --extras measures them; run this again after)"))
    return 0


def _write(path: str, data: dict) -> bool:
    from pathlib import Path

    from engine.data.files import write_quietly

    return write_quietly(Path(path), json.dumps(data, indent=1) + "\n")
