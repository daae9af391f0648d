"""What a method beyond the paper does to the loss (issue 42), measured: a short training run on real text
from the same initialisation, bf16 free-lunch against the method (fused, fp8 or both), compared step by step.

The text is Python's own reference documentation (`pydoc_data.topics`, shipped with CPython: no download),
read as UTF-8 bytes (ids 0-255 of the model's vocabulary: no tokenizer to fetch). Both runs see the same
batches in the same order, from the same seed, with the model's optimizer and learning rate (a linear
warm-up over the first tenth; fused on a GPU, as the trials run it), autocast to bf16 whatever the preset trains in (the
method is compared with bf16, as the issue asks; an fp16 preset would need loss scaling besides) and no
torch.compile (the maths, not the speed). The result: each run's loss at the end (mean of the last tenth of steps), the gap between them, and
the largest gap along the way (of losses averaged over windows of a tenth of the run, so one noisy step is
not the headline), and the same two figures for bf16 from another initialisation on the same batches: the noise
floor a method's gap is read against. Over the second half of the run the losses are also compared step by step
(the same batch moves both alike): the mean gap with its 95% interval, and whether that interval is under 1%,
over it, or does not resolve it (issue 42's target). Every step's loss is kept (runs of up to 1,000 steps). With three or more GPUs the runs go side by side, each in a process of its
own on a card of its own (the same batches, the same seeds: the losses are the same as one after another), and a
fourth card adds the method from the other initialisation too, so the gap is measured twice. Imports torch.
"""

from __future__ import annotations

import dataclasses
import math
import os
import queue
import signal
import statistics
import threading
import time
from typing import Any

from engine.data.presets import Model
from engine.data.space import Methods

CORPUS = "pydoc_data.topics (CPython's reference documentation), UTF-8 bytes as token ids"
WITHIN = 0.01  # issue 42: a loss gap under 1%
BLOCKS = 10  # the paired gap's standard error: from the means of this many consecutive blocks of steps
# two-sided 95% quantiles of Student's t by degrees of freedom (BLOCKS - 1 at most): the interval of a mean of
# few blocks is wider than two standard errors
T95 = {1: 12.71, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def corpus_ids() -> Any:
    import torch
    import pydoc_data.topics as topics

    text = "\n\n".join(topics.topics[k] for k in sorted(topics.topics))
    return torch.tensor(list(text.encode("utf-8")), dtype=torch.long)


def _train(model: Model, methods: Methods, steps: int, micro_batch: int, seq_len: int, device: str, seed: int,
           ids: Any, emulate_fp8: bool, data_seed: int | None = None) -> tuple[list[float], dict[str, Any]]:
    import torch

    from engine.bench import fast, modeling
    from engine.bench.steppers import make_optimizer

    torch.manual_seed(seed)
    attn = modeling.attention_implementation(model, True, device)
    net = modeling.build_model(model, attn, device)
    done = fast.apply(net, methods, model.objective, emulate_fp8)
    if methods.activation_checkpointing:
        modeling.enable_checkpointing(net, model)
    t = model.training
    # fused on a GPU: foreach would add a temporary copy of the parameters (tens of GB on a 7B model)
    opt = make_optimizer(model, net.parameters(), device, fused=True)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    dtype = torch.bfloat16
    # the same windows, in the same order, for every run
    gen = torch.Generator().manual_seed(seed if data_seed is None else data_seed)
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(ids) - seq_len - 1, (micro_batch,), generator=gen)
        batch = torch.stack([ids[s:s + seq_len] for s in starts.tolist()]).to(device)
        with torch.autocast(device, dtype=dtype):
            loss = net(input_ids=batch, labels=batch).loss
        loss.backward()
        if t.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(net.parameters(), t.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        value = float(loss.detach())
        if not math.isfinite(value):
            raise RuntimeError(f"{methods.label}: the loss is {value} at step {len(losses) + 1}")
        losses.append(value)
    del net, opt
    if device == "cuda":
        torch.cuda.empty_cache()
    return losses, done


def _read_only(table: dict) -> Any:
    import types

    return types.MappingProxyType(table)


def _child(index: int, card: str | None, parent: int, args: tuple, out: Any) -> None:
    """One run of a side-by-side comparison, in a spawned process that sees only its own card (and dies with
    the process that started it, however that one ends)."""
    from engine.bench.environment import die_with_parent

    die_with_parent(parent)
    if card is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = card
    try:
        out.put((index, True, _train(*args)))
    except BaseException as e:  # noqa: BLE001 - said to the parent, which stops the others
        out.put((index, False, f"{type(e).__name__}: {e}"))


class Unfinished(RuntimeError):
    """Side-by-side runs stopped before all finished (one failed, died, outlasted the timeout, or a signal came):
    `finished` holds the losses of those that had, by run name, so the caller can keep them."""

    def __init__(self, message: str, finished: dict[str, list[float]]):
        super().__init__(message)
        self.finished = finished


def _side_by_side(runs: list[tuple[str, tuple]], cards: list[str | None], timeout: float) -> list[tuple]:
    """Each run in a process of its own on a card of its own; the losses in the runs' order. A run that fails,
    dies or outlasts `timeout` stops them all and is said by name (Unfinished, with the losses of the runs that
    had finished); no process outlives the call."""
    import multiprocessing
    import types
    from multiprocessing.reduction import ForkingPickler

    # a preset's read-only tables (a model's config) go to the child as what they are
    ForkingPickler.register(types.MappingProxyType, lambda m: (_read_only, (dict(m),)))
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(i, card, os.getpid(), args, out), daemon=True)
             for i, ((_, args), card) in enumerate(zip(runs, cards))]
    got: dict[int, tuple] = {}
    deadline = time.monotonic() + timeout
    taken = {}
    stopping = []
    if threading.current_thread() is threading.main_thread():  # signal.signal's rule
        def stop(signum: int, _frame: Any) -> None:
            if not stopping:  # once: `timeout` signals the process and its group, and a second must not land
                stopping.append(signum)  # inside the clean-up below
                raise RuntimeError(f"stopped by {signal.Signals(signum).name}")

        for sig in (signal.SIGTERM, signal.SIGHUP):
            # an ignored signal stays ignored (nohup), and one a C library set is left to it
            if signal.getsignal(sig) not in (signal.SIG_IGN, None):
                taken[sig] = signal.signal(sig, stop)
    try:
        for p in procs:
            p.start()
        while len(got) < len(procs):
            try:
                i, ok, payload = out.get(timeout=2.0)
            except queue.Empty:
                dead = [j for j, p in enumerate(procs) if j not in got and p.exitcode is not None]
                if dead:
                    try:  # what it said just before it ended, if anything
                        i, ok, payload = out.get(timeout=2.0)
                    except queue.Empty:
                        j = dead[0]
                        raise RuntimeError(f"the {runs[j][0]} run died (exit code {procs[j].exitcode})") from None
                elif time.monotonic() > deadline:
                    late = [runs[j][0] for j in range(len(procs)) if j not in got]
                    raise RuntimeError(f"the {', '.join(late)} run(s) did not finish in {timeout:g} s: stopped")
                else:
                    continue
            if not ok:
                raise RuntimeError(f"the {runs[i][0]} run failed: {payload}")
            got[i] = payload
        return [got[i] for i in range(len(procs))]
    except RuntimeError as e:  # a failure, a death, the timeout or a signal: what had finished goes with it
        raise Unfinished(str(e), {runs[i][0]: got[i][0] for i in sorted(got)}) from None
    finally:
        for p in procs:  # the children first, then the handlers back
            if p.is_alive():
                p.kill()
        for p in procs:
            if p.pid is not None:
                p.join(timeout=10)
        for sig, previous in taken.items():
            signal.signal(sig, previous)


def cards_here() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (all of them when it is not set)."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    named = [c.strip() for c in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if c.strip()]
    return (named or [str(i) for i in range(n)])[:n]


def paired_gap(a: list[float], b: list[float], start: int) -> tuple[float, float, float]:
    """b against a step by step from `start` on, on the same batches: the mean of (b - a) / a and its 95%
    interval (low, high). Each step's batch moves both losses alike, so the paired difference is far less noisy
    than either loss (on Pythia-6.9B at 4,096 tokens a step a loss swings +/-10% between steps, the difference
    a few %). Neighbouring steps' differences are correlated (two runs drift apart slowly), so the standard
    error is that of the means of BLOCKS consecutive blocks, not of single steps."""
    d = [(y - x) / x for x, y in zip(a[start:], b[start:])]
    if len(d) < 2:
        raise ValueError(f"{len(d)} step(s) to pair: at least 2")
    k = min(BLOCKS, len(d))
    edges = [i * len(d) // k for i in range(k + 1)]  # near-equal blocks that take every step
    means = [statistics.mean(d[edges[i]:edges[i + 1]]) for i in range(k)]
    mean = statistics.mean(d)
    half = T95[k - 1] * statistics.stdev(means) / math.sqrt(k)
    return mean, mean - half, mean + half


def steps_to_resolve(a: list[float], b: list[float], start: int, steps: int) -> dict[str, Any]:
    """Where the method's paired gap is not resolved: about how many steps, at this spread and batch, would narrow
    its 95% interval to the distance between its mean and 1%, so that it reads 'under' or 'over' if the gap stays
    near its mean. A standard error falls as one over the root of the steps averaged, if the spread stays as it
    was: a guide, not a promise. Nothing where the mean is within 0.1 point of 1% (no run length would tell)."""
    mean, low, high = paired_gap(a, b, start)
    room = abs(WITHIN - abs(mean))
    if within(low, high) != "not resolved" or room < WITHIN / 10:
        return {}
    factor = ((high - low) / 2 / room) ** 2
    if factor <= 1:
        return {}
    return {"steps_to_resolve": int(math.ceil(steps * factor / 10) * 10)}


def within(low: float, high: float, limit: float = WITHIN) -> str:
    """What a gap's 95% interval says against `limit`: 'under', 'over' or 'not resolved'."""
    if -limit < low and high < limit:
        return "under"
    if low >= limit or high <= -limit:
        return "over"
    return "not resolved"


def compare(model: Model, methods: Methods, steps: int = 300, micro_batch: int = 8, seq_len: int = 512,
            device: str = "cuda", seed: int = 0, cards: list[str | None] | None = None,
            timeout: float = 3600.0, lr: float | None = None) -> dict[str, Any]:
    """Train `model` from one initialisation in bf16 free-lunch and with `methods`, and bf16 again from another
    initialisation on the same batches (the noise floor); the losses compared. With `cards` (three or more),
    the runs go side by side, one a card; a fourth card runs the method from the other initialisation too.
    `lr`: the peak learning rate of every run, in place of the model's (a large model's own rate, set for
    batches of millions of tokens, can make a run of a few thousand tokens a step spike, and its gap then says
    nothing)."""
    if not methods.extras:
        raise ValueError(f"{methods.label}: nothing to compare (no fused or fp8)")
    if model.objective != "causal-lm":
        raise ValueError(f"{model.id}: the numerics run trains causal LMs ({model.objective} is not one)")
    if model.vocab_size < 256:
        raise ValueError(f"{model.id}: a vocabulary of {model.vocab_size} cannot hold byte ids (256)")
    if steps < 10:
        raise ValueError(f"{steps} steps: at least 10")
    if cards is not None and len(cards) < 3:
        raise ValueError(f"{len(cards)} card(s): side by side needs three (bf16, the method, bf16 again)")
    if lr is not None:
        if not (0 < lr < 1):
            raise ValueError(f"learning rate {lr}: between 0 and 1")
        model = dataclasses.replace(model, training=dataclasses.replace(model.training, lr=lr))
    ids = corpus_ids()
    seq_len = min(seq_len, model.seq_len or seq_len)
    base = dataclasses.replace(methods, fused=False, fp8=False)
    emulate = device != "cuda"
    shape = (steps, micro_batch, seq_len, device)
    # The noise floor: bf16 again from another initialisation, on the same batches. A short run from scratch is
    # chaotic (measured on an H200: fp8 ended 2.7% above bf16 on Pythia-1B and 6.9% below it on Pythia-2.8B after
    # 200 steps); a method's gap means something only against how far two bf16 runs land apart.
    runs = [("bf16", (model, base, *shape, seed, ids, emulate)),
            (methods.label, (model, methods, *shape, seed, ids, emulate)),
            ("bf16 from another initialisation", (model, base, *shape, seed + 1, ids, emulate, seed))]
    if cards is not None and len(cards) >= 4:
        runs.append((f"{methods.label} from another initialisation",
                     (model, methods, *shape, seed + 1, ids, emulate, seed)))
    if cards is None:
        done_runs = [_train(*args) for _, args in runs]
    else:
        done_runs = _side_by_side(runs, list(cards), timeout)
    (ref, _), (got, done), (floor, _) = done_runs[:3]
    tenth = max(1, steps // 10)

    def gaps(a: list[float], b: list[float]) -> tuple[float, float, float]:
        """(b's loss at the end, its gap to a's there, its largest gap along the way), over windows of a tenth."""
        end_a, end_b = statistics.mean(a[-tenth:]), statistics.mean(b[-tenth:])
        windows = [(statistics.mean(a[i:i + tenth]), statistics.mean(b[i:i + tenth]))
                   for i in range(0, steps - tenth + 1, tenth)]
        worst = max(windows, key=lambda w: abs(w[1] - w[0]) / w[0])
        return end_b, (end_b - end_a) / end_a, (worst[1] - worst[0]) / worst[0]

    end_ref = statistics.mean(ref[-tenth:])
    end_got, gap, largest = gaps(ref, got)
    end_floor, noise, largest_noise = gaps(ref, floor)
    # The second half, step by step on the same batches: past the warm-up and the first fall, where a gap is the
    # method's and not the start's; with its 95% interval, so "under 1%" is said only where the run resolves it.
    half = steps // 2

    def paired(a: list[float], b: list[float], name: str) -> dict[str, Any]:
        mean, low, high = paired_gap(a, b, half)
        return {f"{name}_paired": mean, f"{name}_paired_95": [low, high], f"{name}_within_1pct": within(low, high)}

    every = -(-steps // 1000)  # every step of a run of up to 1,000: the paired gap can be recomputed from the row
    twice = {}
    if len(done_runs) > 3:
        again = done_runs[3][0]
        end_again, gap_again, largest_again = gaps(floor, again)
        twice = {"loss_method_other_init": end_again, "gap_other_init": gap_again,
                 "largest_gap_other_init": largest_again, "curve_method_other_init": again[::every],
                 **paired(floor, again, "gap_other_init")}
    return {
        "method": methods.label, "baseline": base.label + " (bf16)", "corpus": CORPUS, "steps": steps,
        "micro_batch": micro_batch, "seq_len": seq_len, "seed": seed, "device": device, "lr": model.training.lr,
        **({"lr_own": False} if lr is not None else {}),
        "side_by_side": len(done_runs) if cards is not None else 0,
        **({"fp8_emulated": True} if emulate and methods.fp8 else {}),
        "loss_baseline": end_ref, "loss_method": end_got, "gap": gap, "largest_gap": largest, "start_loss": ref[0],
        "loss_other_init": end_floor, "noise": noise, "largest_noise": largest_noise,
        "paired_from_step": half + 1, **paired(ref, got, "gap"), **paired(ref, floor, "noise"),
        **steps_to_resolve(ref, got, half, steps),
        "curve_every": every, "curve_baseline": ref[::every], "curve_method": got[::every],
        "curve_other_init": floor[::every], **twice,
        **done,
    }


def sentence(n: dict[str, Any]) -> str:
    """One line for a row's details: 'fp8: loss 2.113 vs 2.101 bf16 after 300 steps (+0.6%; at most +1.1%)'."""
    floor = (f"; bf16 from another initialisation: {n['noise']:+.1%}, at most {n['largest_noise']:+.1%}"
             if "noise" in n else "")
    if "gap_other_init" in n:
        floor += (f"; {n['method']} against bf16 from that initialisation: {n['gap_other_init']:+.1%}, "
                  f"at most {n['largest_gap_other_init']:+.1%}")
    rate = f" at learning rate {n['lr']:g}" if n.get("lr_own") is False else ""
    return (f"{n['method']}: loss {n['loss_method']:.3f} vs {n['loss_baseline']:.3f} bf16 after {n['steps']} steps{rate} "
            f"({n['gap']:+.1%}; largest gap along the way {n['largest_gap']:+.1%}{floor})"
            + (f". {paired_words(n)}" if "gap_paired" in n else "")
            + (" [fp8 emulated on the CPU]" if n.get("fp8_emulated") else ""))


def paired_words(n: dict[str, Any], short: bool = False) -> str:
    """The paired gaps in words, each verdict worked out from its interval: 'From step 151, step by step on the
    same batches: fp8 +0.1% (95%: -0.4% to +0.6%): under 1%; ...'. short: a row's details line ('from step 151,
    step by step: method +0.1% (-0.4% to +0.6%, 95%): under 1%; ...'), whose caller has checked the numbers."""
    label = "method" if short else n["method"]
    who = {"gap": label, "noise": "bf16 other init" if short else "bf16 from another initialisation",
           "gap_other_init": "method from it" if short else f"{label} from that initialisation"}

    def one(name: str) -> str:
        low, high = n[f"{name}_paired_95"]
        span = f"({low:+.1%} to {high:+.1%}, 95%)" if short else f"(95%: {low:+.1%} to {high:+.1%})"
        return f"{who[name]} {n[f'{name}_paired']:+.1%} {span}: {within(low, high)} 1%"

    parts = "; ".join(one(name) for name in ("gap", "noise", "gap_other_init") if f"{name}_paired" in n)
    if short:
        more = (f"; about {n['steps_to_resolve']:,} steps would resolve the method's (at this spread)"
                if n.get("steps_to_resolve") else "")
        return f"from step {n['paired_from_step']}, step by step: {parts}{more}"
    more = (f". At this spread about {n['steps_to_resolve']:,} steps would resolve {label}'s, if its gap "
            f"stays near {n['gap_paired']:+.1%}" if n.get("steps_to_resolve") else "")
    return f"From step {n['paired_from_step']}, step by step on the same batches: {parts}{more}"
