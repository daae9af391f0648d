"""Published training measurements from other sources (data/external/), as data: what ran (the model's shape,
sequence, micro-batch, GPUs, sharding, checkpointing, attention kernel), on which GPU, at what throughput.

data/external/sources.toml says which sources are used and why the others are not, and maps each source's
GPU names to preset ids. A row is used only where the time model can describe it: 16-bit mixed precision, one
machine (their sources do not say the network between the machines), not marked SUSPECT by whoever transcribed it. Every
row left out is kept with the reason, so a report can count them. No torch here.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from engine.data.errors import PresetError
from engine.data.paths import external_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

TASKS = ("causal-lm", "mlm", "squad")


@dataclass(frozen=True)
class ExternalRow:
    """One published measurement. Throughput is for the whole machine; per-sample times are per GPU."""

    source: str
    line: int  # in rows.csv, for the report
    model: str
    task: str  # causal-lm (logits over the vocabulary at every position) | mlm | squad (2 logits per position)
    params: float | None
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq_len: int
    gpu_name: str
    gpu: str  # preset id
    num_gpus: int
    micro_batch: int | None
    grad_accum: int | None
    global_batch: int | None
    sharding: str  # none | ddp | zero1 | fsdp_full | fsdp_grad_op
    checkpointing: bool
    fused_attention: bool  # flash / triton / fused kernels: no s x s scores in memory
    tokens_per_s: float
    mfu_published: float | None
    software: str

    @property
    def label(self) -> str:
        return f"{self.source}:{self.line} {self.model} s={self.seq_len} {self.num_gpus}x{self.gpu}"

    @property
    def seconds_per_sample(self) -> float:
        """Per GPU: the time one GPU spends on one sequence."""
        return self.num_gpus * self.seq_len / self.tokens_per_s


@dataclass(frozen=True)
class Source:
    id: str
    use: bool
    task: str | None
    note: str
    why_not: str
    models: tuple[str, ...]  # empty: every model in the file
    exclude: tuple[tuple[int, str], ...] = ()  # (sequence length, why) left out


@dataclass(frozen=True)
class ExternalData:
    sources: dict[str, Source]
    rows: tuple[ExternalRow, ...]
    left_out: tuple[tuple[str, str], ...]  # (row label, why)


def _int(value: str) -> int | None:
    try:
        return int(float(value)) if value not in ("", None) else None
    except ValueError:
        return None


def _float(value: str) -> float | None:
    try:
        return float(value) if value not in ("", None) else None
    except ValueError:
        return None


def load(folder: Path | None = None, gpu_ids: set[str] | None = None) -> ExternalData:
    """Every used source's rows that the time model can describe; the rest with why. `gpu_ids`: the
    preset ids that exist (a row on another GPU is left out, named)."""
    folder = Path(folder or external_dir())
    config_path = folder / "sources.toml"
    try:
        config = tomllib.loads(config_path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PresetError(str(config_path), None, f"a readable TOML file ({e})") from None
    gpu_map = config.get("gpus", {})
    sources: dict[str, Source] = {}
    rows: list[ExternalRow] = []
    left: list[tuple[str, str]] = []
    for sid, s in sorted(config.get("sources", {}).items()):
        task = s.get("task")
        if s.get("use") and task not in TASKS:
            raise PresetError(str(config_path), f"sources.{sid}.task", f"one of {', '.join(TASKS)}", task)
        sources[sid] = Source(sid, bool(s.get("use")), task, s.get("note", ""), s.get("why_not", ""),
                              tuple(s.get("models", ())),
                              tuple((int(x["seq_len"]), str(x["why"])) for x in s.get("exclude", ())))
        if not s.get("use"):
            continue
        path = folder / sid / "rows.csv"
        try:
            with open(path, newline="") as f:
                table = list(csv.DictReader(f))
        except OSError as e:
            raise PresetError(str(path), None, f"a readable CSV file ({e.strerror})") from None
        for i, r in enumerate(table, start=2):
            where = f"{sid}:{i} {r.get('model', '')[:40]} {r.get('num_gpus')}x{r.get('gpu', '')}"
            why = _why_not(r, sources[sid], gpu_map, gpu_ids)
            if why:
                left.append((where, why))
                continue
            kernel = (r.get("attention_kernel") or "").lower()
            rows.append(ExternalRow(
                source=sid, line=i, model=r["model"], task=task, params=_float(r.get("params")),
                layers=_int(r["n_layers"]), hidden=_int(r["d_model"]), heads=_int(r["n_heads"]), ffn=_int(r["ffn_dim"]),
                vocab=_int(r["vocab"]), seq_len=_int(r["seq_len"]), gpu_name=r["gpu"], gpu=gpu_map[r["gpu"]],
                num_gpus=_int(r["num_gpus"]), micro_batch=_int(r.get("micro_batch")),
                grad_accum=_int(r.get("grad_accum")), global_batch=_int(r.get("global_batch")),
                sharding=(r.get("sharding") or "none").strip(), checkpointing=r.get("activation_checkpointing") == "true",
                fused_attention=any(k in kernel for k in ("flash", "triton")),
                tokens_per_s=_float(r["tokens_per_s"]), mfu_published=_float(r.get("mfu_published")),
                software=r.get("software", ""),
            ))
    return ExternalData(sources, tuple(rows), tuple(left))


def _why_not(r: dict, source: Source, gpu_map: dict, gpu_ids: set[str] | None) -> str:
    if source.models and r.get("model") not in source.models:
        return source.why_not or "a model this source's rows are not used for"
    for seq, why in source.exclude:
        if _int(r.get("seq_len")) == seq:
            return why
    precision = (r.get("precision") or "").lower()
    if "fp8" in precision or "fp4" in precision or not ("bf16" in precision or "fp16" in precision):
        return f"precision {r.get('precision')!r}: the time model is for 16-bit training"
    if "SUSPECT" in (r.get("notes") or ""):
        return "marked SUSPECT where it was transcribed (see the source's README)"
    nodes, n = _int(r.get("nodes")), _int(r.get("num_gpus"))
    if n is None or n < 1:
        return "no GPU count"
    if (nodes or 1) > 1 or n > 8:
        return "more than one machine: the source does not say the network between them"
    if r.get("gpu") not in gpu_map:
        return f"GPU {r.get('gpu')!r} is not one the presets hold"
    if gpu_ids is not None and gpu_map[r["gpu"]] not in gpu_ids:
        return f"GPU preset {gpu_map[r['gpu']]!r} is not in these presets"
    if not (_float(r.get("tokens_per_s")) or 0) > 0:
        return "no throughput"
    for key in ("n_layers", "d_model", "n_heads", "ffn_dim", "vocab", "seq_len"):
        if not (_int(r.get(key)) or 0) > 0:
            return f"no {key}"
    if (r.get("sharding") or "none").strip() not in ("none", "ddp", "zero1", "fsdp_full", "fsdp_grad_op"):
        return f"sharding {r.get('sharding')!r} the time model does not describe"
    return ""
