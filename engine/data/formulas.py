"""Every formula the tool uses, in one place, each with where it comes from. Units are in the names.

Nothing here imports torch: the browsing path uses these too. The purchase arithmetic (hardware cost,
cost per experiment, energy) is SQL, in engine/plan/ranking.py, so a re-rank never leaves the database.
"""

from __future__ import annotations

SECONDS_PER_DAY = 86_400.0

# Well-tuned large-scale training reaches roughly 40-55% of dense 16-bit peak on these GPUs; a claim
# above 60% is implausible and above 100% is impossible (ANCHOR.md in the reference notes).
IMPLAUSIBLE_MFU = 0.60
IMPOSSIBLE_MFU = 1.00


def grad_accum_steps(global_batch: int, num_gpus: int, micro_batch: int) -> int:
    """Accumulation so that GPUs x micro-batch x accumulation = the replication batch."""
    per_gpu, rest = divmod(global_batch, num_gpus)
    if rest or per_gpu % micro_batch:
        raise ValueError(f"micro-batch {micro_batch} x {num_gpus} GPUs does not divide batch {global_batch}")
    return per_gpu // micro_batch


def step_time_s(pass_s: float, grad_accum: int, update_s: float) -> float:
    """One optimizer step: `grad_accum` forward+backward passes, then one update (the paper's Sec. 3)."""
    return pass_s * grad_accum + update_s


def training_days(step_s: float, steps: int) -> float:
    return step_s * steps / SECONDS_PER_DAY


def mfu(flops_per_step: float, step_s: float, num_gpus: int, peak_flops_per_gpu: float) -> float:
    """Model FLOPs utilisation: the model's FLOPs per step over what the GPUs could do in that time
    at dense 16-bit peak (Chowdhery et al. 2022, PaLM, App. B)."""
    return flops_per_step / (step_s * num_gpus * peak_flops_per_gpu)


def implied_mfu(training_flops: float, days: float, num_gpus: int, peak_flops_per_gpu: float) -> float:
    """The MFU a claimed training time implies: training FLOPs / (days x 86400 x GPUs x peak)."""
    return training_flops / (days * SECONDS_PER_DAY * num_gpus * peak_flops_per_gpu)


def analytic_days(training_flops: float, num_gpus: int, peak_flops_per_gpu: float, mfu_assumed: float = 1.0) -> float:
    """The paper's analytic estimate: training FLOPs over the GPUs' peak throughput (at 100% MFU)."""
    return training_flops / (num_gpus * peak_flops_per_gpu * mfu_assumed) / SECONDS_PER_DAY


def plausibility(mfu_value: float | None, line: float = IMPLAUSIBLE_MFU,
                 impossible: float = IMPOSSIBLE_MFU) -> str | None:
    """'ok', 'implausible' (above the GPU generation's line: engine/data/generations.py, 60% where there is
    no evidence of more) or 'impossible' (> 100% of the peak the row's matrix products run at: `impossible`, 1 but
    for an fp8 row, whose MFU is against the 16-bit peak and whose limit is the FP8 one, generations.impossible_mfu):
    shown wherever the row is."""
    if mfu_value is None:
        return None
    if mfu_value > impossible:
        return "impossible"
    if mfu_value > line:
        return "implausible"
    return "ok"

