"""The engine end to end on the CPU: real trial processes under torchrun, a real DuckDB file.

Tiny models (tests/fixtures/tiny) keep each trial to seconds; compile is left out for the same reason.
The OOM path is real: the trial caps its own address space, so a too-large batch fails to allocate.
"""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from engine.bench import events as ev
from engine.data import space
from engine.bench.environment import sanitize_cuda_arch_env, trial_env
from engine.bench.launcher import TrialOutcome, _why_no_result
from engine.data.presets import load_presets
from engine.data.store import Store
from engine.bench.sweep import SweepRequest, _dominance_floor, _trial_row, run_sweep

TINY = str(FIXTURES / "tiny")


def _request(tmp_path, **kw):
    base = dict(model="tiny-neox", methods="free-lunch", device="cpu", presets=(TINY,), timeout_s=240,
                compile=False, repetitions=3, warmup=1, db=str(tmp_path / "r.duckdb"))
    base.update(kw)
    return SweepRequest(**base)


def _sweep(req):
    seen = []
    run_sweep(req, on_event=seen.append)
    return seen


# --- the search space -------------------------------------------------------------------------------


def test_the_papers_search_space_sizes():
    one, many = space.combinations(1), space.combinations(2)
    assert len(one) == 12 and len(many) == 22
    assert all(m.free_lunch for m in many)
    assert not any(m.sharding != "none" and not m.offloading for m in one)  # no-op sharding dropped
    assert not any(m.offloading and m.sharding == "none" for m in many)  # offload needs sharding
    assert len({m.label for m in many}) == 22
    assert space.search_space("all", 1)[0] == space.NAIVE and len(space.search_space("all", 1)) == 13
    assert [m.label for m in space.search_space("free-lunch", 4)] == ["naive", "free-lunch"]
    assert all(space.by_label(m.label) == m for n in (1, 2) for m in space.search_space("all", n))  # labels read back
    assert space.by_label("zero9") is None and space.by_label("offload") is None
    assert not space.uses_compile(space.Methods(sharding="zero1", offloading=True), True)  # no compile with ZeRO
    assert not space.uses_compile(space.FREE_LUNCH, model_can_compile=False)  # e.g. Mamba


def test_a_compile_mode_is_its_own_measurement_and_a_bad_one_is_refused(tmp_path):
    from engine.data.errors import PlannerError
    from engine.bench.sweep import plan, trial_key

    presets = load_presets((TINY,))
    tuned = _request(tmp_path, compile=True, compile_mode="max-autotune-no-cudagraphs")
    assert trial_key(tuned, "cpu", space.FREE_LUNCH).endswith("|compile-max-autotune-no-cudagraphs")
    assert trial_key(_request(tmp_path, compile=True), "cpu", space.FREE_LUNCH).endswith("|cpu")
    spec = plan(tuned, presets, "cpu")[1]
    assert ev.TrialSpec.from_json(spec.to_json()).compile_mode == "max-autotune-no-cudagraphs"
    with pytest.raises(PlannerError, match="compile-mode is one of"):
        plan(_request(tmp_path, compile=True, compile_mode="fastest"), presets, "cpu")


def test_steady_steps_run_after_free_lunch_or_after_each_setting_only_names(tmp_path):
    from engine.bench.sweep import plan

    presets = load_presets((TINY,))
    every = {s.methods.label: s.verify_steps for s in plan(_request(tmp_path, verify_steps=2), presets, "cpu")}
    assert every == {"free-lunch": 2, "naive": 0}
    named = plan(_request(tmp_path, verify_steps=2, only=("naive",)), presets, "cpu")
    assert [(s.methods.label, s.verify_steps) for s in named] == [("naive", 2)]


def test_an_offloaded_optimizer_steps_fused_on_the_host():
    """FSDP offload steps on the CPU: fused there, as the export's adamw_torch_fused runs it in the Trainer."""
    import torch

    from engine.bench.steppers import make_optimizer

    model = load_presets((TINY,)).model("tiny-neox")
    w = torch.nn.Parameter(torch.ones(8))
    opt = make_optimizer(model, [w], "cpu", fused=True, offloaded=True)
    assert opt.defaults["fused"]
    w.grad = torch.ones(8)
    opt.step()
    assert float(w.detach().max()) < 1.0  # it stepped
    assert not make_optimizer(model, [w], "cpu", fused=True).defaults.get("fused")  # a CPU run's own: unfused


def test_dominance_needs_a_measured_subset():
    ckpt = space.Methods(activation_checkpointing=True)
    ckpt_zero = space.Methods(activation_checkpointing=True, sharding="zero3", offloading=True)
    zero = space.Methods(sharding="zero3", offloading=True)
    fits = {space.FREE_LUNCH: 16, ckpt: 32, zero: 8}
    assert _dominance_floor(ckpt_zero, fits) == (8, "zero3+offload")  # checkpointing added to the same stack
    assert _dominance_floor(ckpt, fits) == (16, "free-lunch")
    # another stack is not "free-lunch plus overhead": DeepSpeed runs the model in bf16 and beat DDP
    assert _dominance_floor(zero, fits) == (None, "")
    assert _dominance_floor(space.Methods(sharding="zero1"), {space.FREE_LUNCH: 32}) == (None, "")
    assert _dominance_floor(space.FREE_LUNCH, fits) == (None, "")


def test_cuda_arch_list_that_breaks_deepspeed_is_cleaned():
    env = {"TORCH_CUDA_ARCH_LIST": "9.0a"}
    assert sanitize_cuda_arch_env(env) == "9.0a" and env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    env = {"TORCH_CUDA_ARCH_LIST": "8.0;9.0a+PTX 10.0a"}
    sanitize_cuda_arch_env(env)
    assert env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0+PTX;10.0"
    env = {"TORCH_CUDA_ARCH_LIST": "8.0;9.0"}
    assert sanitize_cuda_arch_env(env) is None and env["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"
    out = trial_env({"TORCH_CUDA_ARCH_LIST": "9.0a", "PATH": "/bin"})
    assert out["TORCH_CUDA_ARCH_LIST"] == "9.0" and out["NCCL_NVLS_ENABLE"] == "0"


def test_a_stale_build_lock_is_cleared_and_a_held_one_is_not(tmp_path, monkeypatch):
    import time

    from engine.bench.environment import build_locks_held_by, clear_build_locks

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    old, held = tmp_path / "py311_cpu" / "cpu_adam" / "lock", tmp_path / "py311_cpu" / "shm" / "lock"
    for lock in (old, held):
        lock.parent.mkdir(parents=True)
        lock.touch()
        os.utime(lock, (time.time() - 7200, time.time() - 7200))
    fd = os.open(held, os.O_RDONLY)  # a build in progress holds its lock open
    try:
        assert build_locks_held_by([os.getpid()]) == {held.resolve()}
        assert clear_build_locks(older_than_s=3600) == [old] and held.exists()
        assert clear_build_locks([held]) == [] and held.exists()  # not even when named: it is in use
    finally:
        os.close(fd)
    assert clear_build_locks([held]) == [held] and not held.exists()
    # TORCH_EXTENSIONS_DIR set: torch builds each op straight in it (no py311_cpu folder between).
    direct = tmp_path / "cpu_adam" / "lock"
    direct.parent.mkdir()
    fd = os.open(direct, os.O_CREAT | os.O_RDONLY)
    try:
        assert build_locks_held_by([os.getpid()]) == {direct.resolve()}
    finally:
        os.close(fd)
    os.utime(direct, (time.time() - 7200, time.time() - 7200))
    assert clear_build_locks(older_than_s=3600) == [direct] and not direct.exists()


def test_the_repetitions_cap_is_read_from_the_environment_and_never_cuts_a_requests_own(tmp_path, monkeypatch):
    from engine.bench.environment import MAX_REPETITIONS_ENV, max_repetitions
    from engine.bench.sweep import plan
    from engine.data.errors import PlannerError

    presets = load_presets((TINY,))
    monkeypatch.delenv(MAX_REPETITIONS_ENV, raising=False)
    assert max_repetitions() == 20 and plan(_request(tmp_path), presets, "cpu")[0].max_repetitions == 20
    monkeypatch.setenv(MAX_REPETITIONS_ENV, "4")
    assert [s.max_repetitions for s in plan(_request(tmp_path, repetitions=3), presets, "cpu")] == [4, 4]
    assert plan(_request(tmp_path, repetitions=7), presets, "cpu")[0].max_repetitions == 7
    for bad in ("0", "three"):
        monkeypatch.setenv(MAX_REPETITIONS_ENV, bad)
        with pytest.raises(PlannerError, match=MAX_REPETITIONS_ENV):
            max_repetitions()


def test_a_trial_spec_survives_json():
    spec = ev.TrialSpec(key="k", model="m", gpu="h100", num_gpus=2, methods=space.Methods(True, True, "fsdp3", True),
                        preset_paths=("a.toml",))
    assert ev.TrialSpec.from_json(spec.to_json()) == spec


def test_a_result_faster_than_the_gpu_is_refused():
    presets = load_presets()
    spec = ev.TrialSpec(key="k", model="pythia-1b", gpu="h100", num_gpus=1, methods=space.FREE_LUNCH)
    flops = presets.model("pythia-1b").flops_per_step
    honest_step = flops / (0.4 * 989.4e12)
    for step, feasible in ((honest_step, True), (honest_step / 3, False)):
        out = TrialOutcome("measured", {"step_s": step, "days": step * 143000 / 86400, "micro_batch": 16,
                                        "grad_accum": 64, "pass_s": step / 64, "update_s": 0.0}, None, 1.0, [])
        row = _trial_row(SweepRequest(model="pythia-1b", gpu="h100"), spec, out, presets, "run", None)
        assert row.feasible is feasible
        if feasible:
            assert row.mfu == pytest.approx(0.4) and row.plausibility == "ok"
        else:
            assert row.failure_kind == "refused" and row.days is None and "impossible" in row.failure_message


def test_why_a_trial_died_is_said_plainly():
    torchrun_report = ["Root Cause (first observed failure):", "  exitcode  : -9 (pid: 4306)", "===="]
    assert "host ran out of memory" in _why_no_result(1, torchrun_report)
    assert "SIGABRT" in _why_no_result(-6, [])
    assert "code 3" in _why_no_result(3, ["boom", "====="]) and "boom" in _why_no_result(3, ["boom", "====="])


# --- real sweeps on the CPU ---------------------------------------------------------------------------


def test_a_sweep_measures_writes_rows_stops_at_its_time_limit_and_resumes(tmp_path):
    req = _request(tmp_path, verify_steps=3, stop_after_s=0.5)  # the first trial starts at once and outlasts it
    first = _sweep(req)
    assert [e.label for e in first if isinstance(e, ev.TrialStarted)] == ["naive"]
    assert first[-1].stopped and "1 left" in first[-1].reason and "resume" in first[-1].reason
    with Store.open(req.db) as s:
        assert [r["status"] for r in s.runs()] == ["stopped"] and len(s.trials()) == 1
    rest = _sweep(_request(tmp_path, verify_steps=3))  # resumed: what the limit left
    assert [e.label for e in rest if isinstance(e, ev.TrialStarted)] == ["free-lunch"] and not rest[-1].stopped
    seen = first + rest
    kinds = [type(e).__name__ for e in seen]
    assert kinds[0] == "SweepStarted" and kinds[-1] == "SweepFinished"
    assert kinds.count("TrialStarted") == 2 and kinds.count("TrialFinished") == 2
    assert "BatchTried" in kinds and "Measuring" in kinds
    with Store.open(req.db) as s:
        rows = {r["key"].split("|")[4]: r for r in s.trials()}
        assert sorted(r["status"] for r in s.runs()) == ["done", "stopped"]
    assert set(rows) == {"naive", "free-lunch"}
    for label, r in rows.items():
        assert r["feasible"] and r["source"] == "measured" and r["gpu"] == "cpu"
        assert r["micro_batch"] == 16 and r["grad_accum"] == 1  # the cap: the whole replication batch
        assert r["step_s"] == pytest.approx(r["pass_s"] * r["grad_accum"] + r["update_s"])
        assert r["days"] == pytest.approx(r["step_s"] * 1000 / 86400)
        assert r["mfu"] is None  # a CPU has no dense 16-bit peak in the presets: no MFU rather than a wrong one
        prov = json.loads(r["provenance"])
        # Timed in full, or stopped once its own passes showed it cannot beat the other (the pruned search).
        assert r["repetitions"] >= 3 or (r["repetitions"] == 2 and "slower than" in prov["stopped_early"])
        assert r["pass_spread_s"] >= 0 and r["warmup_s"] > 0
        assert len(prov["pass_times_s"]) == r["repetitions"] and prov["versions"]["torch"]
        assert prov["gradients_held"] is (r["grad_accum"] > 1)  # one micro-batch a step: none to hold
    assert rows["naive"]["kernel"] == "eager (unfused)" and rows["naive"]["free_lunch"] is False
    assert rows["free-lunch"]["kernel"].startswith("sdpa")
    prov = json.loads(rows["free-lunch"]["provenance"])
    assert prov["verify_steps"] == 3 and prov["verify_step_s"] > 0 and prov["verify_predicted_s"] > 0
    assert prov["verify_accum"] == rows["free-lunch"]["grad_accum"]  # the configuration's own accumulation
    assert prov["causal_mask"] == "is_causal flag"  # what SDPA got in the measured passes
    assert "causal_mask" not in json.loads(rows["naive"]["provenance"])  # eager attention: no SDPA mask
    finished = {e.label: e for e in seen if isinstance(e, ev.TrialFinished)}
    assert finished["free-lunch"].verify_step_s == prov["verify_step_s"] and finished["naive"].verify_step_s is None

    end = seen[-1]  # the best of the cell, the first run's trial included
    fastest = min(rows.values(), key=lambda r: r["step_s"])
    assert end.elapsed_s > 0 and end.best.startswith(fastest["key"].split("|")[4] + ", 16 x 1, ")
    again = _sweep(req)  # resume: nothing left to do
    assert again[0].skipped == 2 and not [e for e in again if isinstance(e, ev.TrialStarted)]
    with Store.open(req.db) as s:
        assert len(s.trials()) == 2


def test_an_exhaustive_sweep_measures_what_a_pruned_one_left(tmp_path):
    """Both searches once, in one database: the pruned one records checkpointing as dominated (free-lunch
    already runs the whole batch), the exhaustive one then measures only that."""
    req = _request(tmp_path, methods="all", only=("free-lunch", "ckpt"))
    _sweep(req)
    with Store.open(req.db) as s:
        kinds = {r["key"].split("|")[4]: r["failure_kind"] for r in s.trials()}
    assert kinds == {"free-lunch": None, "ckpt": "dominated"}
    seen = _sweep(_request(tmp_path, methods="all", only=("free-lunch", "ckpt"), exhaustive=True))
    assert [e.label for e in seen if isinstance(e, ev.TrialStarted)] == ["ckpt"]
    with Store.open(req.db) as s:
        ckpt = [r for r in s.trials() if r["key"].split("|")[4] == "ckpt"]
    assert sorted(str(r["failure_kind"]) for r in ckpt) == ["None", "dominated"]
    assert [r for r in ckpt if r["failure_kind"] is None][0]["days"] > 0
    assert not [e for e in _sweep(_request(tmp_path, methods="all", only=("free-lunch", "ckpt"), exhaustive=True))
                if isinstance(e, ev.TrialStarted)]  # and then nothing is left


def test_timing_stops_once_a_trial_cannot_beat_the_best(tmp_path):
    """The pruned search's second saving: a trial whose own fastest pass and update already make a step
    slower than the best measured one stops repeating; one that could still win is timed in full."""
    from dataclasses import replace

    from engine.bench.launcher import run_trial

    spec = ev.TrialSpec(key="k", model="tiny-neox", gpu="cpu", num_gpus=1, methods=space.FREE_LUNCH, device="cpu",
                        preset_paths=(TINY,), compile=False, tf32=False, repetitions=5, max_repetitions=5,
                        warmup=1, beat_step_s=1e-9)
    out = run_trial(spec, tmp_path / "a", 240, lambda e: None)
    assert out.status == "measured" and out.result["repetitions"] == 2
    assert "slower than the best measured" in out.result["stopped_early"]
    full = run_trial(replace(spec, beat_step_s=1e9), tmp_path / "b", 240, lambda e: None)
    assert full.status == "measured" and full.result["repetitions"] >= 5 and "stopped_early" not in full.result


def test_the_allocator_is_pytorchs_unless_the_user_chose():
    assert "PYTORCH_CUDA_ALLOC_CONF" not in trial_env({})
    assert trial_env({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"})["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:512"


def test_out_of_memory_is_a_result_not_a_crash(tmp_path):
    req = _request(tmp_path, model="tiny-wide", methods="naive", cpu_memory_limit_mb=300)
    seen = _sweep(req)
    tries = [(e.micro_batch, e.fits) for e in seen if isinstance(e, ev.BatchTried)]
    assert (1, True) in tries and any(not fits for _, fits in tries)
    with Store.open(req.db) as s:
        r = s.trials()[0]
    largest = max(mb for mb, fits in tries if fits)
    assert r["feasible"] and r["micro_batch"] <= largest < 64 and r["grad_accum"] == 64 // r["micro_batch"]

    req = _request(tmp_path, model="tiny-wide", methods="naive", cpu_memory_limit_mb=5, db=str(tmp_path / "b.duckdb"))
    _sweep(req)
    with Store.open(req.db) as s:
        r = s.trials()[0]
    assert not r["feasible"] and r["failure_kind"] == "oom" and "micro-batch 1" in r["failure_message"]


@pytest.fixture(autouse=True)
def _mark_children(monkeypatch, request):
    """Trial processes inherit this variable: a leftover check counts this test's processes only, not
    those of another test session running on the same machine."""
    monkeypatch.setenv("TUI_PLANNER_TEST_MARK", f"{os.getpid()}-{request.node.name}")


def _processes_with(text: str) -> list[int]:
    mark = f"TUI_PLANNER_TEST_MARK={os.environ.get('TUI_PLANNER_TEST_MARK', '')}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if text in cmd and mark in env:
                found.append(int(pid))
    return found


def test_a_crash_is_recorded_and_the_sweep_goes_on(tmp_path):
    req = _request(tmp_path, faults={"naive": "crash"})
    seen = _sweep(req)
    assert [e.status for e in seen if isinstance(e, ev.TrialFinished)] == ["failed", "measured"]
    with Store.open(req.db) as s:
        rows = {r["key"].split("|")[4]: r for r in s.trials()}
    assert not rows["naive"]["feasible"] and "SIGABRT" in rows["naive"]["failure_message"]
    assert rows["free-lunch"]["feasible"] and rows["free-lunch"]["days"] > 0
    # Resuming retries what crashed once and skips what is final; a second crash gives up on the trial
    # (the same kill would cost its time on every resume) until asked to retry.
    twice = _sweep(_request(tmp_path, faults={"naive": "crash"}))
    assert [(e.label, e.status) for e in twice if isinstance(e, ev.TrialFinished)] == [("naive", "failed")]
    third = _sweep(_request(tmp_path))
    assert third[0].skipped == 2 and not [e for e in third if isinstance(e, ev.TrialFinished)]
    (gave_up,) = [e for e in third if isinstance(e, ev.TrialSkipped) and e.label == "naive"]
    assert "failed twice" in gave_up.reason and "SIGABRT" in gave_up.reason
    again = _sweep(_request(tmp_path, retry_failed=True))
    assert again[0].skipped == 1
    assert [(e.label, e.status) for e in again if isinstance(e, ev.TrialFinished)] == [("naive", "measured")]


def test_a_hang_is_killed_recorded_and_leaves_no_process(tmp_path):
    # The one timeout serves both trials: long enough for the healthy one to start and finish on a loaded
    # 2-core machine (import, build, measure), which the hung one then waits out.
    req = _request(tmp_path, faults={"naive": "hang"}, timeout_s=75)
    seen = _sweep(req)
    assert [e.status for e in seen if isinstance(e, ev.TrialFinished)] == ["timeout", "measured"]
    with Store.open(req.db) as s:
        rows = {r["key"].split("|")[4]: r for r in s.trials()}
    assert rows["naive"]["failure_kind"] == "timeout" and "75 s" in rows["naive"]["failure_message"]
    assert not _processes_with("engine.bench.trial"), "a trial process outlived its sweep"


def test_deepspeed_and_fsdp_offload_run_for_real(offload_sweep, tmp_path):
    seen = pickle.loads((offload_sweep / "events.pickle").read_bytes())
    finished = {e.label: e for e in seen if isinstance(e, ev.TrialFinished)}
    assert {k: finished[k].status for k in ("zero2+offload", "ckpt+fsdp3+offload")} == {
        "zero2+offload": "measured", "ckpt+fsdp3+offload": "measured"}, [e.message for e in finished.values()]
    # On the CPU, DeepSpeed's C++ ops (minutes to compile in a new environment) are neither built nor loaded:
    # torch's AdamW, and torch.distributed's all-reduce (engine.bench.steppers.cpu_deepspeed).
    zero_log = [e.line for e in seen if isinstance(e, ev.Log) and e.key == finished["zero2+offload"].key]
    assert zero_log and not [ln for ln in zero_log if "cpu_adam" in ln or "fused_adam" in ln or "shm_comm" in ln]
    with Store.open(offload_sweep / "r.duckdb", read_only=True) as s:
        rows = {r["key"].split("|")[4]: r for r in s.trials()}
        (run,) = s.query("SELECT command FROM runs")
    assert run["command"].endswith(" --exhaustive --only free-lunch zero2+offload ckpt+fsdp3+offload"), run  # as run
    assert rows["zero2+offload"]["sharding"] == "zero2" and rows["zero2+offload"]["offloading"]
    assert rows["ckpt+fsdp3+offload"]["activation_checkpointing"] and rows["ckpt+fsdp3+offload"]["days"] > 0
    # DeepSpeed's offload engine keeps pinned host memory after destroy(): it is measured in a new process,
    # at the micro-batch the first one's search found; FSDP measures in the process that searched.
    zero, fsdp = (json.loads(rows[k]["provenance"]) for k in ("zero2+offload", "ckpt+fsdp3+offload"))
    assert zero.get("measured_in_new_process") and not fsdp.get("measured_in_new_process")
    # FSDP offload runs with glibc keeping freed blocks on its heap, and says so; DeepSpeed's offload does not
    from engine.data.space import HOST_MALLOC_ENV

    assert fsdp["host_malloc"] == HOST_MALLOC_ENV and "host_malloc" not in zero
    assert fsdp["cpu_threads"] >= 1 and zero["cpu_threads"] >= 1
    assert rows["zero2+offload"]["micro_batch"] == zero["max_micro_batch_searched"] == 16  # the whole batch
    assert any(isinstance(e, ev.Log) and e.key == finished["zero2+offload"].key and "in a new process" in e.line
               for e in seen)
    with pytest.raises(Exception, match="no combination called"):
        _sweep(_request(tmp_path, only=("zero9",)))


def test_a_deepspeed_that_cannot_import_skips_zero_once_and_writes_no_rows(tmp_path, monkeypatch):
    # As on a machine where DeepSpeed is installed without its pydantic: each ZeRO trial would fail alone.
    from engine.bench import environment

    broken = tmp_path / "site" / "deepspeed"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'pydantic'\")\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(environment, "_DEEPSPEED_IMPORTS", set())
    assert environment.deepspeed_import_error() == "ModuleNotFoundError: No module named 'pydantic'"
    req = _request(tmp_path, methods="all", exhaustive=True, only=("free-lunch", "zero1+offload"))
    seen = _sweep(req)
    started = next(e for e in seen if isinstance(e, ev.SweepStarted))
    assert started.skipped == 0 and "pydantic" in started.unavailable_why
    ended = {e.label: e for e in seen if isinstance(e, ev.TrialFinished)}
    assert {k: e.status for k, e in ended.items()} == {"free-lunch": "measured", "zero1+offload": "unavailable"}
    assert "pydantic" in ended["zero1+offload"].message
    with Store.open(req.db, read_only=True) as s:
        assert [r["key"].split("|")[4] for r in s.trials()] == ["free-lunch"]
    # The command line shows an error with brackets as text (rich would read "[/opt/x]" as markup).
    (broken / "__init__.py").write_text("raise OSError('libmissing.so: cannot open [/opt/x]')\n")
    out = subprocess.run([sys.executable, "-m", "tui_planner", "bench", "--model", "tiny-neox", "--device", "cpu",
                          "--methods", "all", "--only", "zero1+offload", "--presets", TINY, "--db",
                          str(tmp_path / "cli.duckdb"), "--no-compile"], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "unavailable" in out.stdout and "[/opt/x]" in out.stdout.replace("\n", "")
    monkeypatch.delenv("PYTHONPATH")
    assert environment.deepspeed_import_error() is None  # the real one imports: remembered from now on
    assert sys.executable in environment._DEEPSPEED_IMPORTS


def test_fsdp_offload_gets_a_cpu_backend_beside_nccl():
    # Clipping FSDP-offloaded gradients all-reduces a CPU tensor; NCCL alone fails every such trial on
    # 2 GPUs with 'No backend type associated with device type cpu' (seen on 2 x H200).
    from engine.bench.trial import process_group_backend

    assert process_group_backend("cuda", space.Methods(sharding="fsdp2", offloading=True)) == "cpu:gloo,cuda:nccl"
    assert process_group_backend("cuda", space.Methods(True, True, "fsdp3", True)) == "cpu:gloo,cuda:nccl"
    for m in (space.Methods(sharding="fsdp3"), space.Methods(sharding="zero3", offloading=True), space.Methods()):
        assert process_group_backend("cuda", m) == "nccl"
    assert process_group_backend("cpu", space.Methods(sharding="fsdp2", offloading=True)) == "gloo"


def test_the_bench_command_runs_headless(tmp_path, monkeypatch, capsys):
    from tui_planner.cli import main

    db = tmp_path / "cli.duckdb"
    out = subprocess.run([sys.executable, "-m", "tui_planner", "bench", "--model", "tiny-neox", "--device", "cpu",
                          "--methods", "naive", "--presets", TINY, "--db", str(db), "--no-compile",
                          "--repetitions", "3", "--gpus", "1,2"], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "measured" in out.stdout and "naive" in out.stdout
    assert "on 1 GPU" in out.stdout and "on 2 GPUs" in out.stdout  # one sweep per count
    with Store.open(db, read_only=True) as s:
        assert sorted(r["num_gpus"] for r in s.trials()) == [1, 2]
    # The flags it refuses, through the same main in this process (the run above is the real command).
    monkeypatch.setenv("SLURM_JOB_ID", "")
    capsys.readouterr()
    for bad, why in ((["--nodes", "2"], "--launcher srun"), (["--nodes", "2", "--launcher", "srun"], "SLURM"),
                     (["--gpus", "0"], "at least 1"), (["--gpus", "two"], "whole numbers")):
        code = main(["bench", "--model", "tiny-neox", "--device", "cpu", "--presets", TINY, "--db", str(db), *bad])
        err = capsys.readouterr().err
        assert code == 2 and why in err, (bad, err)
    code = main(["bench", "--model", "tiny-neox", "--device", "cpu", "--presets", TINY])
    assert code == 2 and "--db" in capsys.readouterr().err  # never writes the shipped database


@pytest.mark.parametrize("model, kernel", [
    ("tiny-roberta", "sdpa"), ("tiny-mamba", "torch fallback"), ("tiny-convnext", "none"), ("tiny-vit", "sdpa"),
])
def test_every_model_family_runs_checkpointed_with_its_kernel(tmp_path, model, kernel):
    """One trial a family: checkpointing wraps the family's own forward (every other test's tiny-neox runs
    without it), with the free-lunch settings under it, so the row says which kernel the family got."""
    req = _request(tmp_path, model=model, methods="all", exhaustive=True, only=("ckpt",))
    seen = _sweep(req)
    assert [e.status for e in seen if isinstance(e, ev.TrialFinished)] == ["measured"], [
        e.message for e in seen if isinstance(e, ev.TrialFinished)]
    with Store.open(req.db) as s:
        (row,) = s.trials()
    assert row["kernel"].startswith(kernel) and row["free_lunch"]  # a missing kernel is a recorded fact, not a crash
    assert row["activation_checkpointing"] and row["days"] > 0
    if model == "tiny-convnext":  # transformers' ConvNeXt has no checkpointing: the engine wraps each stage
        assert json.loads(row["provenance"])["checkpointing"] == "stages"


def test_naive_turns_the_presets_fused_kernels_off(tmp_path):
    """A kernel package that is installed looks absent to a naive trial: find_spec says None and import
    fails, so transformers takes its torch path (the paper's naive). Checked on a stand-in package."""
    import subprocess
    import sys

    (tmp_path / "fake_kernel").mkdir()
    (tmp_path / "fake_kernel" / "__init__.py").write_text("")
    code = ("import importlib.util, sys; from engine.bench.trial import hide_packages; "
            "assert importlib.util.find_spec('fake_kernel') is not None; "
            "print(hide_packages(['fake_kernel', 'not_installed_anywhere'])); "
            "assert importlib.util.find_spec('fake_kernel') is None\n"
            "try:\n    import fake_kernel\nexcept ImportError:\n    print('import fails')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT),
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["['fake_kernel']", "import fails"]
    # A real naive trial of the tiny Mamba says its kernels were off, and still measures.
    req = _request(tmp_path, model="tiny-mamba", methods="naive", only=("naive",))
    _sweep(req)
    with Store.open(req.db) as s:
        (row,) = s.trials()
    assert row["feasible"] and "turned off (naive)" in row["kernel"]


def test_two_processes_share_data_parallel_work_and_count_the_all_reduce_once(two_ranks):
    """Two CPU ranks over gloo: DDP times its passes inside no_sync and adds the step's one gradient
    all-reduce to the update; FSDP (which reduces on every pass) and ZeRO-1 run sharded."""
    rows = two_ranks
    assert set(rows) == {"none", "fsdp3", "zero1"}
    assert all(r["feasible"] and r["days"] and r["num_gpus"] == 2 for r in rows.values()), rows
    ddp = rows["none"]
    prov = json.loads(ddp["provenance"])
    assert prov["allreduce_s"] >= 0 and len(prov["synced_pass_times_s"]) == ddp["repetitions"]
    assert ddp["update_s"] == pytest.approx(prov["optimizer_update_s"] + prov["allreduce_s"])
    per_rank = 16 // 2  # tiny-neox's batch over two ranks
    assert ddp["micro_batch"] * ddp["grad_accum"] == per_rank
    assert ddp["step_s"] == pytest.approx(ddp["pass_s"] * ddp["grad_accum"] + ddp["update_s"])
    assert "allreduce_s" not in json.loads(rows["fsdp3"]["provenance"])
    zero1 = json.loads(rows["zero1"]["provenance"])  # ZeRO-1 reduces at the boundary only, as DDP
    assert zero1["allreduce_s"] >= 0 and len(zero1["synced_pass_times_s"]) == rows["zero1"]["repetitions"]


def test_zero1_accumulates_without_reducing_until_the_boundary(two_ranks):
    """DeepSpeed is told the real accumulation (4 here) and the passes inside it skip the reduction."""
    row = two_ranks["zero1"]
    prov = json.loads(row["provenance"])
    assert row["feasible"] and row["micro_batch"] == 2 and row["grad_accum"] == 4, row["failure_message"]
    assert row["update_s"] == pytest.approx(prov["optimizer_update_s"] + prov["allreduce_s"])
    assert row["step_s"] == pytest.approx(row["pass_s"] * 4 + row["update_s"])


def test_one_rank_out_of_memory_while_measuring_relaunches_the_trial_at_half(tmp_path):
    """Rank 1 alone runs out of memory while rank 0 goes on into its timed passes: a retry inside the
    process would wait on rank 0's collective (on NCCL, forever) or pair its collectives with rank 0's at
    another micro-batch (on gloo, a result rank 0 alone measured); the trial ends its group and is launched
    again, skipping the batch search."""
    req = _request(tmp_path, num_gpus=2, methods="all", exhaustive=True, only=("fsdp3",),
                   faults={"fsdp3": "oom-measuring-rank1"}, timeout_s=180, max_micro_batch=2)
    seen = _sweep(req)
    (done,) = [e for e in seen if isinstance(e, ev.TrialFinished)]
    assert done.status == "measured", done.message
    with Store.open(req.db, read_only=True) as s:
        (row,) = s.trials(model="tiny-neox")
    prov = json.loads(row["provenance"])
    searched = prov["max_micro_batch_searched"]
    assert searched == 2  # the cap: the search's answer is kept through the relaunch
    # Every micro-batch above 1 fails on rank 1, so it halves down to 1, launched once per halving.
    assert prov["measure_oom"] == [2] and row["micro_batch"] == 1 and row["grad_accum"] == 8
    assert [e.micro_batch for e in seen if isinstance(e, ev.BatchTried) and not e.fits] == [2]
    assert not _processes_with("engine.bench.trial")


def test_one_rank_out_of_memory_at_every_micro_batch_is_an_out_of_memory_row_with_its_settings(tmp_path):
    req = _request(tmp_path, num_gpus=2, methods="all", exhaustive=True, only=("fsdp3",),
                   faults={"fsdp3": "oom-measuring-rank1-all"}, timeout_s=180, max_micro_batch=2)
    seen = _sweep(req)
    (done,) = [e for e in seen if isinstance(e, ev.TrialFinished)]
    assert done.status == "oom" and "micro-batch 1" in done.message
    with Store.open(req.db, read_only=True) as s:
        (row,) = s.trials(model="tiny-neox")
    prov = json.loads(row["provenance"])
    assert not row["feasible"] and row["failure_kind"] == "oom" and prov["measure_oom"] == [2, 1]
    # The settings the trial ran with come from the last launch's relaunch event, not from a result file.
    assert row["attention"] and row["compile"] is not None and prov["versions"]["torch"]
    assert not _processes_with("engine.bench.trial")


# --- several nodes: torchrun agents meeting through c10d rendezvous ----------------------------------


def test_two_nodes_on_one_machine_train_as_one_job(tmp_path):
    """Two torchrun agents on localhost (what srun starts on two nodes), CPU and gloo: the trial is one
    job of 2 ranks, the batch split over both, and rank 0 alone reports. FSDP-3 here (sharded over the
    nodes); DDP over several nodes is the four-node test's."""
    req = _request(tmp_path, num_nodes=2, launcher="local-nodes", methods="all", exhaustive=True, only=("fsdp3",))
    seen = _sweep(req)
    assert [e.status for e in seen if isinstance(e, ev.TrialFinished)] == ["measured"], [
        e.message for e in seen if isinstance(e, ev.TrialFinished)]
    with Store.open(req.db, read_only=True) as s:
        rows = s.trials(model="tiny-neox")
        run = s.runs()[0]
    assert [r["sharding"] for r in rows] == ["fsdp3"]
    assert all(r["num_nodes"] == 2 and r["num_gpus"] == 1 for r in rows)
    assert all(r["micro_batch"] * r["grad_accum"] * 2 == 16 for r in rows)  # tiny-neox's batch over 2 ranks
    assert run["num_nodes"] == 2 and "--nodes 2" in run["command"]
    assert not _processes_with("engine.bench.trial")


def test_four_nodes_on_one_machine(tmp_path):
    req = _request(tmp_path, num_nodes=4, launcher="local-nodes", methods="free-lunch", only=("free-lunch",))
    _sweep(req)
    with Store.open(req.db, read_only=True) as s:
        (row,) = s.trials(model="tiny-neox")
    assert row["feasible"] and row["num_nodes"] == 4 and row["micro_batch"] * row["grad_accum"] * 4 == 16


def test_a_rank_dying_on_another_node_ends_the_trial_and_leaves_nothing(tmp_path):
    req = _request(tmp_path, num_nodes=2, launcher="local-nodes", methods="free-lunch", only=("free-lunch",),
                   faults={"free-lunch": "crash-rank1"}, timeout_s=120)
    seen = _sweep(req)
    (done,) = [e for e in seen if isinstance(e, ev.TrialFinished)]
    assert done.status in ("failed", "timeout") and done.duration_s < 120
    with Store.open(req.db, read_only=True) as s:
        (row,) = s.trials(model="tiny-neox")
    assert not row["feasible"] and row["failure_message"]
    assert "never met" not in row["failure_message"]  # they met; a rank died after (the survivors' error is not the cause)
    assert not _processes_with("engine.bench.trial")


def test_a_rendezvous_that_never_completes_says_so_and_names_its_endpoint(tmp_path, monkeypatch):
    # node 1's agent never comes; node 0's waits its join_timeout (5 s here, 120 by default) and gives up
    monkeypatch.setenv("TUI_PLANNER_RDZV_JOIN_TIMEOUT_S", "5")
    monkeypatch.setenv("TUI_PLANNER_NODE_GRACE_S", "2")  # the agent that never came will not fail by itself
    req = _request(tmp_path, num_nodes=2, launcher="local-nodes", methods="free-lunch", only=("free-lunch",),
                   faults={"free-lunch": "no-node1"}, timeout_s=90)
    seen = _sweep(req)
    (done,) = [e for e in seen if isinstance(e, ev.TrialFinished)]
    assert done.status == "failed" and done.duration_s < 90
    with Store.open(req.db, read_only=True) as s:
        (row,) = s.trials(model="tiny-neox")
    assert not row["feasible"]
    assert "the 2 nodes never met: the rendezvous at 127.0.0.1:" in row["failure_message"]
    assert "within 5 s" in row["failure_message"]
    assert not _processes_with("engine.bench.trial") and not _processes_with("time.sleep(3600)")


def test_launch_commands_for_each_launcher(tmp_path):
    from engine.bench.launcher import launch_commands

    spec = ev.TrialSpec(key="k", model="m", gpu="h100", num_gpus=8, num_nodes=2, methods=space.FREE_LUNCH)
    env = {"MASTER_ADDR": "node001", "CUDA_VISIBLE_DEVICES": ""}
    ((cmd, _),) = launch_commands(spec, tmp_path / "s.json", tmp_path / "r.json", "srun", env)
    assert cmd[:2] == ["srun", "--nodes=2"] and "--ntasks-per-node=1" in cmd and "--kill-on-bad-exit=1" in cmd
    assert "--nnodes=2" in cmd and "--nproc-per-node=8" in cmd and "--rdzv-backend=c10d" in cmd
    assert any(a.startswith("--rdzv-endpoint=node001:") for a in cmd) and "--standalone" not in cmd
    local = launch_commands(spec, tmp_path / "s.json", tmp_path / "r.json", "local-nodes", {})
    assert len(local) == 2
    assert [e["CUDA_VISIBLE_DEVICES"] for _, e in local] == ["0,1,2,3,4,5,6,7", "8,9,10,11,12,13,14,15"]
    assert len({next(a for a in c if a.startswith("--rdzv-endpoint")) for c, _ in local}) == 1  # one rendezvous
    one = ev.TrialSpec(key="k", model="m", gpu="h100", num_gpus=2, methods=space.FREE_LUNCH)
    ((cmd, _),) = launch_commands(one, tmp_path / "s.json", tmp_path / "r.json", "local", {})
    assert "--standalone" in cmd and "--nproc-per-node=2" in cmd


@pytest.mark.parametrize("device, preset", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100pcie"), ("NVIDIA H100 NVL", "h100nvl"),
    ("NVIDIA H200", "h200"), ("NVIDIA H200 NVL", "h200nvl"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA A100 80GB PCIe", "a100pcie"), ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtxpro6000s"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtxpro6000q"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtxpro6000"), ("NVIDIA RTX 6000 Ada Generation", "rtx6000ada"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"), ("Tesla V100-SXM2-32GB", "v100"),
    ("NVIDIA A100-PCIE-40GB", None), ("Tesla T4", None),  # no preset: the sweep asks for --gpu, never guesses
])
def test_the_local_gpu_is_the_preset_its_name_says(device, preset):
    from engine.bench.sweep import gpu_preset_for

    assert gpu_preset_for(device, load_presets()) == preset
