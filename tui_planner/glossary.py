"""The words the planner prints, in a PI's words: what each abbreviation means and why it matters.

One place for them, so the app's glossary, the legends under its tables and the commands' legends say the
same thing. Plain data and plain text (no rich, no Textual): callers escape or style it. Nothing here
reads a database or a preset; a row's settings are put in words from the row passed in.
"""

from __future__ import annotations

from dataclasses import dataclass



# The plausible lines of engine/data/generations.py, in words: every legend that names them says these.
LINES = "60%; A100, H100 and H200 65%"

@dataclass(frozen=True)
class Term:
    term: str  # as printed: 'FL', 'ckpt', 'MFU'
    name: str  # in full: 'free-lunch settings'
    means: str  # what it is, one sentence
    why: str  # why a PI cares, one sentence


# Grouped as a person meets them: the settings of a trial, its result, where a figure comes from, the
# ranking's marks and money. The glossary screen shows them in this order.
GROUPS: tuple[tuple[str, tuple[Term, ...]], ...] = (
    ("Training settings (a trial's setting column)", (
        Term("FL", "free-lunch settings",
             "torch.compile, fused attention kernels and TF32 math: settings that speed training up without "
             "changing what it learns.",
             "nearly always faster, so the planner assumes them; the paper's first advice."),
        Term("naive", "the baseline",
             "plain PyTorch training: none of the free-lunch settings.",
             "shows what the free-lunch settings buy you."),
        Term("ckpt", "activation checkpointing",
             "recompute the activations in the backward pass instead of keeping them in GPU memory.",
             "fits a bigger micro-batch or model on a GPU, for about a third more compute per step."),
        Term("zero1, zero2, zero3", "ZeRO stages 1-3 (DeepSpeed)",
             "split the optimizer state (1), also the gradients (2), also the weights (3) across the GPUs.",
             "each GPU holds less, so a model too big for one GPU fits; costs communication between GPUs."),
        Term("fsdp2, fsdp3", "FSDP (PyTorch's fully sharded data parallel)",
             "PyTorch's way of splitting the same state: fsdp2 shards gradients and optimizer state (like "
             "ZeRO-2), fsdp3 the weights too (like ZeRO-3).",
             "the same memory saving as ZeRO without DeepSpeed; which is faster depends on the GPU and model."),
        Term("offload", "CPU offloading",
             "keep the optimizer state (at stage 3 the weights too) in the computer's own memory, not the GPU's.",
             "lets a small GPU train a large model, but much slower, and it needs plenty of RAM."),
        Term("fused", "liger-kernel's fused kernels (beyond the paper, opt-in)",
             "Triton kernels that fuse the LM head with the loss (the logits are never held whole), the norms, "
             "SwiGLU/GeGLU and rotary embeddings: the same maths within bf16 rounding.",
             "a bigger micro-batch where the vocabulary is large; its speed-up is an assumption until measured."),
        Term("fp8", "FP8 matrix products (torchao float8; beyond the paper, opt-in)",
             "the linear layers multiply in 8-bit floating point on the FP8 tensor cores of Ada, Hopper and "
             "Blackwell GPUs; attention, norms and the LM head stay 16-bit. Its MFU is still against the 16-bit "
             "peak, so it can pass 100%.",
             "faster on big models, but it changes numerics: the loss is not bf16's, so check it before trusting "
             "the run; older GPUs cannot run it at all."),
        Term("changes numerics", "a setting that changes what is computed",
             "marks every row with fp8: not the same training as bf16, only a faster approximation of it.",
             "compare its loss with a bf16 run before choosing it on speed alone."),
        Term("ckpt?, shard?", "not stated by the paper",
             "the paper's Appendix J does not say whether this row used checkpointing or sharding.",
             "its setting cannot be copied exactly; the time is still the paper's."),
        Term("8x32", "micro-batch x accumulation",
             "8 sequences per GPU in each forward/backward pass, 32 passes before each optimizer step.",
             "with the GPU count it makes the global batch; the largest micro-batch that fits is usually fastest."),
    )),
    ("A trial's result", (
        Term("days", "training days",
             "wall-clock days for the whole run: the step time x the run's steps.",
             "what your deadline is measured against."),
        Term("band", "a prediction's low-high days",
             "an 80% interval, the figure its middle: 8 in 10 held-out measurements of the same kind of "
             "extrapolation fell inside (the model measured on this GPU or not, at this count or not, offloaded; "
             "floor-bound: a small micro-batch, whose pass the host and the collectives set, not the GPU's work; "
             "wider still, unchecked, where that floor was never measured). Measured and paper figures have none.",
             "if the deadline matters, plan on the band's top, not the middle."),
        Term("MFU", "model FLOPs utilisation",
             "the share of the GPU's peak 16-bit math the training actually uses; 40-55% is good.",
             "a sanity check on any timing: too low wastes the GPU, too high cannot be true."),
        Term("!, !!", "implausible, impossible MFU",
             f"! above its GPU generation's plausible line ({LINES}), !! above 100% of peak.",
             "such a time is too good to be true (the paper's timer did not wait for the GPU): expect longer."),
        Term("^", "capped MFU",
             f"a prediction that came out above its GPU generation's plausible line ({LINES}) is held at "
             "the line: 60%^ is capped at 60% (this generation's line).",
             "its days are the line's, and its band is centred on them, wider on each side by how far past the "
             "line the time model put it: measure before you buy on it."),
        Term("step, pass, update", "the parts of a training step",
             "a pass is one micro-batch forward and backward; a step is its passes plus the optimizer update.",
             "a prediction shows its step as passes x accumulation + update, so you can check the sum."),
        Term("†", "dense causal mask",
             "timed with an engine before its 2026-11-23 fix, which gave compiled attention a dense mask.",
             "today's engine runs that setting faster: measure it again before ranking on it."),
        Term("infeasible, oom, memory", "did not fit",
             "the setting runs out of GPU memory (oom: it did when tried; memory: the memory model said it "
             "would, so it was skipped; infeasible: the paper could not train it).",
             "more GPUs, a memory-saving setting or a bigger GPU is needed."),
        Term("dominated", "skipped as no better",
             "a setting with fewer methods already runs at least this micro-batch, so it could only be slower.",
             "the search saves its time; it is not a failure."),
        Term("cannot-win", "left unrun by the guided search",
             "predicted first, and even the fast end of its band is no faster than a time already measured in "
             "the same search, so it was not run; its prediction and the reason are kept.",
             "saves most of a search's time; `bench --exhaustive` measures it anyway."),
        Term("superseded", "measured again later",
             "a later measurement of the same setting on the same GPUs replaced this one (its message names "
             "the later trial and what each found), e.g. after an engine fix.",
             "kept for the record, never ranked: read the later row."),
        Term("refused, failed, timeout, unsupported", "no usable time",
             "refused: faster than the GPU's peak; failed or timeout: the trial crashed or hung; unsupported: "
             "the GPU or software cannot run this setting.",
             "the details (enter) say why; such a row is never ranked."),
    )),
    ("Where a figure comes from (from)", (
        Term("meas", "measured",
             "timed on a GPU here, the GPU synchronised around every pass and update.",
             "the most trustworthy figure; the ranking prefers it."),
        Term("pred", "predicted",
             "worked out by the planner's model (a roofline fitted to measurements) for a cell nobody measured.",
             "comes with a band; `tui-planner predict` and a trial's details show how it was derived."),
        Term("T1, T4", "the paper's Table 1 and Table 4",
             "published figures from Khandelwal et al. (2024): Table 1 the fastest setting per GPU cell, Table 4 "
             "the memory-saving methods.",
             "useful beside ours, but some were timed without synchronising the GPU, so can be too fast."),
        Term("extrapolated", "an unmeasured GPU generation",
             "a prediction for a GPU generation nothing in the database measured.",
             "its band is wider for a reason: measure before you buy on it."),
    )),
    ("What to buy (the ranking and the chart)", (
        Term("Pareto, *, ◆", "the Pareto options",
             "options no other option beats on both cost and days.",
             "the only ones worth a look: every other option is both dearer and slower than one of them."),
        Term("pick", "the verdict's option",
             "the fastest option within budget that meets the deadline even at its band's top.",
             "what the planner would buy; the chart labels it."),
        Term("$, ?, d", "over budget, at risk, late",
             "$: costs more than the budget; ?: the deadline falls inside the band; d: misses the deadline.",
             "a ? option may well make it; a d option will not."),
        Term("$/run", "cost per experiment",
             "the hardware's price spread over its lifespan (5 years) for this run's days, plus electricity.",
             "compares buying with renting, and a fast dear option with a slow cheap one, per training run."),
        Term("in", "the system holding the GPUs",
             "ws2/ws4: a 2- or 4-GPU workstation; 2U/4U: a PCIe server; HGX: NVIDIA's 4- or 8-GPU server board "
             "for SXM GPUs; T6/T7: the paper's machines.",
             "GPUs are only ranked in systems sold to hold them, and the system's price is in the cost."),
        Term("°", "a stale price",
             "a price older than 12 months.",
             "give today's (the Prices field, rank --price ID=USD) before you spend on it."),
        Term("u", "a second-hand price",
             "a used or refurbished GPU's price (its source says so): the cost column and the GPU list mark it.",
             "it ranks far below a new card's price but comes without a warranty and may not be buyable in "
             "numbers; n leaves such GPUs out."),
        Term("vs FL", "time against free-lunch",
             "in what a search found: a setting's time against free-lunch alone on the same GPUs (-30%: 30% "
             "less time).",
             "shows whether a memory-saving setting pays for itself (the paper: up to 71% less)."),
    )),
)


def terms() -> list[Term]:
    return [t for _, group in GROUPS for t in group]


def find(term: str) -> Term:
    """The entry whose printed form holds `term` ('FL', 'zero2', 'T4')."""
    for t in terms():
        if term in [p.strip() for p in t.term.split(",")] or term == t.term:
            return t
    for t in terms():  # 'zero2' is under 'zero1, zero2, zero3'; 'fsdp3' under 'fsdp2, fsdp3'
        if term.rstrip("0123456789") and any(p.strip().rstrip("0123456789") == term.rstrip("0123456789")
                                             for p in t.term.split(",")):
            return t
    raise KeyError(term)


# --- a trial's setting, in words --------------------------------------------------------------------

SHARDING_WORDS = {
    "zero1": "ZeRO-1 (optimizer state split across GPUs)",
    "zero2": "ZeRO-2 (optimizer state, gradients split across GPUs)",
    "zero3": "ZeRO-3 (optimizer state, gradients, weights split across GPUs)",
    "fsdp2": "FSDP-2 (optimizer state, gradients split across GPUs)",
    "fsdp3": "FSDP-3 (optimizer state, gradients, weights split across GPUs)",
}
SOURCE_WORDS = {"measured": "measured", "predicted": "predicted", "paper-table1": "the paper's Table 1",
                "paper-table4": "the paper's Table 4"}
SOURCE_SHORT = {"measured": "meas", "predicted": "pred", "paper-table1": "T1", "paper-table4": "T4"}


def setting_words(row: dict) -> str:
    """A trial's settings as a phrase: 'free-lunch (compile, fused attention, TF32), activation
    checkpointing, ZeRO-1 (optimizer state split across the GPUs), CPU offloading'. Plain text; a sharding
    the engine does not know is given as it is stored (the caller escapes it)."""
    if row.get("free_lunch") is None and row.get("sharding") is None:
        return "not stated"
    parts = ["free-lunch (compile, fused attention, TF32)" if row.get("free_lunch") else "naive (none of the "
             "free-lunch settings)"]
    ckpt = row.get("activation_checkpointing")
    if ckpt:
        parts.append("activation checkpointing")
    elif ckpt is None and row.get("free_lunch"):
        parts.append("checkpointing not stated")
    sharding = row.get("sharding")
    if sharding and sharding != "none":
        parts.append(SHARDING_WORDS.get(sharding, f"sharding {sharding}"))
    elif sharding is None and row.get("free_lunch"):
        parts.append("sharding not stated")
    if row.get("offloading"):
        parts.append("CPU offloading")
    if row.get("fused"):
        parts.append("fused kernels (liger-kernel)")
    if row.get("fp8"):
        parts.append("FP8 matrix products (torchao; changes numerics)")
    return ", ".join(parts)


def batch_words(row: dict) -> str:
    """'micro-batch 8 x 32 accumulation = 256 per GPU per step' or '' when the row has none."""
    mb, acc = row.get("micro_batch"), row.get("grad_accum")
    if not mb or not acc:
        return ""
    n = (row.get("num_gpus") or 1) * (row.get("num_nodes") or 1)
    return f"micro-batch {mb} x {acc} accumulation x {n} GPU{'s' if n != 1 else ''} = {mb * acc * n:,} sequences a step"


# --- legends: one line each, for under a table ------------------------------------------------------

SETTING_LEGEND = ("FL free-lunch (compile, fused kernels, TF32) · ckpt recompute activations · zero1-3/fsdp2-3 "
                  "split training state across GPUs · offload to CPU RAM · fused liger-kernel's loss · fp8≈ FP8 "
                  "matrix products (changes numerics) · ? not stated by the paper")
FROM_LEGEND = "from: meas measured here · pred predicted (with a band) · T1/T4 the paper's Tables 1/4"
