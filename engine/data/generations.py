"""GPU generations: the groups whose chips reach a similar share of their datasheet peak in training.

A generation is read from the GPU preset's compute capability (its chip), never from a name. Each carries
the plausibility line for MFU on it: the share of dense 16-bit peak that published, synchronized training
on that generation reaches at best. A figure above it is flagged; no prediction claims more.

Evidence for the lines (data/external/, docs/validation.md): llm-foundry's MPT runs reach 64% on A100 80GB
(MPT-7B, sequence 2048, 8 GPUs) and 57-62% over most of its A100 table, against 40-46% on H100 for the same
models and code; our own synchronized H200 runs reach 63.6% (Pythia-6.9B on 4 GPUs, FSDP-2, 2026-11-27; Pythia-1B
55-57%). Generations with no published run keep the long-standing 60% (engine/data/formulas.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.data import formulas


@dataclass(frozen=True)
class Generation:
    id: str
    name: str
    capabilities: tuple[str, ...]  # CUDA compute capabilities of its chips
    mfu_line: float  # plausibility line: best MFU published or measured on it, rounded up
    line_evidence: str
    fallback: str | None = None  # with no data of its own, predicted as this generation (and says so)


GENERATIONS: dict[str, Generation] = {g.id: g for g in (
    Generation("volta", "Volta (V100)", ("7.0", "7.2"), formulas.IMPLAUSIBLE_MFU,
               "no published MFU above 60% found", fallback="ampere-dc"),
    Generation("turing", "Turing (T4, RTX 20, Quadro RTX)", ("7.5",), formulas.IMPLAUSIBLE_MFU,
               "no data", fallback="ampere-ada-ws"),
    Generation("ampere-dc", "Ampere data centre (A100, A30)", ("8.0",), 0.65,
               "llm-foundry MPT-7B at 2048 on 8 x A100 80GB: 64.2%"),
    Generation("ampere-ada-ws", "Ampere and Ada workstation and consumer (RTX 3090, A6000, A40, L40S, RTX 4090, "
               "RTX 6000 Ada)", ("8.6", "8.7", "8.9"), formulas.IMPLAUSIBLE_MFU,
               "no published MFU above 60% found", fallback="ampere-dc"),
    Generation("hopper", "Hopper (H100, H200)", ("9.0",), 0.65,
               "our synchronized H200 runs: Pythia-6.9B at 63.6% (FSDP-2 on 4) and 62.7% (FSDP-3 on 2) with every "
               "block compiled; llm-foundry's H100 MPT runs 40-46%"),
    Generation("blackwell-dc", "Blackwell data centre (B200, B300)", ("10.0", "10.3"), formulas.IMPLAUSIBLE_MFU,
               "no 16-bit MFU published", fallback="hopper"),
    Generation("blackwell-ws", "Blackwell workstation and consumer (RTX 5090, RTX PRO 6000)", ("12.0",),
               formulas.IMPLAUSIBLE_MFU, "no data", fallback="ampere-ada-ws"),
)}
BASE = "hopper"  # the generation our own measurements are on: its factors are 1 by definition


def generation_of(gpu) -> Generation | None:
    """The generation of a GPU preset (by its compute capability), or None for one we do not group."""
    cc = str(getattr(gpu, "compute_capability", "") or "")
    return next((g for g in GENERATIONS.values() if cc in g.capabilities), None)


def mfu_line(gpu, fp8: bool = False) -> float:
    """The plausibility line for MFU on this GPU (60% where its generation has no evidence of more). MFU is always
    against the dense 16-bit peak (an fp8 row's too, as torchtitan reports it); an fp8 row's line is the same share
    of the FP8 peak, so that many times higher (fp8_peak_ratio)."""
    g = generation_of(gpu)
    return (g.mfu_line if g else formulas.IMPLAUSIBLE_MFU) * fp8_peak_ratio(gpu, fp8)


def judge(gpu, mfu: float | None, fp8: bool = False) -> str | None:
    """A row's plausibility on this GPU: 'ok', 'implausible' (above its generation's line) or 'impossible' (above
    the peak its products run at), against today's lines (formulas.plausibility)."""
    return formulas.plausibility(mfu, mfu_line(gpu, fp8), impossible_mfu(gpu, fp8))


def fp8_peak_ratio(gpu, fp8: bool) -> float:
    """How many times the 16-bit peak a row's physical limit is: the FP8 peak over the 16-bit one for an fp8 row
    on a GPU with FP8 tensor cores (its linear layers' products run there), else 1."""
    peak8, peak16 = getattr(gpu, "peak_fp8_tflops", None), getattr(gpu, "peak_16bit_tflops", None)
    return peak8 / peak16 if fp8 and peak8 and peak16 else 1.0


def impossible_mfu(gpu, fp8: bool = False) -> float:
    """The MFU (against the 16-bit peak) above which a row is physically impossible: 100% of the peak its matrix
    products can run at, the FP8 one for an fp8 row."""
    return formulas.IMPOSSIBLE_MFU * fp8_peak_ratio(gpu, fp8)
