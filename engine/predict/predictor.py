"""The predictor: fits from the basis rows (engine/predict/fit.py), offloading's calibrations, and one
prediction of a (model, GPU, count, methods) with every term that produced it and a line per term."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from engine.data import formulas, space
from engine.data.presets import Gpu, Model, Network, Presets
from engine.data.space import Methods
from engine.data.runs import run_key
from engine.predict import calibration, extras, floors as pass_floors, memory, offload
from engine.predict.comm import comm_kind, comm_overlap, waits
from engine.data.generations import BASE, GENERATIONS, fp8_peak_ratio, generation_of, mfu_line
from engine.predict.fit import Band, BasisRow, Fit, basis_row, distinct, fit_rows
from engine.predict.generations import Calibration, combine
from engine.predict.intervals import (FLOOR_BOUND, Evidence, Intervals, floor_bound, generation_width, kind_name,
                                      unmeasured_generation_width)
from engine.predict.memory import shape
from engine.predict.terms import (DEFAULT_CPU_ADAM_S_PER_PARAM, DEFAULT_UPDATE_BANDWIDTH_FRACTION, GROUP_WORDS,
                                  LINK_EFFICIENCY, PredictError, arch_of, comm_bytes,
                                  compute_flops_per_sample, compute_peak_flops, group_of, host_bytes, host_bytes_per_s,
                                  host_kind, host_transfers, link_bytes_per_s, link_name, offload_kind, optimizer_bytes,
                                  recompute, traffic_terms, attention_share, MOE_BAND, moe_lines, EXTRA_BANDS,
                                  FP8_EFFICIENCY, FUSED_LOGIT_TRAFFIC, fp8_cast_bytes, fp8_linear_share, fp8_speedup)

# --- predictions --------------------------------------------------------------------------------------


@dataclass
class Prediction:
    """One method combination on one hardware cell, with every term that produced it."""

    model: str
    gpu: str
    num_gpus: int
    methods: Methods
    feasible: bool
    reason: str = ""
    micro_batch: int | None = None
    grad_accum: int | None = None
    pass_s: float | None = None
    update_s: float | None = None
    step_s: float | None = None
    days: float | None = None
    days_low: float | None = None
    days_high: float | None = None
    mfu: float | None = None
    capped: bool = False
    uncapped_days: float | None = None  # the time model's own figure where the line held it (capped)
    kind: str = ""  # the kind of extrapolation (engine/predict/intervals.py) whose held-out errors set the interval
    memory_need_gb: float | None = None
    memory_capacity_gb: float | None = None
    basis: str = ""
    terms: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)  # the explanation, one term per line
    nodes: int = 1  # machines the num_gpus are split over (num_gpus // nodes each)
    network: str | None = None  # the network preset between them (nodes > 1)
    max_micro_batch: int | None = None  # a cap asked for (`--max-micro-batch`): the largest that fits, at most this

    @property
    def label(self) -> str:
        return self.methods.label


# A model's sharded rows that run this far from its unsharded rows' speed per FLOP run another path (the mixture of
# experts: 2x faster under FSDP than DDP), not what the time model leaves out of sharding (within ~20% in the
# dense models' rows): they set that sharding's residual.
PATH_APART = 1.5

class Predictor:
    """Fits from a set of basis rows; predicts any (model, GPU, count, methods)."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], presets: Presets, use_paper: bool = True,
                 bands: Mapping[str, Band] | None = None, generations: "Calibration | None" = None,
                 basis_of: "Callable[[dict], BasisRow | None] | None" = None):
        self.presets = presets
        self.generations = generations  # per-generation factors and bands (engine/predict/generations.py)
        rows = [dict(r) for r in rows]
        self.stored = rows
        # basis_of: basis_row with these presets, memoized by a caller that builds many predictors over
        # subsets of the same rows (validate.leave_one_out)
        of = basis_of or (lambda r: basis_row(r, presets))
        basis = distinct(b for b in (of(r) for r in rows) if b is not None)
        self.basis = [b for b in basis if b.source == "measured" or use_paper]
        self.calibrations = calibration.calibrate(rows, presets)
        self.ooms = calibration.MeasuredOoms(rows, presets)  # measured out of memory: over the memory model
        # fused kernels and FP8 measured beside the same setting without them: their ratios (engine/predict/extras.py)
        self.extras_pairs = extras.measured_pairs(rows)
        self.bands = dict(bands or {})
        self._family_of_arch = {b.arch: b.family for b in self.basis}
        self._fits: dict[tuple[str, str, str], Fit | None] = {}
        self.evidence = Evidence.of(self.basis)  # what is measured where: a prediction's kind of extrapolation
        self.intervals: Intervals | None = None  # calibrated widths per kind (build_predictor loads them)
        self._gen_w: dict[str, float | None] = {}
        self._same: dict[str, set[str]] = {}
        updates = [b.update_s / b.update_bytes for b in self.basis
                   if b.update_s and b.update_bytes > 0 and b.source == "measured"]
        self.x_u = statistics.median(updates) if updates else 1 / DEFAULT_UPDATE_BANDWIDTH_FRACTION
        self.x_u_note = (f"update: {1 / self.x_u:.0%} of bandwidth, median of {len(updates)} measured updates"
                         if updates else f"update: {DEFAULT_UPDATE_BANDWIDTH_FRACTION:.0%} of bandwidth assumed")
        # The offload update per parameter each GPU holds, per implementation: CPU Adam over the fp32 master
        # weights and moments plus the copy back, measured together. DeepSpeed's vectorized CPU Adam and
        # FSDP's torch.optim.Adam on the CPU differ several-fold, so each is calibrated from its own rows;
        # an implementation nobody measured takes the other's rows, then the assumption.
        per_param: dict[str, list[float]] = {"zero": [], "fsdp": []}
        for b in self.basis:
            if b.source == "measured" and b.methods.offloading and b.update_s:
                params = shape(presets.model(b.model)).params / b.num_gpus
                per_param[offload_kind(b.methods)].append(b.update_s / params)
        self.offload_update_s: dict[str, float] = {}
        self.cpu_note: dict[str, str] = {}
        for k, v in per_param.items():
            other = [x for kk, vv in per_param.items() if kk != k for x in vv]
            if v:
                self.offload_update_s[k] = statistics.median(v)
                self.cpu_note[k] = f"{len(v)} measured {k} offload updates"
            elif other:
                self.offload_update_s[k] = statistics.median(other)
                self.cpu_note[k] = f"no measured {k} offload update: {len(other)} of the other implementation"
            else:
                self.offload_update_s[k] = DEFAULT_CPU_ADAM_S_PER_PARAM
                self.cpu_note[k] = "assumed (no measured offload update)"
            self.cpu_note[k] = f"offload update {self.offload_update_s[k] * 1e9:.2f} ns/param: " + self.cpu_note[k]
        # How much of offloading's copies a pass exposes, per implementation: each measured offload pass,
        # less what its group's fit (and its model's residual) says the same pass takes on the GPU, over its
        # copies' time at LINK_EFFICIENCY of PCIe; clipped to [0, 1] (prefetch can hide copies behind the
        # GPU's work, never make them cost less than nothing or more than in full); median.
        # DeepSpeed's offloaded passes instead: the copies at the PCIe rate plus a latency per module transfer
        # (host_transfers), per stage, median over measured offload passes of other cells.
        rates: dict[str, list[float]] = {"fsdp": []}
        lat: dict[str, list[float]] = {"zero2": [], "zero3": []}
        several: list[tuple[BasisRow, float, float]] = []  # FSDP offload on several GPUs (engine/predict/offload.py)
        for b in self.basis:
            if b.source != "measured" or not b.methods.offloading or not b.host_pass_s or not b.timed_micro_batch:
                continue
            f = self.fit(b.arch, b.group, b.family)
            if f is None:
                continue
            own = self._own_rows(f, self._same_model(b.model), b.group, b.methods)
            gpu_s = b.timed_micro_batch * self._residual(f, own) * f.per_sample(b.compute_s, b.memory_s)
            copies_s = b.host_pass_s / LINK_EFFICIENCY
            exposed = b.timed_micro_batch * b.per_sample_s - gpu_s
            kind = host_kind(b.methods)
            if kind == "fsdp" and b.num_gpus > 1:
                several.append((b, exposed, copies_s))
            elif kind == "fsdp":
                rates[kind].append(min(1.0, max(0.0, exposed / copies_s)))
            else:
                lat[kind].append(max(0.0, exposed - copies_s) / host_transfers(presets.model(b.model), b.methods))
        self.host_exposed = {k: statistics.median(v) if v else 1.0 for k, v in rates.items()}
        self.host_note = {k: (f"{self.host_exposed[k]:.0%} of the copy time exposed, median of {len(v)} measured "
                              f"{k} offload passes" if v else f"copies exposed in full (no measured {k} offload pass)")
                          for k, v in rates.items()}
        self.sharded_offload = offload.ShardedOffload.of([
            offload.Sample((b.model, b.gpu, b.num_gpus), exposed - self.host_exposed["fsdp"] * copies_s,
                           shape(presets.model(b.model)).params / b.num_gpus, b.host_heap)
            for b, exposed, copies_s in several])
        # How much of the GPU-to-GPU traffic hides behind the GPU's work, per kind (engine/predict/comm.py).
        self.comm_hidden, self.comm_note = comm_overlap(rows, presets)
        self._floors: pass_floors.Floors | None = None  # fitted on first use (floors below)
        self.host_latency_s: dict[str, float] = {}
        for k, v in lat.items():
            pool = v or [x for vv in lat.values() for x in vv]
            self.host_latency_s[k] = statistics.median(pool) if pool else 0.0
            self.host_exposed[k] = 1.0
            self.host_note[k] = (f"copies in full + {self.host_latency_s[k] * 1e3:.1f} ms per layer transfer, median "
                                 f"of {len(pool)} measured {k if v else 'ZeRO'} offload passes" if pool else
                                 "copies in full, no latency (no measured ZeRO offload pass)")

    @property
    def floors(self) -> pass_floors.Floors:
        """What a pass takes at least (engine/predict/floors.py), fitted on first use to the measured passes
        over the machine's own links against this predictor's own figure for each, without a floor."""
        if self._floors is None:
            self._floors = pass_floors.calibrate(self._floor_samples())
        return self._floors

    def _floor_samples(self) -> list[pass_floors.Sample]:
        from engine.data.errors import PlannerError
        from engine.data.links import own_links
        from engine.data.runs import on_run
        from engine.predict.terms import dense_causal_mask_of

        out = []
        for r in self.stored:
            if (r.get("source") != "measured" or not r.get("feasible") or r.get("failure_kind")
                    or not r.get("pass_s") or not r.get("micro_batch") or not own_links(r)
                    or memory.beyond_the_paper(r) or r.get("offloading")):
                continue
            try:
                model, gpu, methods = self.presets.model(r["model"]), self.presets.gpu(r["gpu"]), memory.methods_of(r)
                mb = int(r["micro_batch"])
                if not gpu.p2p and int(r["num_gpus"]) > 1:
                    continue  # collectives the floor does not take (no peer access): nothing to fit k on
                if not on_run(r, model):
                    continue  # the model's row on another run of it: not this preset's step
                p = self.predict(model.id, gpu.id, int(r["num_gpus"]), methods, max_micro_batch=mb, floor=False,
                                 dense_causal_mask=dense_causal_mask_of(r, model, methods))
            except (PlannerError, KeyError, TypeError, ValueError):
                continue
            if not p.feasible or p.micro_batch != mb or not p.pass_s:
                continue
            kind, comm, layers, compiled = p.terms["floor_inputs"]
            out.append(pass_floors.Sample(kind, comm, layers, compiled, p.pass_s, float(r["pass_s"]),
                                          f"{model.id} {methods.label} {r['num_gpus']}x{gpu.id} mb {mb}",
                                          f"{model.id} {r['num_gpus']}x{gpu.id}", gpu.id))
        return out

    @staticmethod
    def _own_rows(f: "Fit", model_ids: "set[str]", group: str, methods: Methods | None = None) -> list[BasisRow]:
        """This model's rows in the fit that its residual comes from: the unsharded ones where it has any,
        else all. A residual is about the model, the same for each of its settings (so a setting's terms,
        such as offloading's copies, keep their order); sharded rows also carry what the time model leaves
        out of sharding (exposed communication, FSDP's re-gathers in a checkpointed recompute, ZeRO-3's host
        time the floor adds again), which would land on every setting. Except where a sharding family's rows
        (ZeRO, FSDP; neither checkpointed nor offloaded) run more than PATH_APART from the unsharded rows'
        speed: that is the path's own speed on this model (a mixture of experts ran 2x faster per FLOP under
        FSDP than under DDP, docs/measurements.md 2026-11-28), and it sets that family's residual.
        `model_ids`: the model and the same architecture on other runs (Predictor._same_model); `methods`:
        the setting's (its sharding family: comm.comm_kind)."""
        mine = [b for b in f.rows if b.model in model_ids]
        # A fit borrowed from another group (no rows of its own) lends its residual too: from the rows it
        # was fitted on, compiled before naive, so the model's settings on the same fit share one residual.
        own = ([b for b in mine if b.group == group] or [b for b in mine if b.group != "naive"] or mine)
        unsharded = [b for b in own if b.methods.sharding == "none"] or own
        if methods is None or methods.sharding == "none" or not unsharded:
            return unsharded
        alike = [b for b in own if comm_kind(b.methods) == comm_kind(methods)
                 and not b.methods.activation_checkpointing and not b.methods.offloading]
        if alike:
            apart = Predictor._residual(f, alike) / Predictor._residual(f, unsharded)
            if max(apart, 1 / apart) > PATH_APART:
                return alike
        return unsharded

    def _same_model(self, model_id: str) -> "set[str]":
        """The model and every preset of the same architecture (class and config) on another run: a run of
        your own (engine/data/runs.py) keeps what its architecture's own rows say about it."""
        if model_id not in self._same:
            m = self.presets.models.get(model_id)
            self._same[model_id] = {model_id} | ({o.id for o in self.presets.models.values()
                                                  if o.hf_class == m.hf_class and dict(o.config) == dict(m.config)}
                                                 if m is not None else set())
        return self._same[model_id]

    @staticmethod
    def _residual(f: "Fit", rows: Sequence[BasisRow]) -> float:
        """Measured / fitted pass of these rows of the model (1 if it has none in the fit)."""
        return statistics.median(b.per_sample_s / f.per_sample(b.compute_s, b.memory_s) for b in rows) if rows else 1.0

    # -- fits --

    def fit(self, arch: str, group: str, family: str = "") -> Fit | None:
        """The first basis that has rows: this architecture's measurements; else the measurements of
        other architectures of its family (a transformer is fitted from transformers); else the paper's
        plausible rows of this architecture (its timer did not synchronize: optimistic)."""
        levels = (
            ("measured", lambda b: b.source == "measured" and b.arch == arch, ""),
            ("family", lambda b: b.source == "measured" and family and b.family == family,
             f"no {arch} measurement: measured {family} architectures"),
            ("paper", lambda b: b.source != "measured" and b.arch == arch,
             "no measurement: the paper's plausible rows, optimistic (unsynchronized timer)"),
        )
        for level, pick, why in levels:
            f = self._fit_level((arch, group, level), lambda pick=pick: [b for b in self.basis if pick(b)], group)
            if f is not None:
                return replace(f, note="; ".join(x for x in (why, f.note) if x)) if why else f
        return None

    def _fit_level(self, key: tuple[str, str, str], basis: Callable[[], list[BasisRow]], group: str) -> Fit | None:
        if key not in self._fits:
            rows = [b for b in basis() if not b.host_pass_s]  # their passes hold the host copies
            f = fit_rows(key[0], group, [b for b in rows if b.group == group])
            if f is None and group == "compiled":
                c = fit_rows(key[0], "compiled-mask", [b for b in rows if b.group == "compiled-mask"])
                why = "only rows measured with the dense causal mask (before the fix): slower than today"
                f = replace(c, group=group, note=why) if c else None
            # No "compiled-mask" fit without dense-mask rows: today's compiled fit would predict the fixed
            # engine, not the one that measured the row (validation then says it has no basis).
            if f is None and group == "uncompiled":
                # No uncompiled rows: GEMMs run as in the compiled fit, elementwise kernels as in naive.
                c = fit_rows(key[0], "compiled", [b for b in rows if b.group == "compiled"])
                nv = fit_rows(key[0], "naive", [b for b in rows if b.group == "naive"])
                if c and nv:
                    f = Fit(key[0], group, c.x_c, nv.x_m, c.rows + nv.rows,
                            "no uncompiled rows: compute fraction of the compiled fit, bandwidth of the naive fit")
                elif c or nv:
                    f = replace(c or nv, group=group, note=f"no uncompiled rows: the {(c or nv).group} fit")
            self._fits[key] = f
        return self._fits[key]

    def band(self, arch: str, family: str = "") -> Band | None:
        """The architecture's band; for one nobody measured, the spread of every measured architecture of its
        family held out (each predicted from the others where it has a single cell)."""
        if arch in self.bands or not family:
            return self.bands.get(arch)
        errors = [e for a, b in self.bands.items() if self._family_of_arch.get(a) == family for e in b.errors]
        if not errors:
            return None
        return Band.from_errors(errors, f"no measurement of {arch}: the held-out errors of every measured {family} "
                                        f"architecture ({len(errors)} configurations)")

    # -- one prediction --

    def predict(self, model_id: str, gpu_id: str, num_gpus: int, methods: Methods,
                dense_causal_mask: bool = False, nodes: int = 1, network: Network | None = None,
                max_micro_batch: int | None = None, floor: bool = True) -> Prediction:
        """num_gpus in all, over `nodes` machines of num_gpus // nodes each, joined by `network` (needed when
        nodes > 1: a collective across machines goes at the slower of the GPUs' own links and what a node's
        network ports carry). dense_causal_mask: predict the engine before its causal-attention fix
        (validation of rows it measured); predictions otherwise are for today's engine. max_micro_batch: the
        largest micro-batch that fits, but at most this (as `bench --max-micro-batch` measures it). floor: False
        leaves out what a pass takes at least (engine/predict/floors.py; how its fit sees each measured pass)."""
        presets = self.presets
        model, gpu = presets.model(model_id), presets.gpu(gpu_id)
        p = Prediction(model.id, gpu.id, num_gpus, methods, feasible=False, nodes=nodes,
                       network=network.id if network else None, max_micro_batch=max_micro_batch or None)
        if num_gpus < 1 or model.training.batch_size % num_gpus:
            raise PredictError(f"{num_gpus} GPUs do not divide {model.id}'s batch of {model.training.batch_size}")
        if nodes < 1 or num_gpus % nodes:
            raise PredictError(f"{num_gpus} GPUs do not split evenly over {nodes} machines")
        if nodes > 1 and network is None:
            raise PredictError(f"{nodes} machines need a network between them: name one of the network presets "
                               "(tui-planner presets --kind networks)")
        if nodes == 1 and network is not None:
            raise PredictError(f"a network ({network.id}) joins several machines: give the number of machines "
                               "(--nodes N), or leave the network out for one machine")
        if max_micro_batch is not None and max_micro_batch < 1:
            raise PredictError(f"a micro-batch cap is at least 1, not {max_micro_batch}")
        if not space.is_valid(methods, num_gpus):
            raise PredictError(f"{methods.label} is not in the search space on {num_gpus} GPU(s)")
        if methods.fp8 and not gpu.fp8:
            p.reason = (f"no FP8 tensor cores: the {gpu.name} ({gpu.architecture}, compute capability "
                        f"{gpu.compute_capability}) has none; fp8 needs Ada, Hopper or Blackwell")
            return p
        if model.training.precision == "bf16" and not gpu.bf16:
            p.reason = f"{model.id} trains in bf16, which the {gpu.name} does not support"
            return p
        if methods.fp8 and not memory.mixed_precision(model):
            p.reason = f"fp8 converts the linear layers of 16-bit mixed-precision training; {model.id} trains in fp32"
            return p
        s = shape(model)
        # Fused kernels or FP8 measured beside the same setting without them (engine/predict/extras.py): this setting
        # is timed as without them (`tm`; its memory and micro-batch stay the method's), then x the measured ratio.
        taken = extras.take(self.extras_pairs, methods, model.id, gpu.id, num_gpus, nodes) if methods.extras else None
        tm = replace(methods, fused=False, fp8=False) if taken is not None else methods
        peak = compute_peak_flops(gpu, model, methods)
        if peak is None:
            p.reason = (f"{model.id} trains in fp32; without TF32 ({'naive' if not methods.free_lunch else 'no TF32 on this GPU'}) "
                        "it runs on CUDA cores, whose peak the GPU presets do not hold")
            return p
        group = group_of(model, methods, dense_causal_mask)
        arch = arch_of(model)
        f = self.fit(arch, group, s.family)
        if f is None and group == "compiled-mask":
            p.reason = ("no basis for the engine before its causal-attention fix: no other row (without "
                        "offloading) was measured with the dense mask; measure this one again with today's engine")
            return p
        if f is None:
            p.reason = (f"no basis: nothing measured for {arch} or other {s.family} models, and no plausible "
                        f"paper row for {arch}; measure one with `tui-planner bench`")
            return p
        # Memory: the largest micro-batch that fits.
        cal = calibration.kappa_for(model, self.calibrations)
        mb = memory.max_micro_batch(model, gpu, methods, num_gpus, cal.kappa)
        cap_b = memory.capacity_bytes(gpu)
        p.memory_capacity_gb = cap_b / 1e9
        oom = self.ooms.smallest(model.id, methods, num_gpus, cap_b, run_key(model))
        oom_words = ""
        if oom is not None and mb >= oom.micro_batch:
            mb = max((b for b in memory.micro_batches(model, num_gpus) if b < oom.micro_batch), default=0)
            oom_words = f"{oom.text}, which has no less memory than this GPU"
        else:
            oom = None
        fitted = mb
        if max_micro_batch and mb > max_micro_batch:
            mb = max(b for b in memory.micro_batches(model, num_gpus) if b <= max_micro_batch)
        first = memory.need(model, methods, num_gpus, max(mb, 1), cal.kappa)
        p.memory_need_gb = first.total_bytes / 1e9
        p.terms["memory"] = {"static": dict(first.static), "activations_per_sample": dict(first.activations_per_sample),
                             "kappa": cal.kappa, "calibration": cal.describe()}
        if mb == 0 and oom is not None:
            p.reason = f"does not fit: {oom_words}"
            p.lines = [f"the memory model's {p.memory_need_gb:.1f} GB at micro-batch 1 (of "
                       f"{p.memory_capacity_gb:.1f} usable) is under what the measurement took: it decides"]
            return p
        if mb == 0:
            p.reason = (f"does not fit: needs {p.memory_need_gb:.1f} GB at micro-batch 1 (static "
                        f"{first.static_bytes / 1e9:.1f} GB + activations {first.activation_bytes / 1e9:.1f} GB) "
                        f"of {p.memory_capacity_gb:.1f} GB usable")
            p.lines = _memory_lines(first, p.memory_capacity_gb)
            return p
        accum = formulas.grad_accum_steps(model.training.batch_size, num_gpus, mb)
        # Time.
        compute_s = recompute(model, methods) * compute_flops_per_sample(model) / peak
        traffic = traffic_terms(model, tm)
        bw = gpu.memory_bandwidth_gbs * 1e9
        memory_s = sum(traffic.values()) / bw
        same = self._own_rows(f, self._same_model(model.id), group, methods)
        residual = self._residual(f, same)
        # Another generation than the one measured (Hopper) reaches another share of its peak and bandwidth:
        # its factors, fitted to published measurements (engine/predict/generations.py).
        gen = generation_of(gpu)
        kc = ka = km = 1.0
        factors_from, gen_band, gen_key, card_from = BASE, None, None, None
        if self.generations is not None and gen is not None and gen.id != BASE:
            kc, ka, km, factors_from = self.generations.fit.factors(gen.id, gpu.id, gpu.same_chip_as)
            if factors_from == gen.id:
                card_from = self.generations.fit.card_source(gpu.id, gpu.same_chip_as)
            # a card whose speed is borrowed from its chip's sibling keeps the band of a card with no rows of its
            # own (its generation's): the borrow is an extrapolation, never a reason to narrow it
            gen_band, gen_key = self.generations.band_for(gen.id)
        phi = attention_share(model)
        # fp8: the converted linear layers' products (a share q of the matmul FLOPs) run `speedup` times faster
        q, speedup = (fp8_linear_share(model), fp8_speedup(gpu)) if tm.fp8 else (0.0, 1.0)
        matmuls = (1 - q) + q / speedup
        compute_part = residual * mb * f.x_c * compute_s * (kc * (1 - phi) * matmuls + ka * phi)
        # fp8's weight casts, once a pass whatever the micro-batch (its activation casts are in `traffic`)
        cast_pass = residual * f.x_m * km * fp8_cast_bytes(model, tm)[1] / (gpu.memory_bandwidth_gbs * 1e9)
        memory_part = residual * mb * f.x_m * km * memory_s + cast_pass
        cb_pass, cb_update = comm_bytes(model, methods, num_gpus)
        hb_pass, hb_update = host_bytes(model, methods, num_gpus)
        kind = offload_kind(methods)
        own_link, host = link_bytes_per_s(gpu, num_gpus // nodes), host_bytes_per_s(gpu)
        # across machines: the slower of the GPUs' links and the node's network ports
        link = min(own_link, network.node_bytes_per_s) if nodes > 1 else own_link
        exposed = self.host_exposed.get(host_kind(methods), 1.0) if hb_pass else 0.0
        latency = self.host_latency_s.get(host_kind(methods), 0.0) * host_transfers(model, methods)
        ck = comm_kind(methods)
        hidden, gpu_pass = self.comm_hidden[ck], compute_part + memory_part
        comm_pass, comm_step = waits(cb_pass, cb_update, link, hidden, ck, gpu_pass)  # what pass and step wait for
        # FSDP's offload on several GPUs, a step that accumulates (engine/predict/offload.py)
        sharded_per_param, sharded_note = (self.sharded_offload.per_param_s(num_gpus, gpu.id, nodes)
                                           if hb_pass and host_kind(methods) == "fsdp" and accum > 1 else (0.0, ""))
        sharded_s = sharded_per_param * s.params / num_gpus
        host_pass = exposed * hb_pass / host + latency + sharded_s
        pass_s = compute_part + memory_part + comm_pass + host_pass
        # What a pass takes at least (engine/predict/floors.py): its collectives at the GPUs' own peer links
        # (fitted there; over host memory or a network the overlap above holds alone) and a compiled pass's issue
        compiled = space.uses_compile(methods, model.compile)
        # (the whole buffers: the floor does not shrink with the ring's (N-1)/N share, floors.py says why)
        peer_links = bool(gpu.p2p and nodes == 1) or num_gpus == 1  # where the floor's bytes term was fitted
        comm_own = cb_pass * num_gpus / (num_gpus - 1) / own_link if cb_pass and peer_links else 0.0
        fl = self.floors if floor else None
        floor_kind = ("zero3" if ck == "zero" and methods.stage == 3 else ck) if num_gpus > 1 else "one"
        floor_s = fl.floor_s(floor_kind, comm_own, s.layers, compiled) if fl is not None else 0.0
        # the floor as fitted: one node's peer links, nothing offloaded, on a GPU type where it set a measured pass
        floor_elsewhere = fl is not None and (not peer_links or methods.offloading or not fl.seen_on(floor_kind, gpu.id))
        work_s = pass_s
        pass_s = pass_floors.floored(work_s, floor_s)
        opt_bytes = optimizer_bytes(model, methods, num_gpus)
        gpu_update = self.x_u * opt_bytes / bw
        cpu_update = self.offload_update_s[kind] * s.params / num_gpus if methods.offloading else 0.0
        update_s = gpu_update + cpu_update + comm_step
        step_s = formulas.step_time_s(pass_s, accum, update_s)
        flops_step = model.flops_per_step
        # MFU against the 16-bit peak for every row (an fp8 one's too, as torchtitan reports it); an fp8 row's line
        # and physical limit are its FP8 peak's (engine/data/generations.py)
        mfu = formulas.mfu(flops_step, step_s, num_gpus, gpu.peak_16bit_flops)
        line = mfu_line(gpu)  # the generation's plausibility line (engine/data/generations.py)
        physical = fp8_peak_ratio(gpu, methods.fp8)
        fp8_gain = 1.0
        if tm.fp8:
            # The line holds the bf16 engine the fits describe: an fp8 row may pass it by what fp8 gains over the same
            # step in bf16 (its terms taken out), never by what the time model would claim past the line anyway.
            c0 = residual * mb * f.x_c * compute_s * (kc * (1 - phi) + ka * phi)
            g0 = c0 + residual * mb * f.x_m * km * (memory_s - fp8_cast_bytes(model, tm)[0] / bw)
            w0_pass, w0_step = waits(cb_pass, cb_update, link, hidden, ck, g0)
            step0 = formulas.step_time_s(pass_floors.floored(g0 + w0_pass + host_pass, floor_s), accum,
                                         gpu_update + cpu_update + w0_step)
            fp8_gain = step0 / step_s
            line *= fp8_gain
        capped_step = flops_step / (num_gpus * gpu.peak_16bit_flops * line)  # the fastest the line allows
        capped = mfu > line
        uncapped_mfu = mfu
        p.uncapped_days = formulas.training_days(step_s, model.training.steps)
        if capped:  # never faster than the cap allows
            step_s = capped_step
            mfu = line
        days = formulas.training_days(step_s, model.training.steps)
        p.feasible, p.micro_batch, p.grad_accum = True, mb, accum
        p.pass_s, p.update_s, p.step_s, p.days, p.mfu, p.capped = pass_s, update_s, step_s, days, mfu, capped
        evidence = self.evidence.evidence(arch, gpu.id, num_gpus)
        lift = pass_s / work_s if work_s > 0 else 1.0  # how far the floor raises the pass over its work
        p.kind = (kind_name(evidence, methods.offloading) + (" + over a network" if nodes > 1 else "")
                  + (f" + {FLOOR_BOUND}" if floor_bound(lift) else ""))
        p.memory_need_gb = memory.need(model, methods, num_gpus, mb, cal.kappa).total_bytes / 1e9
        # What rests on an assumption nobody measured widens the band, in quadrature: a mixture of experts' compute
        # factor; the methods beyond the paper's (fused kernels, FP8: their effect on time, engine/predict/terms.py)
        widen = ([(MOE_BAND, "a mixture of experts' compute factor" + ("" if same else ", unmeasured"))]
                 if s.experts and arch not in self.bands else [])
        widen += [(EXTRA_BANDS[e], f"{e}'s unmeasured effect on time ({space.EXTRA_NOTES[e]})") for e in tm.extras]
        band = self.band(arch, s.family)
        for factors, what in widen:
            band = _widened(band, factors, what)
        if gen is not None and gen.id != BASE and self.generations is not None:
            if gen_band is None:
                gen_band = Band.from_errors([], f"{gen.name}: the published-row validation has not been run "
                                                "(python scripts/build_db.py runs it)")
            band = combine(band, gen_band, f"{band.what if band else 'no model band'}; and for {gen.name}: "
                                           f"{gen_band.what}")
        over_network = nodes > 1 and link == network.node_bytes_per_s
        fastest, slowest, parts = days, days, None
        if over_network:
            # The network's share of the line rate is a published figure, not one this engine measured on that
            # network: the step again at the line rate (at best) and at half the stated share (at worst), the
            # communication exposed as at the stated rate (max(0, T - h x G)); the model's band on top, once.
            def step_at(rate: float) -> float:
                waited_pass, waited_step = waits(cb_pass, cb_update, rate, hidden, ck, gpu_pass)
                return step_s - (comm_pass * accum + comm_step) + waited_pass * accum + waited_step

            line_rate = min(own_link, network.node_bytes_per_s / network.efficiency)
            fastest = formulas.training_days(max(step_at(line_rate), capped_step), model.training.steps)
            slowest = formulas.training_days(step_at(network.node_bytes_per_s / 2), model.training.steps)
        if self.intervals is not None:
            band, parts = self._interval(arch, evidence, methods.offloading, gen, capped, uncapped_mfu / line,
                                         borrowed=card_from if card_from not in (None, gpu.id) else None, lift=lift,
                                         floor_elsewhere=floor_elsewhere)
            for factors, what in widen:  # a measurement narrows them
                band = _widened(band, factors, what)
                parts = {**parts, "model": math.hypot(parts["model"], math.log(max(factors[1], 1 / factors[0])))}
            # never below what 100% of the dense peak allows (an fp8 row: its FP8 peak; engine/data/trust.py holds a
            # stored row to that too)
            p.days_low = max(fastest * band.low_factor,
                             formulas.training_days(capped_step * line / physical, model.training.steps))
            p.days_high = slowest * band.high_factor
        elif band:
            p.days_low = max(fastest * band.low_factor, formulas.training_days(capped_step, model.training.steps))
            p.days_high = slowest * band.high_factor
        elif over_network:
            p.days_low, p.days_high = fastest, slowest
        basis_rows = same or f.rows
        kind = ("measured" if all(b.source == "measured" for b in f.rows) else
                "paper (optimistic: unsynchronized timer)" if all(b.source != "measured" for b in f.rows) else
                "measured and paper")
        p.basis = (f"{group} fit of {len(f.rows)} {kind} rows ({', '.join(b.label() for b in f.rows[:6])}"
                   f"{', ...' if len(f.rows) > 6 else ''})"
                   + (f"; residual {residual:.2f} from {', '.join(b.label() for b in same)}" if same else "")
                   + (f"; {self._generation_basis(gen, factors_from, gen_key)}"
                      if gen is not None and gen.id != BASE and self.generations is not None else "")
                   + (f"; {self._borrowed_basis(card_from)}" if card_from not in (None, gpu.id) else "")
                   + "".join(f"; {x}" for x in _extra_basis(model, gpu, tm, mb, q, speedup)))
        p.terms.update({
            "group": group, "x_c": f.x_c, "x_m": f.x_m, "fit_note": f.note, "residual": residual,
            "compute_s_per_sample": compute_s, "traffic_bytes_per_sample": traffic, "peak_flops": peak,
            "bandwidth_bytes_s": bw, "compute_part_s": compute_part, "memory_part_s": memory_part,
            "comm_pass_bytes": cb_pass, "comm_update_bytes": cb_update, "link_bytes_s": link,
            "host_pass_bytes": hb_pass, "host_update_bytes": hb_update, "host_bytes_s": host, "host_exposed": exposed,
            "host_transfers": host_transfers(model, methods), "host_latency_s": latency,
            "host_sharded_s": sharded_s, "host_sharded_note": sharded_note,
            "gpu_update_s": gpu_update, "cpu_update_s": cpu_update, "x_u": self.x_u, "capped": capped,
            "basis_trials": [b.trial_id for b in basis_rows], "band": band.what if band else None,
            "generation": gen.id if gen else None, "generation_factors": {"compute": kc, "attention": ka,
                                                                          "memory": km, "from": factors_from,
                                                                          "card_from": card_from},
            "attention_share": phi, "mfu_line": line, "extrapolated": gen_key == "extrapolated",
            "nodes": nodes, "network": network.id if network else None, "over_network": over_network,
            "kind": p.kind, "uncapped_days": p.uncapped_days,
            "interval_parts": parts,  # log widths of the interval's model, generation and cap parts
            "interval_level": self.intervals.level if self.intervals is not None else None,
            "comm_hidden": hidden, "comm_pass_s": comm_pass, "comm_step_s": comm_step, "own_link_bytes_s": own_link,
            "extras": list(methods.extras), "changes_numerics": methods.changes_numerics,
            "fp8_linear_share": q, "fp8_speedup": speedup, "fp8_weight_cast_s": cast_pass,
            "physical_peak_ratio": physical, "fp8_gain": fp8_gain,
            "pass_work_s": work_s, "pass_floor_s": floor_s, "floor_lift": lift,
            "floor_elsewhere": floor_elsewhere and floor_bound(lift),
            "floor_inputs": (floor_kind, comm_own, s.layers, compiled),  # what floors.Floors.floor_s reads
            "pass_floor_words": fl.words(floor_kind, comm_own, s.layers, compiled) if fl is not None else "",
        })
        ratio_words = _from_measured_ratio(p, taken, flops_step, gpu, model, physical) if taken is not None else None
        p.lines = self._explain(p, model, gpu, f, first, mb, accum, compute_s, memory_s, residual, same, band)
        p.lines += moe_lines(model, mb, num_gpus, measured=arch in self.bands, own=bool(same))
        if oom is not None and mb == fitted:
            p.lines.append(f"micro-batch {mb}, not more: {oom_words}")
        if mb < fitted:
            p.lines.append(f"micro-batch {mb}: at most {max_micro_batch} as asked ({fitted} would fit)")
        p.lines += [ratio_words] if ratio_words else _extra_basis(model, gpu, tm, mb, q, speedup)
        if methods.offloading:
            self._no_faster_than_on_the_gpu(p, model, gpu, methods, dense_causal_mask, nodes, network, floor, flops_step)
        return p

    def _no_faster_than_on_the_gpu(self, p: Prediction, model: Model, gpu: Gpu, methods: Methods,
                                   dense_causal_mask: bool, nodes: int, network: Network | None, floor: bool,
                                   flops_step: float) -> None:
        """Offloading adds copies over PCIe and a CPU update; it never makes the GPU's work faster. Its passes
        are fitted on its own (uncompiled, DeepSpeed's) rows, the same setting kept on the GPU on the compiled
        rows, and on a GPU with another balance of peak and bandwidth the two fits can cross: then the offloaded
        step is held at the kept one's at the same micro-batch (its band moved with it), and says so."""
        kept = replace(methods, offloading=False)
        if not space.is_valid(kept, p.num_gpus):  # one GPU, where sharding needs offloading: no sharding
            kept = replace(kept, sharding="none")
        o = self.predict(model.id, gpu.id, p.num_gpus, kept, dense_causal_mask=dense_causal_mask, nodes=nodes,
                         network=network, max_micro_batch=p.micro_batch, floor=floor)
        if not (o.feasible and o.micro_batch == p.micro_batch and o.step_s and p.step_s and o.step_s > p.step_s):
            return
        r = o.step_s / p.step_s
        p.step_s, p.days = o.step_s, o.days
        # the step is the kept one's; its own update (the CPU's) stays, so the pass is what is left of the step
        p.pass_s = max(0.0, p.step_s - (p.update_s or 0.0)) / max(1, p.grad_accum or 1)
        p.mfu = formulas.mfu(flops_step, p.step_s, p.num_gpus, gpu.peak_16bit_flops)
        if "extras_measured" not in p.terms:  # a measured ratio's figure is no line's (_from_measured_ratio)
            p.capped, p.uncapped_days = o.capped, o.uncapped_days
        if p.days_low is not None and p.days_high is not None:
            p.days_low, p.days_high = p.days_low * r, p.days_high * r
        band = (f", band {_days(p.days_low)}-{_days(p.days_high)}, moved with it"
                if p.days_low is not None and p.days_high is not None else "")
        words = (f"held at {kept.label}'s step at micro-batch {p.micro_batch} ({_days(o.days)} days{band}; this "
                 f"setting's own fit said {_days(o.days / r)}): offloading never speeds the GPU's work")
        p.basis = f"{p.basis}; {words}"
        p.lines.append(words)
        p.terms.update({"held_at": {"setting": kept.label, "ratio": r}, "capped": p.capped,
                        "uncapped_days": p.uncapped_days})

    def _interval(self, arch: str, evidence: str, offloading: bool, gen, capped: bool,
                  excess: float, borrowed: str | None = None, lift: float = 1.0,
                  floor_elsewhere: bool = False) -> tuple[Band, dict[str, float]]:
        """The calibrated interval around the point (engine/predict/intervals.py): the kind's width; a GPU
        generation our measurements are not on adds its own held-out width in quadrature (a card whose speed
        is borrowed from the card on its chip takes it as any card without rows of its own does); a figure
        held at the generation's line adds how far past the line the time model put it (the cap hides that
        much), on both sides, so the point stays the middle. A pass its floor sets (`lift` over its work past
        intervals.FLOOR_LIFT) is at least as wide as the floor-bound held-out cases."""
        w, what = self.intervals.for_prediction(arch, evidence, offloading, lift, floor_elsewhere)
        parts = {"model": w, "generation": 0.0, "cap": 0.0}  # log widths: what a measurement could narrow
        if gen is not None and gen.id != BASE and self.generations is not None:
            if gen.id not in self._gen_w:
                b, key = self.generations.band_for(gen.id)
                apart = {k: v.errors for k, v in self.generations.bands.items() if k.startswith("extrapolated:")}
                self._gen_w[gen.id] = (unmeasured_generation_width(apart) if key == "extrapolated" and apart else
                                       generation_width(b.errors) if b is not None and b.errors else None)
            wg = self._gen_w[gen.id]
            if wg is None:
                wg = math.log(2.0)
                what += f"; {gen.name}: no held-out published rows, a wide 2x guess"
            else:
                what += f"; {gen.name}'s published rows held out: x{math.exp(wg):.2f}, in quadrature"
            if borrowed is not None:
                what += (f" (as for a card with no rows of its own: its speed is the "
                         f"{self.presets.gpu(borrowed).name}'s, same chip)")
            w = math.hypot(w, wg)
            parts["generation"] = wg
        if capped and excess > 1:
            w += math.log(excess)
            parts["cap"] = math.log(excess)
            what += (f"; capped at this generation's line: the time model's own figure is {excess:.2f}x faster, "
                     "so the interval is that much wider on each side")
        return Band(math.exp(-w), math.exp(w), (), what), parts

    def _generation_basis(self, gen, factors_from: str, key: str | None) -> str:
        rows = self.generations.fit.rows.get(factors_from, 0)
        if factors_from == BASE and gen.id != BASE:
            return (f"{gen.name}: no published measurement; predicted as Hopper (extrapolated, with the "
                    "extrapolation band)")
        if factors_from != gen.id:
            return (f"{gen.name}: no published measurement; extrapolated from {GENERATIONS[factors_from].name} "
                    f"({rows} published rows), with the extrapolation band")
        return f"{gen.name}: factors from {rows} published rows (data/external)"

    def _borrowed_basis(self, card: str) -> str:
        rows = self.generations.fit.card_rows.get(card, 0)
        return (f"speed from the {self.presets.gpu(card).name}'s published rows ({rows}): same chip "
                f"(same_chip_as), none of this card's own")

    def _explain(self, p: Prediction, model: Model, gpu: Gpu, f: Fit, first: memory.Need, mb: int, accum: int,
                 compute_s: float, memory_s: float, residual: float, same: Sequence[BasisRow],
                 band: Band | None) -> list[str]:
        t = p.terms
        need_mb = memory.need(model, p.methods, p.num_gpus, mb, first.kappa)
        lines = _memory_lines(need_mb, p.memory_capacity_gb)
        k = f" x {model.recompute_factor:.3g} (ckpt's recompute)" if p.methods.activation_checkpointing else ""
        lines += [
            f"fit: {GROUP_WORDS[f.group]}, {len(f.rows)} rows: {f.compute_fraction:.0%} of peak, "
            f"{f.bandwidth_fraction:.0%} of bandwidth" + (f" ({f.note})" if f.note else ""),
            f"compute: {mb} x {compute_flops_per_sample(model):.3g} FLOP (attention's "
            f"{attention_share(model):.0%} of it){k} / ({t['peak_flops'] / 1e12:.0f} TFLOP/s x "
            f"{f.compute_fraction:.0%}) = {t['compute_part_s'] / residual:.3f} s",
            f"memory-bound: {mb} x {sum(t['traffic_bytes_per_sample'].values()) / 1e9:.2f} GB / "
            f"({gpu.memory_bandwidth_gbs:.0f} GB/s x {f.bandwidth_fraction:.0%}) = {t['memory_part_s'] / residual:.3f} s",
        ]
        if same:
            lines.append(f"x {residual:.2f}: this model's own rows vs the fit ({', '.join(b.label() for b in same)})")
        net = self.presets.networks.get(p.network) if p.network else None
        if net is not None:
            per_node, own = p.num_gpus // p.nodes, t["own_link_bytes_s"]
            lines.append(f"network: {p.nodes} machines x {per_node} GPUs over {net.name}: {net.ports} x "
                         f"{net.gbps:g} Gb/s x {net.efficiency:.0%} = {net.node_bytes_per_s / 1e9:.1f} GB/s a machine "
                         f"each way ({net.efficiency_source})")
            lines.append(f"across machines collectives go at the slower of that and the GPUs' own "
                         f"{link_name(gpu, per_node)} ({own / 1e9:.0f} GB/s): {t['link_bytes_s'] / 1e9:.1f} GB/s"
                         + ("; the network's share of the band: line rate at best, half its stated share at worst"
                            if t.get("over_network") else ""))
        elif t["comm_pass_bytes"] or t["comm_update_bytes"]:
            lines.append(f"interconnect: {link_name(gpu, p.num_gpus)}, {t['link_bytes_s'] / 1e9:.0f} GB/s per "
                         f"direction as predicted ({LINK_EFFICIENCY:.0%} of the link's rate)")
        if t["comm_pass_bytes"] or t["comm_update_bytes"]:
            ck = comm_kind(p.methods)
            over = "the pass's GPU work" if ck != "ddp" else "the last pass's backward"
            for what, per, waited in (("comm_pass_bytes", "per pass", t["comm_pass_s"]),
                                      ("comm_update_bytes", "per step, in the update", t["comm_step_s"])):
                if t[what]:
                    lines.append(f"communication: {t[what] / 1e9:.2f} GB / {t['link_bytes_s'] / 1e9:.1f} GB/s = "
                                 f"{t[what] / t['link_bytes_s']:.3f} s {per}, less {t['comm_hidden']:.0%} of "
                                 f"{over} = {waited:.3f} s waited for")
            lines.append(f"overlap: {ck} communication {self.comm_note[ck]}")
        if t["host_pass_bytes"]:
            per_transfer = (f" + {t['host_transfers']} layer transfers x "
                            f"{t['host_latency_s'] / t['host_transfers'] * 1e3:.1f} ms" if t["host_transfers"] else "")
            lines.append(f"offload copies: {t['host_exposed']:.2f} x {t['host_pass_bytes'] / 1e9:.2f} GB / "
                         f"{t['host_bytes_s'] / 1e9:.1f} GB/s{per_transfer} = "
                         f"{t['host_exposed'] * t['host_pass_bytes'] / t['host_bytes_s'] + t['host_latency_s']:.3f} "
                         f"s per pass ({self.host_note.get(host_kind(p.methods), '')})")
            if t.get("host_sharded_note"):
                lines.append(f"offload on {p.num_gpus} GPUs: + {t['host_sharded_s']:.3f} s per pass "
                             f"({t['host_sharded_note']})")
        if t.get("pass_floor_s") and p.pass_s > 1.005 * t["pass_work_s"]:
            lines.append(f"floor: a pass takes at least {t['pass_floor_words']}; (work {t['pass_work_s']:.3f}^3 + "
                         f"floor {t['pass_floor_s']:.3f}^3)^(1/3) = {p.pass_s:.3f} s ({self.floors.note})")
        lines.append(f"pass {p.pass_s:.3f} s; update {p.update_s:.3f} s ("
                     + (self.cpu_note[offload_kind(p.methods)] if p.methods.offloading else self.x_u_note) + ")")
        lines.append(f"step = {p.pass_s:.3f} x {accum} + {p.update_s:.3f} = {p.step_s:.1f} s; "
                     f"x {model.training.steps:,} steps = {_days(p.days)} days")
        g = t.get("generation_factors") or {}
        if g and t.get("generation") != BASE and self.generations is not None:
            lines.append(f"generation {t.get('generation')}: compute x {g['compute']:.2f}, attention x "
                         f"{g['attention']:.2f}, memory x {g['memory']:.2f} against Hopper"
                         + (f" (from {g['from']}: extrapolated)" if t.get("extrapolated") or g["from"] != t.get("generation")
                            else f" (the {g['card_from']}'s published measurements: same chip)"
                            if g.get("card_from") not in (None, p.gpu) else " (published measurements)"))
        lines.append(f"MFU {p.mfu:.0%} of the {gpu.peak_16bit_tflops:.0f} TFLOP/s dense 16-bit peak"
                     + (f" (fp8: still against the 16-bit peak, as torchtitan reports it; its limit is the "
                        f"{gpu.peak_fp8_tflops:.0f} TFLOP/s FP8 peak)" if p.methods.fp8 else "")
                     + (f", capped at {t['mfu_line']:.0%} (this generation's line; the time model said "
                        f"{_days(p.uncapped_days)} days)" if p.capped and p.uncapped_days else ""))
        if band and p.days_low is not None:
            lines.append(f"band {_days(p.days_low)}-{_days(p.days_high)} days: {band.what}")
        return lines

    # -- a whole cell --

    def predict_cell(self, model_id: str, gpu_id: str, num_gpus: int, method_set: str = "all", nodes: int = 1,
                     network: Network | None = None, extras: Sequence[str] = (),
                     max_micro_batch: int | None = None) -> list[Prediction]:
        """Every combination of the search space on this cell (num_gpus in all, over `nodes` machines joined by
        `network`; with `extras`, the methods beyond the paper's: 'fused', 'fp8'), fastest feasible first."""
        out = [self.predict(model_id, gpu_id, num_gpus, m, nodes=nodes, network=network,
                            max_micro_batch=max_micro_batch)
               for m in space.search_space(method_set, num_gpus, extras)]
        return sorted(out, key=lambda p: (not p.feasible, p.days if p.days is not None else math.inf))


def _days(d: float) -> str:
    """Days in an explanation: one decimal from a day up, three under it, two significant figures under a hundredth
    (a run of an hour is 0.042 days, not 0.0)."""
    return f"{d:.1f}" if d >= 1 else f"{d:.3f}" if d >= 0.01 else f"{d:.2g}"


def _widened(band: Band | None, factors: tuple[float, float], what: str) -> Band:
    """A band widened, in quadrature, by what an unmeasured assumption may be off by (days x factors[0] to x
    factors[1]): a mixture of experts' compute factor (terms.MOE_BAND), a method beyond the paper's
    (terms.EXTRA_BANDS)."""
    return combine(band, Band(factors[0], factors[1], (), what),
                   f"{band.what if band else 'no model band'}; and {what} ({factors[0]:g}x-{factors[1]:g}x)")


def _from_measured_ratio(p: Prediction, taken: "extras.Taken", flops_step: float, gpu: Gpu, model: Model,
                         physical: float) -> str:
    """A prediction with fused kernels or FP8 where they were measured: the setting timed as without them (at the
    micro-batch the method's memory allows) x the measured ratio (engine/predict/extras.py), its band x the ratios'
    spread, never below what 100% of the physical peak allows. Returns the line that says so (also in the basis)."""
    r = taken.ratio
    base_days, base_mfu, base_capped = p.days, p.mfu, p.capped
    p.step_s *= r
    p.pass_s = max(0.0, p.step_s - (p.update_s or 0.0)) / max(1, p.grad_accum or 1)
    p.days = formulas.training_days(p.step_s, model.training.steps)
    p.mfu = formulas.mfu(flops_step, p.step_s, p.num_gpus, gpu.peak_16bit_flops)
    # the ratio's figure is no line's: the mark would read as this row held at the line (said in words instead)
    p.capped, p.uncapped_days = False, None
    floor = formulas.training_days(flops_step / (p.num_gpus * gpu.peak_16bit_flops * physical), model.training.steps)
    p.days_low = min(p.days, max(floor, (p.days_low or base_days) * taken.low))
    p.days_high = max(p.days, (p.days_high or base_days) * taken.high)
    words = taken.words(p.methods.extras) + (f"; timed without it, this setting is capped at its line "
                                             f"({base_mfu:.0%})" if base_capped else "")
    p.basis = f"{p.basis}; {words}"
    p.terms.update({"extras_measured": {"ratio": r, "low": taken.low, "high": taken.high, "how": taken.how,
                                        "pairs": [pair.words() for pair in taken.pairs]},
                    "base_days": base_days, "base_capped": base_capped, "capped": False, "uncapped_days": None})
    return words


def _extra_basis(model: Model, gpu: Gpu, methods: Methods, micro_batch: int, q: float, speedup: float) -> list[str]:
    """What a prediction of the methods beyond the paper's rests on, in words: assumptions, not measurements."""
    out = []
    if methods.fused:
        out.append(f"fused (liger-kernel, same maths): the logits never held (memory: micro-batch {micro_batch}); "
                   f"the loss's traffic x {FUSED_LOGIT_TRAFFIC:g}, compile fusing the rest already: an assumption, "
                   "unmeasured, band widened")
    if methods.fp8:
        out.append(f"fp8 (torchao float8, CHANGES NUMERICS): {q:.0%} of the matmul FLOPs (the LM head and attention "
                   f"stay 16-bit) run {speedup:.2f}x faster = the FP8 / 16-bit peak ({gpu.peak_fp8_tflops:g} / "
                   f"{gpu.peak_16bit_tflops:g}) x {FP8_EFFICIENCY:g}, an assumption set from torchtitan's Llama-3.1-8B "
                   "on 8 x H100 (1.28x), plus the casts' traffic; unmeasured, band widened")
    return out


def _memory_lines(need: memory.Need, capacity_gb: float | None) -> list[str]:
    static = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in need.static.items() if v)
    act = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in need.activations_per_sample.items() if v)
    return [
        f"memory at micro-batch {need.micro_batch}: {need.total_bytes / 1e9:.1f} of {capacity_gb:.1f} GB usable",
        f"static {need.static_bytes / 1e9:.1f} GB: {static}",
        f"activations {need.kappa:.2f} x {need.micro_batch} x {sum(need.activations_per_sample.values()) / 1e9:.2f} "
        f"GB/sample: {act}",
    ]


