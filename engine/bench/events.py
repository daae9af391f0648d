"""The typed stream of progress events a sweep emits, and the spec a trial process runs.

Small frozen dataclasses, one docstring line each, so the CLI's progress display and the app's
screens can render them without knowing the engine. No torch here.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from engine.data.space import Methods


@dataclass(frozen=True)
class TrialSpec:
    """What the parent asks one trial process to measure (sent as JSON)."""

    key: str
    model: str
    gpu: str
    num_gpus: int
    methods: Methods
    device: str = "cuda"  # or "cpu": tiny configs for CI
    num_nodes: int = 1
    preset_paths: tuple[str, ...] = ()
    compile: bool = True
    compile_mode: str | None = None  # torch.compile's mode (None: its default)
    tf32: bool = True
    max_micro_batch: int | None = None  # per-GPU cap (defaults to the per-GPU replication batch)
    dominated_at_or_below: int | None = None  # stop after the batch search if it cannot beat this
    # Stop timing once this trial's own fastest pass and update show that its step cannot beat this one
    # (the best measured so far in the sweep's cell); None: time it fully (exhaustive search).
    beat_step_s: float | None = None
    repetitions: int = 5  # timed (pass, update) pairs after warm-up; more when the spread is wide
    max_repetitions: int = 20  # the default cap; $TUI_PLANNER_MAX_REPETITIONS replaces it (environment.max_repetitions)
    time_budget_s: float = 30.0  # stop repeating after this much timed work (at least 3 repetitions)
    warmup: int = 2
    verify_steps: int = 0  # optional steady run of real steps to check step = pass x accum + update
    verify_accum: int = 0  # accumulation of the verify run; 0: the configuration's own
    step_up: bool = False  # after the uncompiled search, also measure twice its micro-batch compiled (trial._step_up)
    cpu_memory_limit_mb: int | None = None  # CPU tests: a hard allocation limit, so OOM is real
    fault: str | None = None  # test hook: "crash", "crash-rank1", "hang", "hang-building", "oom-measuring-rank1"(-all),
    # "no-node1" (local-nodes: node 1's agent never comes to the rendezvous)
    # Launched again to measure in a new process (engine.bench.trial.EXIT_RELAUNCH): skip the batch search,
    # whose answer (max_fit) the earlier process found, and measure at measure_at.
    measure_at: int | None = None
    # The model as the sweep resolved it (engine/data/runs.py): what names it (a preset id or a config.json
    # path) and the run's flags; the trial resolves it again to the same id.
    model_source: str | None = None
    run: dict = field(default_factory=dict)
    max_fit: int | None = None
    measure_oom_history: tuple[int, ...] = ()  # the micro-batches that ran out of memory while measuring
    seed: int = 0
    # Environment the trial's processes get beyond trial_env (NCCL_P2P_DISABLE=1 for a host-staged sweep)
    env: dict = field(default_factory=dict)

    def to_json(self) -> str:
        d = asdict(self)
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> "TrialSpec":
        d = json.loads(text)
        d["methods"] = Methods(**d["methods"])
        d["preset_paths"] = tuple(d.get("preset_paths", ()))
        d["measure_oom_history"] = tuple(d.get("measure_oom_history", ()))
        return cls(**d)


@dataclass(frozen=True)
class SearchGuided:
    """The guided search's plan (engine/bench/guide.py): each combination's prediction, in the order they
    will be measured, and the evidence the predictions rest on."""

    predicted: tuple[tuple[str, str], ...]  # (label, "predicted 41.3 days (37-64) at micro-batch 16")
    basis: str = ""


@dataclass(frozen=True)
class SweepStarted:
    """A sweep began: how many trials it holds and how many a resume skips; `unavailable_why`, when set,
    says why some of the rest cannot run here (DeepSpeed cannot be imported: its ZeRO combinations end
    'unavailable', with no row)."""

    total: int
    skipped: int
    run_id: str
    labels: tuple[str, ...] = ()  # the combinations in the order they will run
    keys: tuple[str, ...] = ()
    unavailable_why: str = ""


@dataclass(frozen=True)
class TrialStarted:
    """A trial process was launched."""

    key: str
    label: str
    index: int
    total: int


@dataclass(frozen=True)
class BatchTried:
    """The batch-size search tried a micro-batch: it fit, or it ran out of memory."""

    key: str
    micro_batch: int
    fits: bool


@dataclass(frozen=True)
class Measuring:
    """The trial is timing passes and updates at this micro-batch (compile/warm-up first)."""

    key: str
    micro_batch: int


@dataclass(frozen=True)
class TrialSkipped:
    """A trial was not run: already in the database (resume), or dominated."""

    key: str
    label: str
    reason: str


@dataclass(frozen=True)
class TrialFinished:
    """A trial ended and its row is in the database (feasible, infeasible or failed), except 'stopped'
    (killed by the user) and 'unavailable' (not launched: its stack cannot be imported here)."""

    key: str
    label: str
    status: str  # measured | oom | dominated | memory | failed | timeout | refused | stopped | unavailable
    days: float | None = None
    mfu: float | None = None
    micro_batch: int | None = None
    message: str | None = None
    duration_s: float = 0.0
    # With bench --verify-steps: the steady run's mean step beside the model's pass x accumulation + update.
    verify_step_s: float | None = None
    verify_predicted_s: float | None = None
    step_up: str | None = None  # with bench --step-up: what twice the micro-batch, compiled, came to (a sentence)


@dataclass(frozen=True)
class Log:
    """A line of output from a trial process, for a log pane."""

    key: str
    line: str


@dataclass(frozen=True)
class SweepFinished:
    """The sweep ended: counts by status, or it was stopped."""

    counts: dict[str, int] = field(default_factory=dict)
    stopped: bool = False
    reason: str = ""  # why it stopped early (e.g. the time limit), for the user
    elapsed_s: float = 0.0  # wall time of this sweep (this run of it, when resumed)
    best: str = ""  # the fastest measured setting in the cell so far, e.g. "free-lunch, 52.6 days"


# Lines a trial process prints on stdout for its parent start with this marker, then JSON.
MARKER = "@@tui-planner "


def parse_marker(line: str) -> dict | None:
    """The event a marked line carries, or None for a line of ordinary output (or a garbled one)."""
    if not line.startswith(MARKER):
        return None
    import json

    try:
        return json.loads(line[len(MARKER):])
    except json.JSONDecodeError:
        return {}
