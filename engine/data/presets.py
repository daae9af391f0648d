"""Presets are data: TOML files validated into frozen dataclasses at load.

What a model, a GPU, a system to put GPUs in, a machine of the paper's, a cloud price or the electricity
price is lives in presets/*.toml, never in Python. Files load in order (shipped presets, then the user's
config directory, then each --presets path); a later file may override single keys of an entry
(`[gpus.h100.price] usd = 25000`) or add whole new entries. Every error names the file that holds the
key, the key and what was expected (engine.data.errors.PresetError).

Every price is dated; one older than STALE_AFTER_DAYS is stale (Price.stale). Which systems can hold a
GPU type at a count (its form factor, cooling, width and power against the system's) is read from the
presets too: Presets.systems_for and Presets.why_no_system.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from engine.data.errors import PresetError
from engine.data.safe import is_id
from engine.data.toml_tables import Origins, Table, copy_value, load_toml, mark, merge, read_bounded
from engine.data.paths import presets_dir, user_presets_dir

ARCHITECTURES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell")
PRECISIONS = ("fp16", "bf16", "fp32")
OBJECTIVES = ("causal-lm", "masked-lm", "seq2seq-lm", "image-classification")
OPTIMIZERS = ("adam", "adamw")
ATTENTION = ("sdpa", "eager", "none")
CHECKPOINTING = ("hf", "stages", "none")
TOP_LEVEL = ("models", "gpus", "machines", "systems", "cloud", "electricity", "networks")
# How NCCL moves a network's traffic: RDMA (InfiniBand, or RoCE with GPUDirect RDMA: its IB transport) or TCP
# sockets (its socket transport, any Ethernet).
TRANSPORTS = ("rdma", "sockets")
# How a GPU is sold: an SXM module on its HGX baseboard, a PCIe card, a PCIe card sold for NVLink-bridged
# use (NVL), a GeForce card.
FORM_FACTORS = ("sxm", "pcie", "nvl", "consumer")
# How a card gets rid of its heat: passive (needs a server's front-to-back airflow), blower (exhausts out of
# the case, so cards can sit side by side), open-air (axial or flow-through fans, heat into the case), water.
COOLING = ("passive", "blower", "open-air", "water")
SYSTEM_KINDS = ("workstation", "pcie-server", "hgx")
STALE_AFTER_DAYS = 365  # a price older than 12 months is marked stale wherever it is shown
SHORT_MAX = 3  # a system's short label, the ranking's column at 80x24


def is_stale(date: dt.date, today: dt.date) -> bool:
    """Older than 12 months on `today`."""
    return (today - date).days > STALE_AFTER_DAYS


@dataclass(frozen=True)
class Price:
    usd: float
    date: dt.date
    source: str

    def stale(self, today: dt.date) -> bool:
        return is_stale(self.date, today)


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str
    architecture: str
    compute_capability: str
    memory_gb: float
    peak_16bit_tflops: float  # dense fp16/bf16 tensor throughput, fp32 accumulate
    bf16: bool
    peak_tf32_tflops: float | None  # None: no TF32 (pre-Ampere)
    memory_bandwidth_gbs: float
    tdp_w: float
    interconnect: str
    interconnect_gbs: float
    spec_source: str
    price: Price | None
    note: str = ""
    # How it is sold and what it needs from a system (systems.toml); None: not said, so no system takes it.
    form_factor: str | None = None
    slots: int | None = None  # width in PCIe slots; None for an SXM module
    cooling: str | None = None
    p2p: bool | None = None  # GPU-to-GPU peer access with NVIDIA's stock driver
    nvlink_bridge_max_gpus: int = 0  # the largest NVLink-bridged group of cards (0: no bridge)
    pcie_gen: int | None = None
    paper_price: Price | None = None  # the paper's own price (Sec. 2, Table 5), for its view (`--source paper`)
    # The GPU preset on the same chip (same compute capability, another board, clock or memory): a card with no
    # published rows of its own takes that card's fitted factor on its compute (engine/predict/generations.py)
    same_chip_as: str | None = None
    # dense FP8 tensor throughput, fp32 accumulate (what torchao's float8 matmuls run at); None: no FP8 tensor
    # cores (before Ada / Hopper, compute capability < 8.9) or none stated
    peak_fp8_tflops: float | None = None

    @property
    def tf32(self) -> bool:
        return self.peak_tf32_tflops is not None

    @property
    def fp8(self) -> bool:
        return self.peak_fp8_tflops is not None

    @property
    def peak_fp8_flops(self) -> float | None:
        return self.peak_fp8_tflops * 1e12 if self.peak_fp8_tflops is not None else None

    @property
    def peak_16bit_flops(self) -> float:
        return self.peak_16bit_tflops * 1e12


@dataclass(frozen=True)
class Training:
    """The paper's replication recipe (Table 3, Appendix C)."""

    batch_size: int
    steps: int
    precision: str
    optimizer: str
    lr: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float
    max_grad_norm: float | None
    schedule: str
    warmup_steps: int


@dataclass(frozen=True)
class Model:
    id: str
    name: str
    hf_class: str  # transformers class built from `config` with random weights
    config_class: str
    objective: str
    config: Mapping[str, Any]  # Hugging Face config values (read-only)
    training: Training
    training_flops: float
    training_flops_source: str
    seq_len: int | None = None  # token models
    vocab_size: int | None = None  # ids drawn for dummy data
    image_size: int | None = None  # image models
    num_classes: int | None = None
    attention: str = "sdpa"  # attention implementation with free-lunch on
    compile: bool = True  # torch.compile allowed
    checkpointing: str = "hf"  # how activation checkpointing is applied
    # FLOPs activation checkpointing adds, as a share of a forward + backward pass
    # (engine.bench.modeling.checkpoint_recompute_share; scripts/recompute_share.py); None: a full forward, 1/3
    checkpoint_recompute: float | None = None
    fsdp_wrap: str = ""  # transformer-block class FSDP wraps
    fused_kernels: tuple[str, ...] = ()  # optional packages for the fast path (e.g. mamba_ssm)
    params_label: str = ""
    paper_training_flops: float | None = None
    source: str = ""
    note: str = ""
    # An encoder-decoder (seq2seq-lm): the target's tokens a sample; seq_len is the input's, and the run's
    # tokens count input tokens.
    target_len: int | None = None

    @property
    def flops_per_step(self) -> float:
        return self.training_flops / self.training.steps

    @property
    def recompute_factor(self) -> float:
        """A checkpointed pass's FLOPs over a plain one's."""
        return 1 + (1 / 3 if self.checkpoint_recompute is None else self.checkpoint_recompute)


@dataclass(frozen=True)
class Machine:
    """The paper's base system (everything but the GPUs) for a GPU count: Tables 6 and 7. Only the paper's
    own view (`rank --source paper`) prices with these; a purchase today goes in a System."""

    num_gpus: int
    kind: str
    cost_usd: float
    source: str
    parts: str = ""
    date: dt.date | None = None


@dataclass(frozen=True)
class System:
    """A system sold to hold GPUs: a workstation, a PCIe server or an HGX server. Its price is the system
    without its GPUs (an HGX server's quoted whole price less its GPUs at their preset price, so a price
    override of the GPU moves the server's price); which GPUs it takes, how many, how wide, how hot."""

    id: str
    name: str
    short: str  # at most SHORT_MAX characters: the ranking's column
    kind: str  # one of SYSTEM_KINDS
    gpu_counts: tuple[int, ...]
    gpu_form_factors: tuple[str, ...]
    gpu_cooling: tuple[str, ...]  # cooling of the cards it takes (as sold)
    gpu_models: tuple[str, ...]  # the GPU ids its baseboard takes (HGX); empty: any card of its form factors
    max_gpu_slots: int | None  # the widest card it takes, in slots; None: no slot cards (a baseboard)
    max_gpu_tdp_w: float
    max_gpu_tdp_w_water: float  # for a water-cooled card (the heat leaves through radiators)
    gpu_power_budget_w: float  # all its GPUs together
    base_power_w: float  # what the rest draws under load (CPUs, RAM, fans, PSU losses)
    pue: float  # the room's cooling overhead on the energy (1: at the plug)
    price: Price
    circuits: str = ""
    cooling_requirement: str = ""
    note: str = ""


@dataclass(frozen=True)
class Electricity:
    """The default electricity price, for the energy in a cost per experiment."""

    usd_per_kwh: float
    date: dt.date
    source: str

    def stale(self, today: dt.date) -> bool:
        return is_stale(self.date, today)


def system_problem(gpu: Gpu, num_gpus: int, system: System) -> str | None:
    """Why `num_gpus` x `gpu` do not go in `system`, or None when they do."""
    if gpu.form_factor is None:
        return f"the {gpu.id} preset does not say its form factor"
    if num_gpus not in system.gpu_counts:
        return f"{system.name} takes {_counts(system.gpu_counts)} GPUs"
    if system.gpu_models:
        if gpu.id not in system.gpu_models:
            return f"{system.name}'s baseboard takes {', '.join(system.gpu_models)}"
    elif gpu.form_factor not in system.gpu_form_factors:
        return f"{system.name} takes {'/'.join(system.gpu_form_factors)} cards, not {gpu.form_factor}"
    if not system.gpu_models:  # a card in a slot (a baseboard cools and holds its own modules)
        if gpu.cooling not in system.gpu_cooling:
            return f"{system.name} needs {' or '.join(system.gpu_cooling)} cards ({gpu.id} is {gpu.cooling})"
        if system.max_gpu_slots is not None and (gpu.slots or 0) > system.max_gpu_slots:
            return f"{system.name} takes cards up to {system.max_gpu_slots} slots wide ({gpu.id}: {gpu.slots})"
    limit = system.max_gpu_tdp_w_water if gpu.cooling == "water" else system.max_gpu_tdp_w
    if gpu.tdp_w > limit:
        return f"{system.name} takes cards up to {limit:g} W ({gpu.id}: {gpu.tdp_w:g} W)"
    if num_gpus * gpu.tdp_w > system.gpu_power_budget_w:
        return (f"{num_gpus} x {gpu.tdp_w:g} W is over the {system.gpu_power_budget_w:g} W for GPUs in the "
                f"{system.name}")
    return None


def _counts(counts: tuple[int, ...]) -> str:
    return " or ".join(", ".join(map(str, counts)).rsplit(", ", 1)) if len(counts) > 1 else str(counts[0])


@dataclass(frozen=True)
class Network:
    """What joins machines (nodes) into one run: a port's line rate, ports a node, the transport NCCL uses
    over it and the share of the line rate its collectives reach (with where that figure comes from)."""

    id: str
    name: str
    gbps: float  # line rate of one port, per direction, Gb/s as sold
    ports: int  # ports a node uses for this network
    transport: str  # TRANSPORTS
    efficiency: float  # NCCL bus bandwidth / line rate
    efficiency_source: str
    source: str
    note: str = ""

    @property
    def node_bytes_per_s(self) -> float:
        """What a node's ports carry each way, as NCCL's collectives reach it (bytes/s)."""
        return self.gbps / 8 * 1e9 * self.ports * self.efficiency


@dataclass(frozen=True)
class CloudPrice:
    gpu: str
    provider: str
    usd_per_gpu_hour: float
    date: dt.date
    source: str


@dataclass(frozen=True)
class Presets:
    models: Mapping[str, Model]
    gpus: Mapping[str, Gpu]
    machines: Mapping[int, Machine]
    cloud: tuple[CloudPrice, ...]
    files: tuple[str, ...] = field(default=())
    systems: Mapping[str, System] = field(default_factory=lambda: MappingProxyType({}))
    electricity: Electricity | None = None
    networks: Mapping[str, Network] = field(default_factory=lambda: MappingProxyType({}))

    def model(self, model_id: str) -> Model:
        try:
            return self.models[model_id]
        except KeyError:
            raise PresetError("presets", f"models.{model_id}", f"one of {', '.join(self.models)}") from None

    def gpu(self, gpu_id: str) -> Gpu:
        try:
            return self.gpus[gpu_id]
        except KeyError:
            raise PresetError("presets", f"gpus.{gpu_id}", f"one of {', '.join(self.gpus)}") from None

    def network(self, network_id: str) -> Network:
        try:
            return self.networks[network_id]
        except KeyError:
            raise PresetError("presets", f"networks.{network_id}",
                              f"one of {', '.join(self.networks) or '(no network presets)'}") from None

    def machine_for(self, num_gpus: int) -> Machine | None:
        """The smallest of the paper's machines that holds num_gpus GPUs (its own view only)."""
        fits = [m for n, m in sorted(self.machines.items()) if n >= num_gpus]
        return fits[0] if fits else None

    def systems_for(self, gpu_id: str, num_gpus: int) -> list[System]:
        """The systems that hold num_gpus x this GPU, cheapest first (at their preset prices)."""
        gpu = self.gpu(gpu_id)
        return sorted((s for s in self.systems.values() if system_problem(gpu, num_gpus, s) is None),
                      key=lambda s: (s.price.usd, s.id))

    def why_no_system(self, gpu_id: str, num_gpus: int) -> str:
        """Why no system preset holds num_gpus x this GPU: what the systems that take its kind of card
        say, or that none does."""
        gpu = self.gpu(gpu_id)
        if gpu.form_factor is None:
            return f"the {gpu.id} preset does not say its form factor, so no system takes it"
        kin = [s for s in self.systems.values()
               if (gpu.id in s.gpu_models if s.gpu_models else gpu.form_factor in s.gpu_form_factors)]
        if not kin:
            if gpu.form_factor == "sxm":
                return f"no system preset has a baseboard for {gpu.id} (an SXM module fits only its own)"
            return f"no system preset takes {gpu.form_factor} cards like {gpu.id}"
        counts = sorted({n for s in kin for n in s.gpu_counts})
        if num_gpus not in counts:
            return f"{gpu.id} goes {_counts(tuple(counts))} to a system ({', '.join(s.name for s in kin)})"
        reasons = [system_problem(gpu, num_gpus, s) for s in kin if num_gpus in s.gpu_counts]
        return "; ".join(dict.fromkeys(r for r in reasons if r))


# --- reading -------------------------------------------------------------------------------------


def preset_files(extra: Iterable[str | Path] = (), include_user: bool = True) -> list[Path]:
    """Shipped files, then the user's config directory, then each extra file or directory, in order."""
    files = sorted(presets_dir().glob("*.toml"))
    if include_user and user_presets_dir().is_dir():
        files += sorted(user_presets_dir().glob("*.toml"))
    for p in extra:
        p = Path(p).expanduser()
        if p.is_dir():
            files += sorted(p.glob("*.toml"))
        elif p.is_file():
            files.append(p)
        else:
            raise PresetError(str(p), None, "an existing TOML file or directory (from --presets)")
    return files


def load_presets(extra: Iterable[str | Path] = (), include_user: bool = True) -> Presets:
    """Load and validate every preset file; raises PresetError on the first problem."""
    files = preset_files(extra, include_user)
    merged: dict[str, Any] = {}
    origins = Origins()
    for path in files:
        data = load_toml(path)
        for key in data:
            if key not in TOP_LEVEL:
                raise PresetError(str(path), key, f"one of the tables {', '.join(TOP_LEVEL)}")
        for key in ("models", "gpus", "machines", "systems", "electricity", "networks"):
            if key in data:
                if not isinstance(data[key], Mapping):
                    raise PresetError(str(path), key, "a table of entries")
                merged.setdefault(key, {})
                merge(merged[key], data[key], (key,), origins, str(path))
        if "cloud" in data:
            if not isinstance(data["cloud"], list):
                raise PresetError(str(path), "cloud", "an array of tables ([[cloud]])")
            start = len(merged.setdefault("cloud", []))
            for i, entry in enumerate(data["cloud"]):
                merged["cloud"].append(copy_value(entry))
                mark(entry, ("cloud", str(start + i)), origins, str(path))

    # `[models.llama-3.2-1b]` is read by TOML as models -> "llama-3" -> "2-1b": a table of tables only.
    for kind in ("models", "gpus", "systems", "networks"):
        for entry_id, entry in merged.get(kind, {}).items():
            if isinstance(entry, dict) and entry and all(isinstance(v, dict) for v in entry.values()):
                inner = next(iter(entry))
                meant = f"{entry_id}.{inner}"
                raise PresetError(origins.file_for((kind, entry_id)), f"{kind}.{entry_id}",
                                  f"a {kind[:-1]} table; an id with a dot is read by TOML as nested tables: "
                                  f'quote it, [{kind}."{meant}"]')
    # Models are read relative to the file that names their config.json.
    for model_id, entry in merged.get("models", {}).items():
        if isinstance(entry, dict) and "hf_config" in entry:
            _inline_hf_config(model_id, entry, origins)

    for kind in ("models", "gpus", "systems", "networks"):
        for entry_id in merged.get(kind, {}):
            if not is_id(entry_id):
                raise PresetError(origins.file_for((kind, entry_id)) or "presets", f"{kind}.{entry_id}"[:120],
                                  "an id of letters, digits and . _ + - (at most 64, starting with a letter or "
                                  f"digit; quote one with a dot: [{kind}.\"llama-3.2-1b\"])")
    gpus = {gid: _gpu(gid, Table(e, ("gpus", gid), origins)) for gid, e in merged.get("gpus", {}).items()}
    _check_same_chip(gpus, origins)
    models = {mid: _model(mid, Table(e, ("models", mid), origins)) for mid, e in merged.get("models", {}).items()}
    machines: dict[int, Machine] = {}
    for key, e in merged.get("machines", {}).items():
        m = _machine(key, Table(e, ("machines", key), origins))
        machines[m.num_gpus] = m
    cloud = tuple(
        _cloud(Table(e, ("cloud", str(i)), origins), gpus) for i, e in enumerate(merged.get("cloud", []))
    )
    systems = {sid: _system(sid, Table(e, ("systems", sid), origins), gpus)
               for sid, e in merged.get("systems", {}).items()}
    electricity = _electricity(Table(merged["electricity"], ("electricity",), origins)) \
        if "electricity" in merged else None
    networks = {nid: _network(nid, Table(e, ("networks", nid), origins)) for nid, e in merged.get("networks", {}).items()}
    return Presets(
        models=MappingProxyType(models),
        gpus=MappingProxyType(gpus),
        machines=MappingProxyType(dict(sorted(machines.items()))),
        cloud=cloud,
        files=tuple(str(f) for f in files),
        systems=MappingProxyType(systems),
        electricity=electricity,
        networks=MappingProxyType(networks),
    )


def read_config(path: Path, where: str, key: str) -> dict:
    """A Hugging Face config.json as a dict: bounded in size and nesting, UTF-8, a JSON object; else a
    PresetError naming `where` (the file that names it) and `key`."""
    try:
        values = json.loads(read_bounded(path).decode("utf-8"))
    except RecursionError:
        raise PresetError(where, key, f"a config.json at {path} nested no deeper than a config needs") from None
    except UnicodeDecodeError as e:
        raise PresetError(where, key, f"a UTF-8 config.json at {path} (byte {e.start} is not)") from None
    except (OSError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise PresetError(where, key, f"a readable config.json at {path} ({why})") from None
    if not isinstance(values, dict):
        raise PresetError(where, key, f"a JSON object in {path}")
    return values


def model_from_entry(model_id: str, entry: Mapping, file: str) -> Model:
    """One model preset from a table built in code (a model from its config.json alone, engine/data/runs.py),
    validated exactly as one read from a presets file, with `file` named in any error."""
    origins = Origins()
    data = copy_value(entry)
    mark(data, ("models", model_id), origins, file)
    if "hf_config" in data:
        _inline_hf_config(model_id, data, origins)
    return _model(model_id, Table(data, ("models", model_id), origins))


def _inline_hf_config(model_id: str, entry: dict, origins: Origins) -> None:
    """`hf_config = "path/to/config.json"`: its values become the model's config; inline keys win."""
    key = ("models", model_id, "hf_config")
    file = origins.file_for(key)
    ref = entry.pop("hf_config")
    if not isinstance(ref, str):
        raise PresetError(file, ".".join(key), "a path to a Hugging Face config.json", ref)
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = Path(file).parent / path
    values = read_config(path, file, ".".join(key))
    inline = entry.get("config", {})
    config = {k: v for k, v in values.items() if v is not None and not k.startswith("_")}
    config.update(inline)
    entry["config"] = config
    mark(config, ("models", model_id, "config"), origins, file)


def _price(t: Table) -> Price:
    p = Price(usd=t.number("usd"), date=t.date("date"), source=t.str("source"))
    t.finish()
    return p


def _gpu(gid: str, t: Table) -> Gpu:
    arch = t.str("architecture", choices=ARCHITECTURES)
    cc = t.str("compute_capability")
    try:
        major = int(cc.split(".")[0])
    except ValueError:
        raise t._err("compute_capability", 'a string like "9.0"', cc) from None
    tf32 = t.number("peak_tf32_tflops", default=None)
    if tf32 is not None and major < 8:
        raise t._err("peak_tf32_tflops", "no TF32 peak on a GPU older than Ampere (compute capability < 8.0)", tf32)
    fp8 = t.number("peak_fp8_tflops", default=None)
    if fp8 is not None and capability(cc) < FP8_MIN_CAPABILITY:
        raise t._err("peak_fp8_tflops", "no FP8 peak on a GPU without FP8 tensor cores (compute capability < 8.9: "
                                        "before Ada and Hopper)", fp8)
    price_t = t.table("price", default=None)
    paper_t = t.table("paper_price", default=None)
    form = t.str("form_factor", default=None, choices=FORM_FACTORS)
    card = form is not None and form != "sxm"
    # A card's width and cooling decide which systems take it: a card must say them.
    for key, what in (("slots", "its width in PCIe slots"), ("cooling", f"its cooling, one of {', '.join(COOLING)}")):
        if card and not t.has(key):
            raise t._err(key, f"{what}: a {form} card must say (the key is missing)")
    slots = t.int("slots", default=None)
    cooling = t.str("cooling", default=None, choices=COOLING)
    bridge = t.raw("nvlink_bridge_max_gpus", "a whole number >= 0", 0)
    if isinstance(bridge, bool) or not isinstance(bridge, int) or bridge < 0:
        raise t._err("nvlink_bridge_max_gpus", "a whole number >= 0", bridge)
    p2p = t.raw("p2p", "true or false", None)
    if p2p is not None and not isinstance(p2p, bool):
        raise t._err("p2p", "true or false", p2p)
    g = Gpu(
        id=gid,
        name=t.str("name"),
        architecture=arch,
        compute_capability=cc,
        memory_gb=t.number("memory_gb"),
        peak_16bit_tflops=t.number("peak_16bit_tflops"),
        bf16=t.bool("bf16"),
        peak_tf32_tflops=tf32,
        memory_bandwidth_gbs=t.number("memory_bandwidth_gbs"),
        tdp_w=t.number("tdp_w"),
        interconnect=t.str("interconnect"),
        interconnect_gbs=t.number("interconnect_gbs"),
        spec_source=t.str("spec_source"),
        price=_price(price_t) if price_t is not None else None,
        note=t.str("note", default=""),
        form_factor=form,
        slots=slots,
        cooling=cooling,
        p2p=p2p,
        nvlink_bridge_max_gpus=bridge,
        pcie_gen=t.int("pcie_gen", default=None),
        paper_price=_price(paper_t) if paper_t is not None else None,
        same_chip_as=t.str("same_chip_as", default=None),
        peak_fp8_tflops=fp8,
    )
    t.finish()
    return g


def _check_same_chip(gpus: Mapping[str, Gpu], origins: Origins) -> None:
    """same_chip_as names another GPU preset on the same chip: known, not itself, the same compute capability.
    Checked once every file is merged, so a user's file may name a card another file adds."""
    for g in gpus.values():
        sib = g.same_chip_as
        if sib is None:
            continue
        path = ("gpus", g.id, "same_chip_as")
        file, key = origins.file_for(path), ".".join(path)
        if sib not in gpus:
            raise PresetError(file, key, f"the id of another GPU preset on the same chip (no gpus.{sib}; known: "
                                         f"{', '.join(gpus)})", sib)
        if sib == g.id:
            raise PresetError(file, key, "another GPU preset's id, not the card's own", sib)
        if gpus[sib].compute_capability != g.compute_capability:
            raise PresetError(file, key, f"a GPU on the same chip: gpus.{sib} is compute capability "
                                         f"{gpus[sib].compute_capability}, gpus.{g.id} {g.compute_capability}", sib)


# FP8 tensor cores: Ada (8.9), Hopper (9.0), Blackwell (10.x, 12.x).
FP8_MIN_CAPABILITY = (8, 9)


def capability(cc: str) -> tuple[int, int]:
    """'8.9' -> (8, 9); a capability without a minor part ('9') reads as (9, 0)."""
    major, _, minor = cc.partition(".")
    try:
        return int(major), int(minor or 0)
    except ValueError:
        return int(major), 0


def _training(t: Table) -> Training:
    betas = t.raw("betas", "two numbers like [0.9, 0.95]")
    if (
        not isinstance(betas, list)
        or len(betas) != 2
        or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1 for b in betas)
    ):
        raise t._err("betas", "two numbers in [0, 1) like [0.9, 0.95]", betas)
    clip = t.raw("max_grad_norm", "a positive number or false (no clipping)", False)
    if clip is False:
        clip = None
    elif isinstance(clip, bool) or not isinstance(clip, (int, float)) or clip <= 0:
        raise t._err("max_grad_norm", "a positive number or false (no clipping)", clip)
    tr = Training(
        batch_size=t.int("batch_size"),
        steps=t.int("steps"),
        precision=t.str("precision", choices=PRECISIONS),
        optimizer=t.str("optimizer", choices=OPTIMIZERS),
        lr=t.number("lr"),
        betas=(float(betas[0]), float(betas[1])),
        eps=t.number("eps", default=1e-8),
        weight_decay=t.number("weight_decay", allow_zero=True),
        max_grad_norm=None if clip is None else float(clip),
        schedule=t.str("schedule"),
        warmup_steps=int(t.number("warmup_steps", allow_zero=True)),
    )
    t.finish()
    return tr


def _model(mid: str, t: Table) -> Model:
    objective = t.str("objective", choices=OBJECTIVES)
    config_t = t.table("config")
    config = dict(config_t.data)
    training = _training(t.table("training"))
    image = objective == "image-classification"
    seq_len = None if image else t.int("seq_len")
    vocab = None if image else t.int("vocab_size")
    image_size = t.int("image_size") if image else None
    classes = t.int("num_classes") if image else None
    if t.has("training_flops"):
        flops = t.number("training_flops")
        flops_source = t.str("training_flops_source")
    else:
        # 6·N·D (Kaplan et al. 2020, forward + backward ≈ 6 FLOPs per parameter per token/sample).
        params = t.number("params", default=None)
        if params is None:
            raise t._err("training_flops", "training_flops (with training_flops_source), or params to derive 6·N·D")
        units = training.batch_size * training.steps * (1 if image else seq_len)
        flops, flops_source = 6 * params * units, "6·N·D from params"
    t.raw("params", "a number", None)
    recompute = t.number("checkpoint_recompute", default=None, allow_zero=True)
    if recompute is not None and recompute > 0.5:  # a whole forward again is 1/3 of a pass
        raise t._err("checkpoint_recompute", "a share of a pass between 0 and 0.5", recompute)
    m = Model(
        id=mid,
        name=t.str("name"),
        hf_class=t.str("hf_class"),
        config_class=t.str("config_class"),
        objective=objective,
        config=MappingProxyType(config),
        training=training,
        training_flops=flops,
        training_flops_source=flops_source,
        seq_len=seq_len,
        vocab_size=vocab,
        image_size=image_size,
        num_classes=classes,
        attention=t.str("attention", default="sdpa", choices=ATTENTION),
        compile=t.bool("compile", default=True),
        checkpointing=t.str("checkpointing", default="hf", choices=CHECKPOINTING),
        checkpoint_recompute=recompute,
        fsdp_wrap=t.str("fsdp_wrap", default=""),
        fused_kernels=tuple(t.raw("fused_kernels", "a list of package names", [])),
        params_label=t.str("params_label", default=""),
        paper_training_flops=t.number("paper_training_flops", default=None),
        source=t.str("source", default=""),
        note=t.str("note", default=""),
        target_len=t.int("target_len") if objective == "seq2seq-lm" else None,
    )
    t.finish()
    return m


def _machine(key: str, t: Table) -> Machine:
    m = Machine(
        num_gpus=t.int("num_gpus"),
        kind=t.str("kind"),
        cost_usd=t.number("cost_usd", allow_zero=True),
        source=t.str("source"),
        parts=t.str("parts", default=""),
        date=t.date("date") if t.has("date") else None,
    )
    t.finish()
    if str(m.num_gpus) != str(key):
        raise t._err("num_gpus", f"the same count as the table's name [machines.{key}]", m.num_gpus)
    return m


def _cloud(t: Table, gpus: Mapping[str, Gpu]) -> CloudPrice:
    c = CloudPrice(
        gpu=t.str("gpu", choices=tuple(gpus)),
        provider=t.str("provider"),
        usd_per_gpu_hour=t.number("usd_per_gpu_hour"),
        date=t.date("date"),
        source=t.str("source"),
    )
    t.finish()
    return c


def _str_list(t: Table, key: str, choices: Iterable[str] | None = None, default: Any = ...) -> tuple[str, ...]:
    choices = tuple(choices) if choices else None
    expected = (f"a list of some of {', '.join(repr(c) for c in choices)}" if choices else "a list of strings")
    value = t.raw(key, expected, default)
    if value is default and default is not ...:
        return tuple(value)
    if (not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value)
            or (choices and not all(v in choices for v in value))):
        raise t._err(key, expected, value)
    return tuple(value)


def _system(sid: str, t: Table, gpus: Mapping[str, Gpu]) -> System:
    if sid in gpus:  # `--price ID=USD` and the Prices field name either: one id, one thing
        raise PresetError(t.origins.file_for(t.path), ".".join(t.path),
                          f"a system id that is not also a GPU id (gpus.{sid} exists: rename [systems.{sid}])")
    short = t.str("short")
    if len(short) > SHORT_MAX:
        raise t._err("short", f"a label of at most {SHORT_MAX} characters (the ranking's column)", short)
    counts = t.raw("gpu_counts", "a list of GPU counts like [1, 2, 4]")
    if (not isinstance(counts, list) or not counts
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 64 for n in counts)):
        raise t._err("gpu_counts", "a list of GPU counts from 1 to 64, like [1, 2, 4]", counts)
    forms = _str_list(t, "gpu_form_factors", FORM_FACTORS)
    models = _str_list(t, "gpu_models", default=[])
    for m in models:
        if m not in gpus:
            raise t._err("gpu_models", f"GPU ids the presets know (no gpus.{m}; known: {', '.join(gpus)})", m)
    if "sxm" in forms and not models:
        raise t._err("gpu_models", "the SXM GPUs its baseboard takes (an SXM module fits only the baseboard "
                                   "made for it)")
    kind = t.str("kind", choices=SYSTEM_KINDS)
    pue = t.number("pue", default=1.0)
    if pue < 1:
        raise t._err("pue", "a number >= 1 (the room's cooling overhead on the energy; 1: at the plug)", pue)
    slots = t.raw("max_gpu_slots", "a positive integer, or leave it out for a baseboard", None)
    if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int) or slots <= 0):
        raise t._err("max_gpu_slots", "a positive integer, or leave it out for a baseboard", slots)
    tdp = t.number("max_gpu_tdp_w")
    price_t = t.table("price")
    s = System(
        id=sid,
        name=t.str("name"),
        short=short,
        kind=kind,
        gpu_counts=tuple(sorted(set(counts))),
        gpu_form_factors=forms,
        gpu_cooling=_str_list(t, "gpu_cooling", COOLING, default=list(COOLING)),
        gpu_models=models,
        max_gpu_slots=slots,
        max_gpu_tdp_w=tdp,
        max_gpu_tdp_w_water=t.number("max_gpu_tdp_w_water", default=tdp),
        gpu_power_budget_w=t.number("gpu_power_budget_w"),
        base_power_w=t.number("base_power_w", allow_zero=True),
        pue=pue,
        price=_price(price_t),
        circuits=t.str("circuits", default=""),
        cooling_requirement=t.str("cooling_requirement", default=""),
        note=t.str("note", default=""),
    )
    t.finish()
    return s


def _electricity(t: Table) -> Electricity:
    e = Electricity(usd_per_kwh=t.number("usd_per_kwh", allow_zero=True), date=t.date("date"),
                    source=t.str("source"))
    t.finish()
    return e


def _network(nid: str, t: Table) -> Network:
    n = Network(id=nid, name=t.str("name"), gbps=t.number("gbps"), ports=t.int("ports", 1),
                transport=t.str("transport", choices=TRANSPORTS), efficiency=t.number("efficiency"),
                efficiency_source=t.str("efficiency_source"), source=t.str("source"), note=t.str("note", ""))
    if not 0.01 <= n.efficiency <= 1:
        raise t._err("efficiency", "a share of the line rate from 0.01 to 1", n.efficiency)
    if not 0.1 <= n.gbps <= 1e5:
        raise t._err("gbps", "a port's line rate from 0.1 to 100,000 Gb/s", n.gbps)
    if n.ports > 64:
        raise t._err("ports", "at most 64 ports a machine", n.ports)
    t.finish()
    return n
