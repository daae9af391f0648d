"""How much of its peak and its bandwidth each GPU generation reaches, relative to the Hopper GPUs our own
measurements are on, fitted to published measurements (data/external/), and how well that predicts them.

A published row (one model, sequence, micro-batch and sharding on N GPUs of one machine, at some throughput)
is predicted with the same roofline as our own rows (engine/predict/terms.py), per sample and per GPU:

    t = s_source x (k_c[G] x x_c x compute_s + k_m[G] x x_m x memory_s) + e x comm_s

    x_c, x_m     our transformers' fit (1 / achieved fraction of peak and of bandwidth, measured on Hopper)
    k_c, k_m     the generation's factors: 1 for Hopper by definition; fitted for every other generation with
                 data. 1 / (x_c k_c) is the share of peak a generation reaches, bounded by its plausibility
                 line (engine/data/generations.py)
    c[card]      a card's own factor on its compute (k_c and k_a), where published rows measured it: cards of
                 one generation do not reach one share of their datasheet peak (a GeForce card's boost clock
                 over its rating, a 300 W workstation card's clock under it). Pulled toward 1 (CARD_WEIGHT),
                 so the generation's factors stay what a card with no rows of its own is predicted with,
                 unless its preset names a measured card on the same chip (same_chip_as: the L40S, the RTX
                 6000 Ada's): then that card's factor
    s_source     the source's software against ours (its kernels, its timer, warm-up in its figure): one per
                 source, fitted on all its rows, so a generation's factors come from ratios within sources
    compute_s    FLOPs per sample / dense 16-bit peak: 6 x matmul parameters x tokens, the logits' matmul
                 where logits are computed, attention 12 x layers x hidden x seq^2 per sample (6 when causal
                 and fused, which skips the masked half), x 4/3 with activation checkpointing
    memory_s     memory-bound bytes per sample / bandwidth, counted as for our models (terms.traffic_terms):
                 elementwise layers, unfused attention scores, logits and loss, and the optimizer step's
                 (terms.ADAM_UPDATE_BYTES a parameter held) over the samples each GPU takes a step
    comm_s       what the sharding sends per sample (DDP and ZeRO-1: the gradients once per step; FSDP: the
                 gathers and reduce-scatters of every pass) / the GPU-to-GPU link; e in [0, 1] is the share
                 of it that is not hidden behind compute, fitted from the multi-GPU rows

Fitted by coordinate descent on the squared log error (golden-section search per parameter, in log space).
Validation never fits on what it checks: each group of rows (one source, GPU, model and GPU count) is
predicted from a fit without it; and each generation is predicted from a fit without any of its rows, as if
nobody had measured it, which says how far one generation's fit misses another's: the band of a generation
with no data. No torch here.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

from engine.data.external import ExternalData, ExternalRow
from engine.data.generations import BASE, GENERATIONS, generation_of
from engine.data.presets import Gpu, Presets
from engine.predict.fit import Band, Fit
from engine.predict.terms import (ADAM_UPDATE_BYTES, EAGER_SCORE_TRAFFIC, LAYER_ELEMENTWISE_TRAFFIC, LOGIT_TRAFFIC,
                                  link_bytes_per_s)

LOG_BOUND = math.log(8.0)  # a generation's factor stays within 1/8 .. 8 of Hopper's
SOURCE_BOUND = math.log(20.0)
SPLIT_WEIGHT = 0.05  # pulls k_c and k_m together where the rows cannot tell them apart
CARD_WEIGHT = 0.05  # pulls a card's own factor toward its generation's (per row of the card)
CYCLES = 12
BOUND_BY_LINE = False
FIT_ATTENTION = True
MASKED_SHARE = 0.15  # BERT's masked-LM loss: logits at the masked 15% of positions
# What non-reentrant checkpointing runs again, as a share of a pass: what PyTorch's FLOP counter finds for
# decoder transformers (Pythia 0.195-0.225, the presets' checkpoint_recompute), not a whole forward.
CHECKPOINT_RECOMPUTE = 0.21


@dataclass(frozen=True)
class RowTerms:
    row: ExternalRow
    generation: str
    a: float  # x_c x compute_s of the matmuls: at our Hopper efficiency, per sample
    a_attention: float  # x_c x compute_s of attention's s x s products (flash kernels run below GEMM speed)
    b: float  # x_m x memory_s
    comm: float  # comm_s at the full link rate, per sample
    y: float  # log of the published seconds per sample per GPU
    line_kc: float  # 1 / (x_c line): s x k_c may not go below it (no source above the generation's line)


def row_terms(r: ExternalRow, gpu: Gpu, base: Fit) -> RowTerms:
    s, L, h, V = r.seq_len, r.layers, r.hidden, r.vocab
    body = L * (4 * h * h + 2 * h * r.ffn)  # matmul parameters of the layers
    params = r.params or (body + V * h)
    positions = {"causal-lm": s, "mlm": MASKED_SHARE * s, "squad": s}[r.task]
    width = 2 if r.task == "squad" else V
    attention = 12 * L * h * s * s  # counted whole even where a causal kernel skips half: it runs below GEMM speed
    flops = 6 * body * s + 6 * h * width * positions
    k = 1 + CHECKPOINT_RECOMPUTE if r.checkpointing else 1.0
    compute_s = k * flops / gpu.peak_16bit_flops
    attention_s = k * attention / gpu.peak_16bit_flops
    traffic = k * LAYER_ELEMENTWISE_TRAFFIC * L * s * h + LOGIT_TRAFFIC * positions * width
    if not r.fused_attention:
        traffic += k * EAGER_SCORE_TRAFFIC * L * r.heads * s * s
    n = r.num_gpus
    per_gpu_step = (r.global_batch / n if r.global_batch else None) or ((r.micro_batch or 1) * (r.grad_accum or 1))
    # The optimizer step is in every published step time; per sample it is the update's bytes over the samples a
    # GPU takes a step, which matters where the micro-batch is small: Languini's 731M GPT on an RTX 3090 steps every
    # 4 sequences (about 7% of its step), its A100 every 36. Left out, the 3090 came out 19% too fast on that model
    # and 28% too slow on the 28M one. ZeRO-1 and FSDP update their shard only. A row that states neither its global
    # batch nor its accumulation (NVIDIA's BERT phase 1) does not say how often it steps: no term for it.
    if r.global_batch or r.grad_accum:
        held = params if r.sharding in ("none", "ddp") else params / n
        traffic += ADAM_UPDATE_BYTES * held / per_gpu_step
    memory_s = traffic / (gpu.memory_bandwidth_gbs * 1e9)
    comm = 0.0
    if n > 1:
        ring = (n - 1) / n
        if r.sharding in ("ddp", "zero1", "none"):
            comm = 2 * ring * 2 * params / per_gpu_step  # 16-bit gradients reduced once per step
        else:
            gathers = 1 if r.sharding == "fsdp_grad_op" else 2 + (1 if r.checkpointing else 0)
            comm = ring * (gathers * 2 * params + 4 * params) / (r.micro_batch or 1)
        comm /= link_bytes_per_s(gpu, n)
    g = generation_of(gpu)
    return RowTerms(r, g.id if g else "other", base.x_c * compute_s, base.x_c * attention_s, base.x_m * memory_s, comm,
                    math.log(r.seconds_per_sample), 1.0 / (base.x_c * (g.mfu_line if g else 0.6)))


@dataclass
class GenerationFit:
    """Fitted factors: per generation (k_c, k_m), per source s, the exposed share of communication."""

    kc: dict[str, float] = field(default_factory=dict)
    ka: dict[str, float] = field(default_factory=dict)
    km: dict[str, float] = field(default_factory=dict)
    source: dict[str, float] = field(default_factory=dict)
    attention: float = 1.0  # attention's s x s products against the matmuls, at our efficiency (all generations)
    exposed: float = 1.0
    rows: dict[str, int] = field(default_factory=dict)  # rows per generation the fit used
    card: dict[str, float] = field(default_factory=dict)  # a card's own factor on its compute (preset id)
    card_rows: dict[str, int] = field(default_factory=dict)

    def card_source(self, card: str | None, same_chip_as: str | None = None) -> str | None:
        """The card whose published rows give `card` its own factor: itself where measured; else the card
        on its chip (the preset's same_chip_as) where that one is; None: the generation's factors."""
        if card is not None and card in self.card:
            return card
        if same_chip_as is not None and same_chip_as in self.card:
            return same_chip_as
        return None

    def factors(self, generation: str, card: str | None = None,
                same_chip_as: str | None = None) -> tuple[float, float, float, str]:
        """(k_c, k_a, k_m, the generation the factors come from): a generation with no data takes its
        fallback's (engine/data/generations.py), else Hopper's; a card measured in published rows has its
        own factor on k_c and k_a, where its generation's are its own, and a card with none takes the factor
        of the card on its chip (same_chip_as) where that one has rows. The factor is on the share of the
        card's own datasheet peak (compute_s divides by it), so a sibling's carries over unscaled: the two
        cards' peaks and bandwidths already enter through compute_s and memory_s."""
        seen = set()
        g = generation
        while g not in self.kc and g != BASE and g not in seen:
            seen.add(g)
            nxt = GENERATIONS[g].fallback if g in GENERATIONS else None
            g = nxt or BASE
        if g == BASE:
            return 1.0, 1.0, 1.0, BASE
        src = self.card_source(card, same_chip_as) if g == generation else None
        c = self.card[src] if src is not None else 1.0
        return c * self.kc[g], c * self.ka[g], self.km[g], g

    def predict(self, t: RowTerms) -> float:
        kc, ka, km, _ = self.factors(t.generation, t.row.gpu)
        s = self.source.get(t.row.source, 1.0)
        return s * (kc * t.a + self.attention * ka * t.a_attention + km * t.b) + self.exposed * t.comm


def _golden(f, lo: float, hi: float, iters: int = 28) -> float:
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


def fit(terms: Sequence[RowTerms], start: GenerationFit | None = None, cycles: int = CYCLES) -> GenerationFit:
    """Coordinate descent on sum (log t_predicted - log t_published)^2."""
    gf = (replace(start, kc=dict(start.kc), ka=dict(start.ka), km=dict(start.km), source=dict(start.source),
                  card=dict(start.card), card_rows=dict(start.card_rows))
          if start else GenerationFit())
    by_source: dict[str, list[RowTerms]] = {}
    by_gen: dict[str, list[RowTerms]] = {}
    for t in terms:
        by_source.setdefault(t.row.source, []).append(t)
        if t.generation != BASE:
            by_gen.setdefault(t.generation, []).append(t)
    for g in by_gen:
        for k in (gf.kc, gf.ka, gf.km):
            k.setdefault(g, 1.0)
    for s in by_source:
        gf.source.setdefault(s, 1.0)
    gf.rows = {g: len(v) for g, v in by_gen.items()}
    gf.rows[BASE] = sum(1 for t in terms if t.generation == BASE)
    by_card: dict[str, list[RowTerms]] = {}
    for g, rows in by_gen.items():
        for t in rows:
            by_card.setdefault(t.row.gpu, []).append(t)
    gf.card = {c: gf.card.get(c, 1.0) for c in by_card}  # a card with no rows here has none
    gf.card_rows = {c: len(v) for c, v in by_card.items()}

    # Each search varies one factor: the rest of every row's prediction is computed once per search, in the
    # order GenerationFit.predict computes it (so the fit is the same to the last bit, only faster).
    def resolved(t: RowTerms) -> tuple[float, float, float, float]:
        kc, ka, km, _ = gf.factors(t.generation, t.row.gpu)
        return gf.source.get(t.row.source, 1.0), kc, ka, km

    log = math.log  # below, (log(max(p, 1e-30)) - y) ** 2 written out: the fit's inner loop

    comm_rows = [t for t in terms if t.comm > 0]
    attention_rows = [t for t in terms if t.a_attention > 0.05 * t.a]  # where attention's share can show
    for _ in range(cycles):
        for s, rows in by_source.items():
            inner = []
            for t in rows:
                _, kc, ka, km = resolved(t)
                inner.append((kc * t.a + gf.attention * ka * t.a_attention + km * t.b, gf.exposed * t.comm, t.y))

            def f(u, inner=inner):
                v = math.exp(u)
                return sum((log(1e-30 if (p := v * x + e) < 1e-30 else p) - y) ** 2 for x, e, y in inner)
            gf.source[s] = math.exp(_golden(f, -SOURCE_BOUND, SOURCE_BOUND))
        for g, rows in by_gen.items():
            floor = -LOG_BOUND if not BOUND_BY_LINE else math.log(max(t.line_kc / gf.source[t.row.source] for t in rows))
            weight, ka, km = SPLIT_WEIGHT * len(rows), gf.ka[g], gf.km[g]
            srcs = [gf.source.get(t.row.source, 1.0) for t in rows]
            cards = [gf.card.get(t.row.gpu, 1.0) for t in rows]
            parts = [(sv, cf * t.a, cf * gf.attention * ka * t.a_attention, km * t.b, gf.exposed * t.comm, t.y)
                     for sv, cf, t in zip(srcs, cards, rows)]
            log_km = math.log(km)

            def fc(u, parts=parts, log_km=log_km, weight=weight):
                v = math.exp(u)
                return (sum((log(1e-30 if (p := sv * (v * a + x2 + x4) + e) < 1e-30 else p) - y) ** 2
                            for sv, a, x2, x4, e, y in parts) + weight * (u - log_km) ** 2)
            kc = gf.kc[g] = math.exp(_golden(fc, max(-LOG_BOUND, floor), LOG_BOUND))

            parts = [(sv, cf * (kc * t.a + gf.attention * ka * t.a_attention), t.b, gf.exposed * t.comm, t.y)
                     for sv, cf, t in zip(srcs, cards, rows)]
            log_kc = math.log(kc)

            def fm(u, parts=parts, log_kc=log_kc, weight=weight):
                v = math.exp(u)
                return (sum((log(1e-30 if (p := sv * (x3 + v * b) + e) < 1e-30 else p) - y) ** 2
                            for sv, x3, b, e, y in parts) + weight * (log_kc - u) ** 2)
            km = gf.km[g] = math.exp(_golden(fm, -LOG_BOUND, LOG_BOUND))

            parts = [(sv, cf * kc * t.a, cf * t.a_attention, km * t.b, gf.exposed * t.comm, t.y)
                     for sv, cf, t in zip(srcs, cards, rows)]
            att = gf.attention

            def fa(u, parts=parts, log_kc=log_kc, weight=weight, att=att):
                v = math.exp(u)
                return (sum((log(1e-30 if (p := sv * (x1 + att * v * aa + x4) + e) < 1e-30 else p) - y) ** 2
                            for sv, x1, aa, x4, e, y in parts)
                        + weight * (log_kc - u) ** 2)
            ka = gf.ka[g] = math.exp(_golden(fa, -LOG_BOUND, LOG_BOUND))

            if len({t.row.gpu for t in rows}) < 2:
                continue  # one card: the generation's factors are its own
            for card in sorted({t.row.gpu for t in rows}):
                own = [(gf.source.get(t.row.source, 1.0), kc * t.a + gf.attention * ka * t.a_attention, km * t.b,
                        gf.exposed * t.comm, t.y) for t in rows if t.row.gpu == card]
                pull = CARD_WEIGHT * len(own)

                def fcard(u, own=own, pull=pull):
                    v = math.exp(u)
                    return (sum((log(1e-30 if (p := sv * (v * x1 + x4) + e) < 1e-30 else p) - y) ** 2
                                for sv, x1, x4, e, y in own) + pull * u * u)
                gf.card[card] = math.exp(_golden(fcard, -LOG_BOUND, LOG_BOUND))
        if attention_rows and FIT_ATTENTION:
            parts = []
            for t in attention_rows:
                sv, kc, ka, km = resolved(t)
                parts.append((sv, kc * t.a, ka, t.a_attention, km * t.b, gf.exposed * t.comm, t.y))

            def fat(u, parts=parts):
                v = math.exp(u)
                return sum((log(1e-30 if (p := sv * (x1 + v * ka * aa + x4) + e) < 1e-30 else p) - y) ** 2
                           for sv, x1, ka, aa, x4, e, y in parts)
            gf.attention = math.exp(_golden(fat, -LOG_BOUND, LOG_BOUND))
        if comm_rows:
            parts = []
            for t in comm_rows:
                sv, kc, ka, km = resolved(t)
                parts.append((sv * (kc * t.a + gf.attention * ka * t.a_attention + km * t.b), t.comm, t.y))

            def fe(e, parts=parts):
                return sum((log(1e-30 if (p := x6 + e * c) < 1e-30 else p) - y) ** 2 for x6, c, y in parts)
            gf.exposed = _golden(fe, 0.0, 1.0)
    return gf


def all_terms(data: ExternalData, presets: Presets, base: Fit) -> list[RowTerms]:
    return [row_terms(r, presets.gpu(r.gpu), base) for r in data.rows if r.gpu in presets.gpus]


# --- validation ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExternalCheck:
    row: ExternalRow
    generation: str
    predicted_s: float
    published_s: float
    factors_from: str  # the generation whose factors predicted it

    @property
    def error(self) -> float:
        return self.predicted_s / self.published_s - 1


def _group(t: RowTerms) -> tuple:
    return (t.row.source, t.row.gpu, t.row.model, t.row.num_gpus)


def leave_group_out(terms: Sequence[RowTerms], full: GenerationFit) -> list[ExternalCheck]:
    """Each group of rows (one source, GPU, model and GPU count) predicted from a fit without it."""
    groups: dict[tuple, list[RowTerms]] = {}
    for t in terms:
        groups.setdefault(_group(t), []).append(t)
    out = []
    for key, held in groups.items():
        rest = [t for t in terms if _group(t) != key]
        gf = fit(rest, start=full, cycles=3)
        if not any(t.row.source == key[0] for t in rest):
            gf.source.pop(key[0], None)  # a source seen nowhere else: its software factor is unknown (1)
        for t in held:
            out.append(ExternalCheck(t.row, t.generation, gf.predict(t), t.row.seconds_per_sample,
                                     gf.factors(t.generation, t.row.gpu)[3]))
    return out


def leave_generation_out(terms: Sequence[RowTerms], full: GenerationFit) -> list[ExternalCheck]:
    """Each generation with data predicted as if nobody had measured it: its factors from its fallback."""
    out = []
    for g in sorted({t.generation for t in terms} - {BASE}):
        rest = [t for t in terms if t.generation != g]
        gf = fit(rest, start=GenerationFit(source=dict(full.source), exposed=full.exposed), cycles=6)
        for k in (gf.kc, gf.ka, gf.km):
            k.pop(g, None)
        for t in terms:
            if t.generation == g:
                out.append(ExternalCheck(t.row, g, gf.predict(t), t.row.seconds_per_sample, gf.factors(g)[3]))
    return out


def band_from(errors: Sequence[float], what: str) -> Band:
    """The band from validation errors: their 5th to 95th percentile (all of them under 20)."""
    e = sorted(errors)
    if len(e) >= 20:
        lo, hi = e[int(0.05 * (len(e) - 1))], e[int(math.ceil(0.95 * (len(e) - 1)))]
        return Band(1 / (1 + hi), 1 / (1 + lo), tuple(errors), what + " (5th-95th percentile of errors)")
    return Band.from_errors(errors, what)


def generation_bands(checks: Sequence[ExternalCheck], extrapolated: Sequence[ExternalCheck]) -> dict[str, Band]:
    """A band per generation from its held-out checks; for a generation with none, the spread of every
    generation's extrapolation (how far one generation's fit misses another's), which is wider."""
    out: dict[str, Band] = {}
    for g in sorted({c.generation for c in checks}):
        errs = [c.error for c in checks if c.generation == g]
        out[g] = band_from(errs, f"{g}: {len(errs)} published rows, each predicted without its group")
    far = [c.error for c in extrapolated]
    for g in sorted({c.generation for c in extrapolated}):  # each generation predicted from another, apart
        errs = [c.error for c in extrapolated if c.generation == g]
        out[f"extrapolated:{g}"] = band_from(errs, f"{g} predicted as if nobody had measured it ({len(errs)} rows)")
    if far:
        out["extrapolated"] = band_from(far, f"no data for this generation: the errors of predicting each measured "
                                             f"generation from the others ({len(far)} rows)")
    return out


def ratio_checks(checks: Sequence[ExternalCheck]) -> list[dict]:
    """Within a source, the same model, sequence, micro-batch and GPU count on two GPUs: the published ratio
    of their speeds against the predicted one (what decides a purchase)."""
    by_cfg: dict[tuple, dict[str, ExternalCheck]] = {}
    for c in checks:
        r = c.row
        by_cfg.setdefault((r.source, r.model, r.seq_len, r.micro_batch, r.num_gpus, r.sharding, r.checkpointing), {}) \
            .setdefault(r.gpu, c)
    out = []
    for cfg, per_gpu in by_cfg.items():
        gpus = sorted(per_gpu)
        for i, g1 in enumerate(gpus):
            for g2 in gpus[i + 1:]:
                a, b = per_gpu[g1], per_gpu[g2]
                published = a.published_s / b.published_s
                predicted = a.predicted_s / b.predicted_s
                out.append({"source": cfg[0], "model": cfg[1], "seq_len": cfg[2], "num_gpus": cfg[4],
                            "gpus": f"{g1}/{g2}", "published": published, "predicted": predicted,
                            "error": predicted / published - 1})
    return out


RELATIVE_TO = ("h100", "a100")  # against the H100 where a source ran it, else against its A100
RELATIVE_TARGET = 0.15  # issue 39: a card's speed relative to the H100 within 15% of every source that measured both


def relative_speeds(checks: Sequence[ExternalCheck], to: Sequence[str] = RELATIVE_TO) -> list[dict]:
    """Per source and card: how fast the card is against the first card of `to` that the same published run had
    (model, sequence, GPU count; each card at the micro-batch its source ran, which is what a buyer gets; the H100,
    else the A100 for a source that ran no H100: Languini's RTX 3090 against its A100), published and predicted,
    the median over the source's runs. error: predicted speed ratio / published - 1 (negative: the card
    predicted too slow against the reference)."""
    by_run: dict[tuple, dict[str, ExternalCheck]] = {}
    for c in checks:
        r = c.row
        by_run.setdefault((r.source, r.model, r.seq_len, r.num_gpus), {}).setdefault(r.gpu, c)
    pairs: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    has = {}
    for (source, *_), per_gpu in by_run.items():
        has.setdefault(source, set()).update(per_gpu)
    for (source, *_), per_gpu in by_run.items():
        against = next((g for g in to if g in has[source]), None)  # one reference per source
        ref = per_gpu.get(against) if against else None
        if ref is None:
            continue
        for g, c in per_gpu.items():
            if g != against:  # speed = 1 / time per sample per GPU
                pairs.setdefault((source, g, against), []).append((ref.published_s / c.published_s,
                                                                   ref.predicted_s / c.predicted_s))
    out = []
    for (source, g, against), v in sorted(pairs.items()):
        published = statistics.median(p for p, _ in v)
        errors = [q / p - 1 for p, q in v]
        out.append({"source": source, "gpu": g, "against": against, "runs": len(v), "published": published,
                    "predicted": statistics.median(q for _, q in v), "error": statistics.median(errors),
                    "worst": max(errors, key=abs), "met": abs(statistics.median(errors)) <= RELATIVE_TARGET})
    return out


def summary(checks: Sequence[ExternalCheck], key) -> list[dict]:
    groups: dict[str, list[float]] = {}
    for c in checks:
        groups.setdefault(key(c), []).append(c.error)
    return [{"group": k, "count": len(v), "median_abs": statistics.median(abs(x) for x in v),
             "worst_abs": max(abs(x) for x in v), "median": statistics.median(v)} for k, v in sorted(groups.items())]


# --- the calibration the predictor uses, and its file ----------------------------------------------------


CALIBRATION_FILE = "fitted.json"  # in data/external/, written by scripts/build_db.py


def base_fit(predictor) -> Fit | None:
    """Our measured transformers' fit (free-lunch, compiled): what published rows are predicted from."""
    return predictor.fit("published", "compiled", "transformer")


@dataclass
class Calibration:
    """What the predictor needs from the published measurements: the factors and a band per generation."""

    fit: GenerationFit
    bands: dict[str, Band]
    inputs: str  # a digest of what it was fitted on: rows and the base fit
    note: str = ""

    def band_for(self, generation: str) -> tuple[Band | None, str]:
        """The generation's own held-out band, or, for one with no data, the extrapolation band."""
        if generation in self.bands:
            return self.bands[generation], generation
        return self.bands.get("extrapolated"), "extrapolated"

    def to_json(self) -> dict:
        f = self.fit
        return {"inputs": self.inputs, "note": self.note,
                "fit": {"kc": f.kc, "ka": f.ka, "km": f.km, "source": f.source, "attention": f.attention,
                        "exposed": f.exposed, "rows": f.rows, "card": f.card, "card_rows": f.card_rows},
                "bands": {g: {"low_factor": b.low_factor, "high_factor": b.high_factor, "what": b.what,
                              "errors": list(b.errors)} for g, b in self.bands.items()}}

    @classmethod
    def from_json(cls, data: dict) -> "Calibration":
        f = data["fit"]
        fit_ = GenerationFit(kc=dict(f["kc"]), ka=dict(f["ka"]), km=dict(f["km"]), source=dict(f["source"]),
                             attention=float(f["attention"]), exposed=float(f["exposed"]), rows=dict(f["rows"]),
                             card=dict(f.get("card", {})), card_rows=dict(f.get("card_rows", {})))
        bands = {g: Band(b["low_factor"], b["high_factor"], tuple(b["errors"]), b["what"])
                 for g, b in data["bands"].items()}
        return cls(fit_, bands, data["inputs"], data.get("note", ""))


def digest(terms: Sequence[RowTerms], base: Fit) -> str:
    """What a calibration rests on: the published rows and the GPU presets' numbers they are predicted with.
    Not the base fit: the factors are ratios to Hopper within each source, which a database with a few more
    measurements of its own barely moves; the file records the base it was fitted against."""
    import hashlib

    h = hashlib.sha256()
    for t in terms:
        a, b = t.a / base.x_c, t.b / base.x_m  # the row's own terms, whatever the base
        h.update(f"{t.row.source}|{t.row.line}|{t.row.gpu}|{t.row.tokens_per_s:.6g}|{a:.6g}|{b:.6g}".encode())
    return h.hexdigest()[:16]


def calibrate(presets: Presets, base: Fit, data: ExternalData | None = None, with_bands: bool = True) -> Calibration:
    """Fit the factors on every usable published row; with_bands: validate (each group held out, each
    generation held out) and derive a band per generation from it."""
    from engine.data.external import load

    data = data or load(gpu_ids=set(presets.gpus))
    terms = all_terms(data, presets, base)
    full = fit(terms, cycles=20)
    bands: dict[str, Band] = {}
    if with_bands:
        bands = generation_bands(leave_group_out(terms, full), leave_generation_out(terms, full))
    return Calibration(full, bands, digest(terms, base),
                       note=f"{len(terms)} published rows from {len({t.row.source for t in terms})} sources, "
                            f"against our transformers' fit x_c {base.x_c:.3f}, x_m {base.x_m:.3f}")


def load_calibration(presets: Presets, base: Fit, folder=None) -> Calibration:
    """The calibration scripts/build_db.py wrote, if it was fitted on what is here now; else one fitted now,
    without bands (the predictor then says its band is unvalidated)."""
    import json

    from engine.data.external import load
    from engine.data.paths import external_dir

    data = load(folder, gpu_ids=set(presets.gpus))
    terms = all_terms(data, presets, base)
    path = Path(folder or external_dir()) / CALIBRATION_FILE
    try:
        saved = Calibration.from_json(json.loads(path.read_text()))
        if saved.inputs == digest(terms, base):
            return saved
    except (OSError, ValueError, KeyError, TypeError):
        pass
    full = fit(terms, cycles=20)
    return Calibration(full, {}, digest(terms, base), note="fitted now; not validated (scripts/build_db.py validates)")


def combine(a: Band | None, b: Band | None, what: str) -> Band | None:
    """Two independent error sources: their log widths add in quadrature."""
    if a is None or b is None:
        return a or b
    lo = math.exp(-math.hypot(math.log(a.low_factor), math.log(b.low_factor)))
    hi = math.exp(math.hypot(math.log(a.high_factor), math.log(b.high_factor)))
    return Band(lo, hi, a.errors + b.errors, what)
