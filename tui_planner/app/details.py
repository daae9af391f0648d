"""A trial's details, read top-down by a person: what it is, its result (days, band, MFU), how that figure
was derived, its settings, what to do next; the raw record last (the dialog folds it).

Plain functions from a trial row (the `trials` table's columns) to rich markup, every value from the
database in it through `fmt.esc`, so the dialog shows them through `content()` and tests read them without
an app. A ranking row with no trial (refused, infeasible, no system sold) is worded by `option_text`.
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
from typing import Any

from engine.data.space import fsdp_gathers_in_float8
from tui_planner import format as fmt
from tui_planner import glossary

E = fmt.esc
NAME_W = 26  # the width of a field's name in the settings and raw lists

RAW_FIELDS = (
    ("model", "model"), ("gpu", "GPU"), ("num_gpus", "GPUs"), ("num_nodes", "nodes"), ("source", "source"),
    ("training_run", "run (batch x seq, prec., opt.)"), ("steps", "steps (its days are for)"),
    ("days", "training days"), ("days_low", "band low (days)"), ("days_high", "band high (days)"),
    ("step_s", "step (s)"), ("pass_s", "pass (s)"), ("pass_spread_s", "pass spread (s)"),
    ("update_s", "update (s)"), ("update_spread_s", "update spread (s)"), ("micro_batch", "micro-batch"),
    ("grad_accum", "accumulation"), ("samples_per_s", "samples/s"), ("tokens_per_s", "tokens/s"),
    ("mfu", "MFU"), ("plausibility", "plausibility"), ("analytic_days", "analytic days (100% MFU)"),
    ("peak_memory_gb", "peak memory (GB)"), ("memory_need_gb", "memory needed (GB, predicted)"),
    ("attention", "attention"), ("kernel", "kernel that ran"), ("compile", "torch.compile"), ("tf32", "TF32"),
    ("activation_checkpointing", "checkpointing"), ("sharding", "sharding"), ("offloading", "offloading"),
    ("fused", "fused kernels (liger)"), ("fp8", "FP8 (torchao; numerics)"), ("numerics", "loss vs bf16 (JSON)"),
    ("warmup_s", "warm-up (s, excluded)"), ("compile_s", "compile (s, excluded)"),
    ("repetitions", "timed repetitions"), ("duration_s", "trial wall (s)"), ("failure_kind", "outcome"),
    ("failure_message", "why"), ("config_source", "settings from"), ("basis", "basis"),
    ("created_at", "recorded"), ("key", "key"), ("trial_id", "trial id"), ("run_id", "run id"),
)

OUTCOME_WORDS = {
    "oom": "ran out of GPU memory",
    "memory": "skipped: the memory model says it does not fit",
    "infeasible": "does not fit: the paper could not train it",
    "dominated": "skipped: a setting with fewer methods already runs at least this micro-batch",
    "refused": "refused: faster than the GPU's peak, so the timing cannot be right",
    "failed": "failed: the trial process stopped with an error",
    "timeout": "hung: killed at its timeout",
    "stopped": "stopped before it finished (the sweep was stopped)",
    "unsupported": "cannot run here: the GPU or software does not support this setting",
}


def _prov(row: dict[str, Any]) -> dict[str, Any] | None:
    text = row.get("provenance")
    if not text:
        return None
    try:
        prov = json.loads(text) if isinstance(text, str) else text
    except (TypeError, ValueError):
        return None
    return prov if isinstance(prov, dict) else None


def _when(value: Any) -> str:
    if value is None:
        return ""
    text = value.isoformat(sep=" ", timespec="minutes") if hasattr(value, "hour") else str(value)
    return text[:16]


def label(row: dict[str, Any]) -> str | None:
    """The search's label for the trial's setting ('ckpt+zero3+offload'), from its key, or None."""
    parts = str(row.get("key") or "").split("|")
    return parts[4] if len(parts) >= 6 and parts[4] else None


def on_cpu(row: dict[str, Any]) -> bool:
    """Whether the trial ran on the CPU (a tiny model trying the engine): its key's device, or where the
    provenance says it ran."""
    prov = _prov(row) or {}
    return str(row.get("key") or "").rsplit("|", 1)[-1] == "cpu" or prov.get("device") == "cpu"


def ok(row: dict[str, Any]) -> bool:
    return bool(row.get("feasible")) and row.get("days") is not None and not row.get("failure_kind")


def bench_command(row: dict[str, Any]) -> str:
    """The command that measures this trial's setting on its GPUs (plain text, values quoted)."""
    q = shlex.quote
    n = row.get("num_gpus") or 1
    cmd = f"tui-planner bench --model {q(str(row['model']))} --gpu {q(str(row['gpu']))} --gpus {n}"
    if (lab := label(row)) is not None and row.get("source") != "paper-table1":
        cmd += f" --only {q(lab)}"
    return cmd + " --db mine.duckdb"


def export_command(row: dict[str, Any]) -> str:
    q = shlex.quote
    return f"tui-planner export --trial {q(str(row['trial_id']))} --out DIR"


def head_lines(row: dict[str, Any], presets: Any = None) -> list[str]:
    """What it is, its result and the run it answers for."""
    src = row.get("source") or ""
    n = row.get("num_gpus") or 1
    nodes = f" x {row['num_nodes']} nodes" if (row.get("num_nodes") or 1) > 1 else ""
    lines = [f"[b]{E(row['model'])} on {n} x {E(row['gpu'])}{nodes}[/b]  "
             f"[dim]{E(fmt.methods(row))}[/]"]
    what = glossary.SOURCE_WORDS.get(src, src or "no source")
    when = _when(row.get("created_at"))
    words = glossary.setting_words(row)
    if on_cpu(row):  # free-lunch's TF32 is a GPU's tensor-core mode
        words = words.replace(", TF32)", ")")
    lines.append(f"{E(what).capitalize()}{f' {E(when)}' if when and src != 'paper-table1' else ''}: "
                 f"{E(words)}")
    flag = row.get("plausibility")
    if ok(row):
        band = fmt.band(row.get("days_low"), row.get("days_high"))
        result = f"[b]{fmt.days(row['days'])} days[/b]"
        if band:
            result += f" [dim](band[/] {band}[dim])[/]"
        mfu = ""
        predicted = (_prov(row) or {}).get("predicted") if src == "predicted" else None
        capped = isinstance(predicted, dict) and predicted.get("capped") is True
        if row.get("mfu") is not None:
            peak = _peak(row, presets)
            mfu = f" · MFU [b]{fmt.mfu(row['mfu'], flag, capped)}[/b]" + (
                f" [dim]of the {peak:,.0f} TFLOP/s dense 16-bit peak[/]" if peak else "")
        lines.append(f"Result {result}{mfu}")
        if capped and row.get("mfu") is not None:
            lines.append(f"[yellow]^ capped at {fmt.mfu(row['mfu'])} (this generation's line): the prediction came "
                         "out faster than any synchronized training on it, so these days are the line's, and the band "
                         "around them is wider by how far past it the time model went[/]")
        if flag in fmt.FLAG_MARK:
            lines.append(f"[red]{E(flag)}: above {'100%' if flag == 'impossible' else 'its generation' + chr(39) + 's plausible line'}"
                         " of the GPU's peak; the time is too good to be true, expect longer[/]")
        if fmt.dense_mask(row):
            lines.append("[yellow]† compiled causal attention got a dense mask here (engine before its 2026-11-23 "
                         "fix): today's engine is faster[/]")
    else:
        kind = row.get("failure_kind") or ("infeasible" if not row.get("feasible") else "no time")
        words = OUTCOME_WORDS.get(str(kind), str(kind))
        lines.append(f"Result [b yellow]no usable time[/]: {E(kind)} [dim]({E(words)})[/]")
        if row.get("failure_message"):
            lines.append(f"Why: {E(row['failure_message'], newlines=True)}")
    run = row.get("training_run")
    steps = row.get("steps")
    lines.append(f"Run {E(run) if run else '[dim]not stored (the model preset' + chr(39) + 's)[/]'}"
                 + (f", {steps:,} steps [dim](its days are for these)[/]" if isinstance(steps, int) else ""))
    return lines


def _peak(row: dict[str, Any], presets: Any) -> float | None:
    gpus = getattr(presets, "gpus", None)
    g = gpus.get(row.get("gpu")) if hasattr(gpus, "get") else None
    return getattr(g, "peak_16bit_tflops", None)


def derivation_lines(row: dict[str, Any]) -> list[str]:
    """How the figure was derived: a prediction's terms, a measurement's timing, the paper's table."""
    src = row.get("source") or ""
    prov = _prov(row) or {}
    out: list[str] = []
    if src == "predicted":
        out.append("[b]How it was derived[/b] [dim](predicted: a roofline fitted to measured rows)[/]")
        steps = [str(s) for s in prov.get("explanation")] if isinstance(prov.get("explanation"), list) else []
        # The sum and the band first (what a person checks), then the terms they come from.
        first = [s for s in steps if s.startswith(("step =", "band "))]
        made = []  # what the stored explanation lacks, from the row's own figures
        if not any(s.startswith("step =") for s in first) and (line := _step_line(row)):
            made.append(line)
        band = fmt.band(row.get("days_low"), row.get("days_high"))
        if not any(s.startswith("band ") for s in first) and band:
            pred = prov.get("predicted") if isinstance(prov.get("predicted"), dict) else {}
            made.append(f"band {band} days" + (f": {pred['band']}" if pred.get("band") else ""))
        out += [f"  [b]{E(s, newlines=True)}[/b]" for s in made + first]
        if len(steps) > len(first):
            out.append("  [dim]from these terms:[/]")
            out += [f"    {E(s, newlines=True)}" for s in steps if s not in first]
        if not steps and row.get("step_s") is not None:
            out.append(f"  step {row['step_s']:.3g} s" + (f"; x {row['steps']:,} steps = {fmt.days(row['days'])} days"
                                                          if isinstance(row.get("steps"), int) and row.get("days")
                                                          else ""))
        if row.get("basis"):
            out.append(f"  [dim]rests on: {E(row['basis'], newlines=True)}[/]")
    elif src == "measured":
        out.append("[b]How it was measured[/b]")
        timing = prov.get("timing")
        if on_cpu(row):  # the engine stores its GPU wording for every trial: a CPU has nothing to synchronize
            timing = "on the CPU: the wall clock around each pass and update (no GPU to synchronize); median of " \
                     "repetitions"
        out.append(f"  {E(timing) if timing else 'GPU synchronized around each pass and update'}"
                   + (f", {row['repetitions']} timed repetitions" if row.get("repetitions") else ""))
        passes = [x for x in prov.get("pass_times_s") or [] if isinstance(x, (int, float))]
        if row.get("pass_s") is not None:
            spread = f" (spread {row['pass_spread_s']:.3f} s)" if row.get("pass_spread_s") else ""
            rng = f", {min(passes):.3f}-{max(passes):.3f} s over {len(passes)}" if len(passes) > 1 else ""
            out.append(f"  pass {row['pass_s']:.3f} s{spread}{rng}; update "
                       + (f"{row['update_s']:.3f} s" if row.get("update_s") is not None else "—"))
        if line := _step_line(row):
            out.append(f"  {line}")
        noisy = [what for what, spread, median in (("pass", row.get("pass_spread_s"), row.get("pass_s")),
                                                   ("update", row.get("update_spread_s"), row.get("update_s")))
                 if spread is not None and median and spread > median]
        if noisy:
            out.append(f"  [yellow]the {' and '.join(noisy)} times spread wider than their median: a noisy timing "
                       "(other work on the machine?), so the figure is rough[/]")
        excluded = [f"{name} {row[k]:.0f} s" for k, name in (("warmup_s", "warm-up"), ("compile_s", "compile"))
                    if row.get(k)]
        if excluded:
            out.append(f"  [dim]not counted: {', '.join(excluded)}[/]")
        if passes and not row.get("pass_s"):
            out.append(f"  passes: median {statistics.median(passes):.3f} s")
    elif src.startswith("paper"):
        out.append("[b]Where it comes from[/b]")
        out.append(f"  {E(prov.get('paper') or 'the paper')}: days from {E(prov.get('days') or src)}, settings "
                   f"from {E(prov.get('settings') or row.get('config_source') or 'not stated')}")
        if prov.get("mfu"):
            out.append(f"  MFU {E(prov['mfu'])}")
        out.append("  [dim]the paper's timer did not synchronize the GPU, so some of its times are too fast[/]")
    return out


def _step_line(row: dict[str, Any]) -> str:
    """'step = 0.334 x 32 + 0.017 = 10.7 s; x 143,000 steps = 17.7 days' from the row's figures, or ''."""
    if row.get("pass_s") is None or not row.get("grad_accum") or row.get("update_s") is None \
            or row.get("step_s") is None:
        return ""
    line = f"step = {row['pass_s']:.3f} x {row['grad_accum']} + {row['update_s']:.3f} = {row['step_s']:.3g} s"
    if isinstance(row.get("steps"), int) and row.get("days") is not None:
        line += f"; x {row['steps']:,} steps = {fmt.days(row['days'])} days"
    return line


KNOWN_PROV = {"host", "device", "driver", "versions", "device_kind", "measured_at", "timing", "pass_times_s",
              "update_times_s", "predicted", "explanation", "paper", "days", "settings", "mfu"}


def provenance_line(row: dict[str, Any]) -> str:
    """Where and when, in one line: the machine and software of a measurement, the paper, or the predictor;
    other provenance keys as they are stored."""
    prov = _prov(row)
    parts: list[str] = []
    if prov:
        if prov.get("device"):
            parts.append(f"on {E(prov['device'])}")
        if prov.get("device_kind") or prov.get("host"):
            parts.append(f"({E(', '.join(str(prov[k]) for k in ('host', 'device_kind') if prov.get(k)))})")
        if prov.get("measured_at"):
            parts.append(f"at {E(prov['measured_at'])}")
        versions = prov.get("versions")
        if isinstance(versions, dict) and versions.get("torch"):
            parts.append(f"torch {E(versions['torch'])}")
        pred = prov.get("predicted")
        if isinstance(pred, dict):
            parts.append("the planner's predictor (`tui-planner predict` explains the same)"
                         + (f", GPU generation {E(pred['generation'])}" if pred.get("generation") else "")
                         + (", extrapolated: a generation nobody measured" if pred.get("extrapolated") else ""))
        for k, v in prov.items():
            if k not in KNOWN_PROV and v is not None and not isinstance(v, (dict, list)):
                shown = f"{v:.3g}" if isinstance(v, float) else ("yes" if v is True else "no" if v is False else v)
                parts.append(f"{E(k)}: {E(shown)}")
    elif row.get("provenance"):
        parts.append(E(row["provenance"], newlines=True))
    return "[b]Provenance[/b] " + (" ".join(parts) if parts else "[dim]none stored[/]")


def settings_lines(row: dict[str, Any]) -> list[str]:
    out = ["[b]Settings[/b]"]
    b = glossary.batch_words(row)
    fields = [("batch", b or None), ("attention", row.get("attention")), ("kernel that ran", row.get("kernel")),
              ("torch.compile", row.get("compile")),
              ("TF32", None if on_cpu(row) else row.get("tf32")),  # a GPU's tensor-core mode: no CPU has it
              ("checkpointing", row.get("activation_checkpointing")), ("sharding", row.get("sharding")),
              ("offloading", row.get("offloading")), ("peak memory (GB)", row.get("peak_memory_gb")),
              ("memory needed (GB)", row.get("memory_need_gb")), ("settings from", row.get("config_source"))]
    prov = _prov(row) or {}
    if row.get("fused"):
        done = prov.get("fused") if isinstance(prov.get("fused"), dict) else {}
        fields.append(("fused kernels", "liger-kernel" + (f": {', '.join(map(str, done.get('covers', [])))}"
                                                          if done.get("covers") else "")
                       + (f"; not {', '.join(map(str, done['not_covered']))}" if done.get("not_covered") else "")))
    if row.get("fp8"):
        recorded = isinstance(prov.get("fp8"), dict)
        done = prov["fp8"] if recorded else {}
        gather = ""
        if str(row.get("sharding") or "").startswith("fsdp"):
            if row.get("source") == "measured" and recorded:  # what the trial recorded
                float8 = fsdp_gathers_in_float8(row.get("sharding"), row.get("offloading"), done)
            elif row.get("source") == "predicted":  # as the engine would run it (16 bits with offload)
                float8 = not row.get("offloading")
            else:
                float8 = None  # nothing recorded: nothing said
            gather = ("" if float8 is None else "; FSDP gathers the weights in float8" if float8 else
                      "; FSDP gathers the weights in 16 bits (each rank casts every whole weight in every pass)")
        fields.append(("FP8", f"torchao float8, {done.get('recipe', 'tensorwise')} scaling"
                              + (f", {done['linears']} of {done['of']} linear layers" if done.get("linears") else "")
                              + gather + " (changes numerics)"))
    if row.get("fused") or row.get("fp8"):
        fields.append(("loss vs bf16", numerics_words(row.get("numerics"))))
    for name, value in fields:
        if value is None:
            continue
        if isinstance(value, float):
            value = f"{value:.3g}"
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        if name == "sharding" and value in glossary.SHARDING_WORDS:
            value = f"{value}: {glossary.SHARDING_WORDS[value]}"
        out.append(f"  {name:<{NAME_W}} {E(value, newlines=True)}")
    return out


def numerics_paired(n: dict[str, Any]) -> str:
    """The paired gaps (engine/bench/numerics.py paired_words) from the row's JSON, whose numbers are checked
    here: each interval two finite numbers around its mean, the step counts whole numbers; the verdicts are
    worked out from the intervals (never the file's word)."""
    from engine.bench.numerics import paired_words

    clean: dict[str, Any] = {"paired_from_step": int(n["paired_from_step"])}
    if n.get("steps_to_resolve"):
        clean["steps_to_resolve"] = int(n["steps_to_resolve"])
    for name in ("gap", "noise", "gap_other_init"):
        if name != "gap_other_init" or f"{name}_paired" in n:
            low, high = (float(x) for x in n[f"{name}_paired_95"])
            mean = float(n[f"{name}_paired"])
            if not all(math.isfinite(x) for x in (low, mean, high)) or not low <= mean <= high:
                raise ValueError(f"{name}: not an interval")
            clean[f"{name}_paired"], clean[f"{name}_paired_95"] = mean, (low, high)
    return paired_words(clean, short=True)


def numerics_words(text: Any) -> str:
    """A row's measured numerics (engine/bench/numerics.py's JSON) in one line, or how to measure them."""
    try:
        n = json.loads(text) if text else None
        if not isinstance(n, dict):
            raise ValueError
        rate = f" at lr {float(n['lr']):g}" if n.get("lr_own") is False else ""
        return (f"{n['loss_method']:.3f} vs {float(n['loss_baseline']):.3f} after {int(n['steps'])} steps{rate} "
                f"({float(n['gap']):+.1%}; largest gap {float(n['largest_gap']):+.1%}"
                + (f"; bf16 from another init {float(n['noise']):+.1%}" if "noise" in n else "")
                + (f"; {n['method']} from that init {float(n['gap_other_init']):+.1%}"
                   if "gap_other_init" in n else "") + ")"
                + (f"; {numerics_paired(n)}" if "gap_paired" in n else "")
                + (" [fp8 emulated on the CPU]" if n.get("fp8_emulated") else ""))
    except (ValueError, KeyError, TypeError, OverflowError):
        return "not measured (tui-planner numerics --model ... --extras ... --db ...)"


def next_lines(row: dict[str, Any], export_error: str | None) -> list[str]:
    """What to do with it: export a measured one, measure a predicted or paper one, or why not."""
    out = ["[b]What next[/b]"]
    if export_error is None and row.get("trial_id"):
        out.append(f"  x writes its training settings; or {E(export_command(row))}, then tui-planner verify DIR")
        return out
    src = row.get("source") or ""
    kind = row.get("failure_kind")
    if kind in ("oom", "memory", "infeasible"):
        out.append("  it does not fit: more GPUs, a memory-saving setting (ckpt, ZeRO, FSDP) or a GPU with more "
                   "memory")
    if src in ("predicted",) or src.startswith("paper") or kind in ("failed", "timeout", "stopped"):
        why = "a measured row" if src != "measured" else "a row that ran"
        out.append(f"  export needs {why}: measure it on {row.get('num_gpus') or 1} x {E(row['gpu'])} "
                   "(the Bench screen, 3, or:)")
        out.append(f"  {E(bench_command(row))}"
                   + (" --retry-failed" if kind in ("failed", "timeout") else ""))
    elif export_error:
        out.append(f"  [dim]{E(export_error, newlines=True)}[/]")
    return out


def detail_text(row: dict[str, Any], presets: Any = None, export_error: str | None = None) -> str:
    """The dialog's body: everything but the training settings and the raw record."""
    lines = head_lines(row, presets)
    lines.append(provenance_line(row))
    derived = derivation_lines(row)
    if derived:
        lines += [""] + derived
    lines += [""] + settings_lines(row)
    lines += [""] + next_lines(row, export_error)
    return "\n".join(lines)


def raw_text(row: dict[str, Any]) -> str:
    """Every stored field, then the provenance as stored (indented JSON)."""
    lines = []
    for key, name in RAW_FIELDS:
        value = row.get(key)
        if value is None:
            continue
        if isinstance(value, float):
            value = f"{value:.4g}"
        lines.append(f"  {name:<{NAME_W}} {E(value, newlines=True)}")
    prov = row.get("provenance")
    if prov:
        try:
            prov = json.dumps(json.loads(prov), indent=2)
        except (TypeError, ValueError):
            pass
        lines += ["", "  provenance, as stored:", E(prov, newlines=True)]
    return "\n".join(lines)


def option_text(row: dict[str, Any]) -> str:
    """A ranking row with no trial behind it (refused, infeasible, implausible only, no system sold): what
    it is and why it is not ranked."""
    status = row.get("status") or "no figure"
    words = {"refused": "its only figures are faster than the GPU's peak, so none can be right",
             "infeasible": "no setting fits: every one runs out of memory or could not be trained",
             "implausible": "its only figure implies an MFU above its GPU generation's plausible line",
             "no-system": "no system sold takes this GPU and count"}.get(status, "")
    lines = [f"[b]{row.get('num_gpus')} x {E(row.get('gpu'))}[/b]  [dim]{E(status)}[/]",
             f"Result [b yellow]not ranked[/]: {E(words or status)}"]
    if row.get("why"):
        lines.append(f"Why: {E(row['why'], newlines=True)}")
    if row.get("paper_days") is not None:
        lines.append(f"The paper's Table 1: {fmt.days(row['paper_days'])} days, implying MFU "
                     f"{fmt.mfu(row.get('paper_mfu'), row.get('paper_plausibility'))}")
    lines += ["", "[b]What next[/b]",
              "  measure it on those GPUs (the Bench screen, 3), or allow another source (f) or GPU (g)"]
    return "\n".join(lines)
