"""The FLOPs of one training step of a model built on the meta device, counted (engine/data/describer.py builds it).

    count_by_blocks(net, kind, lengths, names) -> [FLOPs per sample at each (input, target) length]
    fit(kind, lengths, flops) -> the per-sample count's coefficients (a s + b s^2; or over s and t)

Counting is Python dispatching every operation of a step on meta tensors: the model is counted with few blocks and
the rest added by difference (count_by_blocks), and in the build worker the counts are shared with a forked copy of
it on the machine's other core (in_two). Imports torch where it counts.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

FORK = False  # set in the worker process: counts are shared with a forked copy of it (in_two)


def in_two(count: Callable[[list], list[float]], items: list) -> list[float]:
    """count(items), its second half counted at the same time by a forked copy of this process, on the machine's
    other core: the worker's counting is Python dispatching meta operations, one core's work. Only in the
    worker (FORK), which runs no threads a fork could leave holding a lock; anywhere else, or where a fork is
    not to be had, in turn."""
    if not FORK or len(items) < 2 or (os.cpu_count() or 1) < 2 or not hasattr(os, "fork"):
        return count(items)
    half = len(items) // 2
    try:
        r, w = os.pipe()
        pid = os.fork()
    except OSError:
        return count(items)
    if pid == 0:  # the copy: count the second half, say it on the pipe, leave without Python's teardown
        code = 0
        try:
            os.close(r)
            quiet = os.open(os.devnull, os.O_WRONLY)  # not the worker's stdout and stderr: its parent reads
            os.dup2(quiet, 1)                           # those to their end, which must not wait for this copy
            os.dup2(quiet, 2)
            try:
                said = json.dumps({"flops": count(items[half:])})
            except Exception as e:  # noqa: BLE001 - the first process counts it again itself
                said = json.dumps({"error": f"{type(e).__name__}: {str(e)[:300]}"})
            with os.fdopen(w, "w") as out:
                out.write(said)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    try:
        first = count(items[:half])
    finally:
        with os.fdopen(r) as given:
            said = given.read()
        os.waitpid(pid, 0)
    try:
        second = json.loads(said)
    except ValueError:
        second = {}
    if not isinstance(second, dict) or not isinstance(second.get("flops"), list):
        return first + count(items[half:])  # the copy failed: counted here (an error of the count's own, raised)
    return first + [float(x) for x in second["flops"]]


def _count_flops(net: Any, kind: str, lengths: list[tuple[int, int]]) -> list[float]:
    """The FLOPs of one training step (forward, loss, backward) of one sample at each (input, target) length
    (the lengths shared between two processes in the worker: in_two)."""
    return in_two(lambda part: _count_each(net, kind, part), lengths)


def _counter() -> Any:
    """A dispatch mode that adds up torch's own FLOP formulas (torch.utils.flop_counter's registry: matrix products,
    attention, convolutions) for every operation that has one. FlopCounterMode less what a total does not need: it
    also keeps a count for every module (hooks on each module's forward and backward), which made a count on meta
    tensors take 1.4-3x as long. The totals are the same (tests/test_built.py checks them against it)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.total = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            formula = flop_registry.get(func._overloadpacket)
            if formula is not None:
                self.total += formula(*args, **kwargs, out_val=out)
            return out

        def get_total_flops(self) -> int:
            return self.total

    return Count()


def _count_each(net: Any, kind: str, lengths: list[tuple[int, int]]) -> list[float]:
    import torch
    import torch.nn.functional as F

    # An encoder is given an attention mask, else some (DeBERTa) read the ids for padding; others (ModernBERT)
    # read the mask's values, which meta tensors do not have: each is tried, and the one that runs is kept.
    masks = [True, False] if kind == "masked" else [False]
    out = []
    for s, t in lengths:
        ids = torch.zeros((1, s), dtype=torch.long, device="meta")
        kwargs: dict[str, Any] = {"input_ids": ids}
        target = ids
        if kind == "seq2seq":
            target = torch.zeros((1, t), dtype=torch.long, device="meta")
            kwargs["decoder_input_ids"] = target
        for i, mask in enumerate(masks):
            if mask:
                kwargs["attention_mask"] = torch.ones_like(ids)
            else:
                kwargs.pop("attention_mask", None)
            try:
                with _counter() as counter:
                    logits = net(**kwargs).logits
                    F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1)).backward()
            except Exception:
                net.zero_grad(set_to_none=True)
                if i == len(masks) - 1:
                    raise
                continue
            masks = [mask]
            break
        out.append(float(counter.get_total_flops()))
        net.zero_grad(set_to_none=True)
    return out


def _block_lists(net: Any, names: set[str]) -> list[tuple[Any, str, Any]]:
    """Each list of repeated blocks in the tree, as (its parent, its attribute, the list)."""
    import torch

    found = []
    for parent in net.modules():
        for attr, child in parent.named_children():
            if isinstance(child, torch.nn.ModuleList) and len(child) and all(type(c).__name__ in names for c in child):
                found.append((parent, attr, child))
    return found


def _signature(block: Any) -> tuple:
    """What a block's FLOPs can depend on besides the lengths: its module tree and its parameters' shapes (a dense
    block and a mixture of experts differ; so do T5's first block, which holds the position bias, and the rest)."""
    tree = tuple((n, type(m).__name__) for n, m in block.named_modules())
    return tree, tuple((n, tuple(p.shape)) for n, p in block.named_parameters())


def count_by_blocks(net: Any, kind: str, lengths: list[tuple[int, int]], names: set[str],
                     whole: bool | None = None) -> list[float]:
    """The whole model's FLOPs at each length, counted on copies of it with few blocks.

    Counting dispatches every operation of the step in Python (some 300 per block on the meta device), so a
    model of L blocks costs L times one block. The FLOPs are affine in how many blocks of each kind the model
    holds: F(n) = F_rest + sum_k n_k f_k, the lengths being equal. So the model is counted with the first
    block of each list of blocks alone, then with one more block of each kind (kinds with as many blocks left
    count together: T5's 11 encoder and 11 decoder blocks after the first, which holds the position bias, are
    one count), and F(all) = F(first) + sum over those groups of (blocks left) x (F(with one more) - F(first)).
    That is exact where blocks of one kind cost the same, which is what the kind says (module tree and
    parameter shapes); tests/test_built.py checks it against counting the whole model. `whole`: True counts the
    whole model, False by blocks, None whichever runs fewer blocks."""
    import torch

    lists = _block_lists(net, names)
    again: dict[int, list[tuple[int, int]]] = {}  # blocks left of a kind -> (list, a block of that kind)
    for li, (_, _, blocks) in enumerate(lists):
        kinds: dict[tuple, list[int]] = {}
        for i, b in enumerate(blocks):
            kinds.setdefault(_signature(b), []).append(i)
        for idx in kinds.values():
            left = [i for i in idx if i != 0]
            if left:
                again.setdefault(len(left), []).append((li, left[0]))
    # Each count runs the embeddings, the head and the loss besides its blocks (some two blocks' worth): a
    # model of few blocks is counted whole.
    by_blocks = (len(again) + 1) * (len(lists) + 2) + sum(len(e) for e in again.values())
    if whole or (whole is None and by_blocks >= sum(len(b) for _, _, b in lists) + 2):
        return _count_flops(net, kind, lengths)

    def counted(extra: list[tuple[int, int]], at: tuple[int, int]) -> float:
        for li, (parent, attr, blocks) in enumerate(lists):
            keep = [0] + sorted(i for lj, i in extra if lj == li)
            setattr(parent, attr, torch.nn.ModuleList([blocks[i] for i in keep]))
        try:
            return _count_each(net, kind, [at])[0]
        finally:
            for parent, attr, blocks in lists:
                setattr(parent, attr, blocks)

    # Every (blocks kept, length) count is one task; the worker shares them between two processes (in_two).
    groups = sorted(again.items())
    kept = [[]] + [extra for _, extra in groups]
    tasks = [(k, at) for k in range(len(kept)) for at in lengths]
    flat = in_two(lambda part: [counted(kept[k], at) for k, at in part], tasks)
    n = len(lengths)
    base = flat[:n]
    total = list(base)
    for g, (repeats, _) in enumerate(groups, start=1):
        more = flat[g * n:(g + 1) * n]
        total = [x + repeats * (m - b) for x, m, b in zip(total, more, base)]
    return total


def fit(kind: str, lengths: list[tuple[int, int]], flops: list[float]) -> list[float]:
    """Per-sample FLOPs as a x s + b x s^2 (decoders, encoders) or over (s, t) for encoder-decoders."""
    import torch

    if kind == "seq2seq":
        rows = [[s, t, s * s, t * t, s * t] for s, t in lengths]
    else:
        rows = [[s, s * s] for s, _ in lengths]
    a = torch.tensor(rows, dtype=torch.float64)
    b = torch.tensor(flops, dtype=torch.float64).unsqueeze(1)
    sol = torch.linalg.lstsq(a, b, driver="gelsd").solution.squeeze(1).tolist()
    return [max(0.0, x) for x in sol]
