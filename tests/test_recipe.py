"""Export and verify end to end on the CPU: a real tiny sweep into a DuckDB file, the exported files read
back by the libraries that will use them (transformers' TrainingArguments, DeepSpeed's config checker,
accelerate's FSDP plugin), and real verify runs under torchrun. No timing thresholds: a verdict is only
checked against the tolerance rule, never expected to pass on a CPU.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT
from engine.recipe import export as recipe
from engine.data.errors import PlannerError
from engine.data.paths import shipped_db
from engine.data.presets import load_presets
from engine.data.store import Store
from engine.recipe.verify import VerifyRequest, run_verify, verdict
from tui_planner.cli import main

TINY = str(FIXTURES / "tiny")


@pytest.fixture(scope="module")
def swept(offload_sweep, tmp_path_factory):
    """free-lunch and ZeRO-2 with offload, measured for real (the suite's one offload sweep, less its
    checkpointed FSDP row: these tests export what those two measured)."""
    db = tmp_path_factory.mktemp("recipe") / "r.duckdb"
    shutil.copy(offload_sweep / "r.duckdb", db)
    with Store.open(db, read_only=False) as s:
        s.con.execute("DELETE FROM trials WHERE key LIKE '%|ckpt+fsdp3+offload|%'")
        s.con.execute("CHECKPOINT")
    with Store.open(db, read_only=True) as s:
        rows = {recipe.label(r): r for r in s.trials()}
    assert {k for k, r in rows.items() if r["feasible"]} == {"free-lunch", "zero2+offload"}
    return db, rows


def _export(db, out, *extra):
    return main(["export", "--db", str(db), "--presets", TINY, "--out", str(out), *extra])


def _exported(db, out):
    assert _export(db, out, "--model", "tiny-neox", "--gpu", "cpu", "--num-gpus", "1") == 0
    return out


def _training_arguments(out, monkeypatch, **changes):
    """TrainingArguments from the exported JSON, read in the export's directory as launch.sh runs it."""
    from transformers import TrainingArguments

    monkeypatch.chdir(out)
    return TrainingArguments(**{**json.loads((out / recipe.TRAINING_ARGS).read_text()), **changes})


def test_export_writes_the_fastest_measured_setting(swept, tmp_path, monkeypatch, capsys):
    db, rows = swept
    out = tmp_path / "best"
    assert _export(db, out, "--model", "tiny-neox", "--gpu", "cpu", "--num-gpus", "1") == 0
    printed = capsys.readouterr().out
    plan = json.loads((out / recipe.PLAN).read_text())
    best = min((r for r in rows.values() if r["feasible"]), key=lambda r: r["step_s"])
    for key in ("trial_id", "model", "gpu", "num_gpus", "micro_batch", "grad_accum", "pass_s", "update_s", "step_s",
                "days", "mfu"):
        assert plan[key] == best[key], key
    assert plan["db"] == str(db) and plan["provenance"]["versions"]["torch"] and plan["methods"] == recipe.label(best)
    assert plan["runner_up"]["methods"] != plan["methods"] and plan["runner_up"]["step_s"] >= plan["step_s"]
    explain = (out / recipe.EXPLAIN).read_text()
    assert "Runner-up: " + plan["runner_up"]["methods"] in explain and "days" in explain and "Runner-up" in printed
    assert "torchrun --standalone --nnodes 1 --nproc-per-node 1" in (out / recipe.LAUNCH).read_text()

    args = _training_arguments(out, monkeypatch, output_dir=str(tmp_path / "ckpt"))
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (16, 1)
    assert args.max_steps == 1000 and args.learning_rate == 1e-3 and args.bf16 and args.use_cpu  # preset's recipe
    assert args.max_grad_norm == 1.0 and (args.adam_beta1, args.adam_beta2) == (0.9, 0.95)
    assert not args.torch_compile and not args.gradient_checkpointing  # as the sweep ran
    assert (args.deepspeed == recipe.DEEPSPEED) is (best["sharding"] == "zero2")  # whichever was fastest here


def test_the_deepspeed_config_passes_deepspeeds_checker(swept, tmp_path, monkeypatch):
    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    db, rows = swept
    out = tmp_path / "zero2"
    assert _export(db, out, "--trial", rows["zero2+offload"]["trial_id"]) == 0
    raw = json.loads((out / recipe.DEEPSPEED).read_text())
    assert raw["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert raw["train_micro_batch_size_per_gpu"] == "auto"  # the Trainer fills it from training_args.json
    # Measured on the CPU, where DeepSpeed would first compile its own Adam: torch's, as the trial ran, and said
    assert raw["optimizer"]["params"]["torch_adam"] is True
    plan = json.loads((out / recipe.PLAN).read_text())
    assert any("torch's AdamW" in n for n in plan["notes"])
    try:
        args = _training_arguments(out, monkeypatch, output_dir=str(tmp_path / "ckpt"))
        filled = args.hf_deepspeed_config.config
        checked = DeepSpeedConfig(filled)  # one process: world size 1
    finally:
        unset_hf_deepspeed_config()  # transformers remembers ZeRO globally; later tests build plain models
    assert checked.zero_optimization_stage == 2 and checked.zero_config.offload_optimizer.device == "cpu"
    assert checked.train_batch_size == 16 == args.per_device_train_batch_size * args.gradient_accumulation_steps
    assert checked.gradient_clipping == args.max_grad_norm and checked.bfloat16_config.enabled


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing")  # the name transformers 4.x-5.x all read
@pytest.mark.parametrize("sharding, offloading", [("zero3", True), ("fsdp3", True), ("fsdp2", False)])
def test_sharded_settings_validate(swept, tmp_path, monkeypatch, sharding, offloading):
    """ZeRO-3 and FSDP rows from the measured free-lunch row (settings only: nothing trains here)."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from deepspeed.runtime.config import DeepSpeedConfig
    from torch.distributed.fsdp import CPUOffloadPolicy
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    db, rows = swept
    row = {**rows["free-lunch"], "sharding": sharding, "offloading": offloading, "activation_checkpointing": True}
    assert row["grad_accum"] == 1 and row["micro_batch"] % 2 == 0
    one = recipe.build(recipe.Choice(row, None, {"usable": 1}), load_presets([TINY]), db)
    assert "accelerator_config" not in one.training_args and "sync_each_batch" not in one.explain  # nothing to wait for
    row = {**row, "micro_batch": row["micro_batch"] // 2, "grad_accum": 2}  # the same batch, accumulated
    r = recipe.build(recipe.Choice(row, None, {"usable": 1}), load_presets([TINY]), db)
    recipe.write(r, tmp_path)
    try:
        args = _training_arguments(tmp_path, monkeypatch, output_dir=str(tmp_path / "ckpt"))
        if sharding == "zero3":
            checked = DeepSpeedConfig(args.hf_deepspeed_config.config)
            assert checked.zero_optimization_stage == 3 and checked.zero_config.offload_param.device == "cpu"
    finally:
        unset_hf_deepspeed_config()
    assert args.gradient_checkpointing
    if sharding.startswith("fsdp"):
        plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
        assert plugin.fsdp_version == 2 and plugin.transformer_cls_names_to_wrap == ["GPTNeoXLayer"]
        assert plugin.reshard_after_forward is (sharding == "fsdp3")  # FULL_SHARD vs SHARD_GRAD_OP
        assert isinstance(plugin.cpu_offload, CPUOffloadPolicy) is offloading
        # the Trainer reduces after every micro-batch, as the benchmark measured (accelerate's no_sync would wait)
        from accelerate.utils import GradientAccumulationPlugin

        kw = args.accelerator_config.gradient_accumulation_kwargs
        assert GradientAccumulationPlugin(num_steps=args.gradient_accumulation_steps, **kw).sync_each_batch
        assert "sync_each_batch" in r.explain
        assert not (tmp_path / recipe.DEEPSPEED).exists()
        # compiled under FSDP: the note that keeps every block compiled, as the benchmark did
        said = "allow_a_compile_per_block(NUMBER_OF_BLOCKS)" in r.explain
        assert said is bool(row["compile"]), r.explain
        compiled = recipe.build(recipe.Choice({**row, "compile": True}, None, {"usable": 1}), load_presets([TINY]), db)
        assert "allow_a_compile_per_block(NUMBER_OF_BLOCKS)" in compiled.explain


def test_verify_trains_the_export_and_applies_the_tolerance_rule(swept, tmp_path):
    db, _ = swept
    out = tmp_path / "best"
    assert _export(db, out, "--model", "tiny-neox", "--gpu", "cpu", "--num-gpus", "1") == 0
    result = run_verify(VerifyRequest(out, steps=3, warmup=1, tolerance=0.05))
    plan = json.loads((out / recipe.PLAN).read_text())
    assert result["verdict"] in ("pass", "fail"), result.get("error")
    assert result["predicted_step_s"] == plan["step_s"] and result["measured_step_s"] > 0
    assert len(result["step_times_s"]) == 3 and len(result["warmup_step_times_s"]) == 1
    off = result["measured_step_s"] / plan["step_s"] - 1
    assert result["difference"] == pytest.approx(off)
    assert result["verdict"] == ("pass" if abs(off) <= 0.05 else "fail")
    saved = json.loads((out / "verify.json").read_text())
    assert saved["verdict"] == result["verdict"] and saved["versions"]["torch"] and saved["device_name"] == "cpu"
    # Trained as exported: DeepSpeed only where the fastest measured setting (timing noise decides, on a CPU)
    # was a ZeRO one.
    assert saved["stack"]["mixed_precision"] == "bf16"
    assert bool(saved["stack"]["deepspeed"]) == (plan["sharding"] or "none").startswith("zero")


def test_a_prediction_far_off_fails_with_both_numbers(swept, tmp_path):
    """The ZeRO-2 export trains through DeepSpeed; its plan is edited to claim a 1000x faster step."""
    db, rows = swept
    out = tmp_path / "zero2"
    assert _export(db, out, "--trial", rows["zero2+offload"]["trial_id"]) == 0
    plan = json.loads((out / recipe.PLAN).read_text())
    plan["step_s"] = claimed = plan["step_s"] / 1000
    (out / recipe.PLAN).write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, "-m", "tui_planner", "verify", str(out), "--steps", "2", "--warmup", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    saved = json.loads((out / "verify.json").read_text())
    assert saved["verdict"] == "fail" and saved["stack"]["deepspeed"]
    assert "FAIL" in done.stdout and f"{claimed:.4g}" in done.stdout
    assert f"{saved['measured_step_s']:.4g}" in done.stdout


def test_verify_starts_its_processes_with_the_threads_launch_sh_gives(tmp_path, monkeypatch):
    """Each rank's CPU threads as the benchmark's rule (and launch.sh) gives them, unless already set."""
    from engine.bench import environment
    from engine.recipe import verify

    monkeypatch.setattr(environment, "usable_cores", lambda: 64)
    assert environment.cpu_threads_per_rank(4) == 8 and environment.cpu_threads_per_rank(4, fsdp_offload=True) == 16
    assert environment.cpu_threads_per_rank(64) == 1
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    show = [sys.executable, "-c", "import os; print(os.environ['OMP_NUM_THREADS'])"]
    status, tail, _ = verify._launch(show, tmp_path, 60, lambda e: None, 8)
    assert status is None and tail[-1] == "8"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert verify._launch(show, tmp_path, 60, lambda e: None, 8)[1][-1] == "3"


def test_verdict_rule():
    assert verdict(1.04, 1.0, 0.05) == ("pass", pytest.approx(0.04))
    assert verdict(0.94, 1.0, 0.05)[0] == "fail"  # faster than predicted is a wrong benchmark too
    assert verdict(1.06, 1.0, 0.05)[0] == "fail"


def test_the_device_recipe_for_pythia_1b(tmp_path, monkeypatch):
    """What the device run uses: the shipped H100 measurement. TF32 and fused AdamW are GPU settings,
    so loading on this CPU goes through the same degradation verify --device cpu applies."""
    from transformers import TrainingArguments

    presets = load_presets()
    with Store.open(shipped_db()) as s:
        choice = recipe.pick(s, presets, "pythia-1b", "h100", 1)
    r = recipe.build(choice, presets, shipped_db())
    row, runner_up = choice.row, choice.runner_up
    a = r.training_args
    assert a["per_device_train_batch_size"] == row["micro_batch"]
    assert a["gradient_accumulation_steps"] == row["grad_accum"]
    assert a["bf16"] and a["tf32"] and a["torch_compile"] and a["optim"] == "adamw_torch_fused"
    assert a["max_steps"] == 143000 and a["lr_scheduler_type"] == "cosine_with_min_lr"
    assert a["lr_scheduler_kwargs"] == {"min_lr_rate": 0.1} and a["warmup_steps"] == 1430
    assert r.plan["device"] == "cuda" and r.plan["mfu"] <= 1.0 and runner_up["step_s"] > row["step_s"]
    assert "torch_compile_mode" not in a  # measured with torch.compile's default mode
    tuned = recipe.training_args({**row, "provenance": json.dumps({"compile_mode": "max-autotune-no-cudagraphs"})},
                                 presets.model("pythia-1b"), "cpu", [])
    assert tuned["torch_compile_mode"] == "max-autotune-no-cudagraphs"
    TrainingArguments(**{**tuned, "output_dir": str(tmp_path)})
    # The allocator setting travels with the measurement that recorded it (older ones did not).
    assert "PYTORCH_CUDA_ALLOC_CONF" not in r.launch or r.plan["provenance"].get("alloc_conf")
    plan = {**r.plan, "provenance": {**r.plan["provenance"], "alloc_conf": "expandable_segments:True"}}
    assert ('if [ -z "${PYTORCH_CUDA_ALLOC_CONF:-}" ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; fi'
            in recipe._launch(plan, presets.model("pythia-1b")))
    # Measured with the causal flag: the launcher's header tells the user's script to do the same.
    assert r.plan["provenance"]["causal_mask"] == "is_causal flag"
    assert "sdpa_without_dense_masks()" in r.launch and any("is_causal" in n for n in r.notes)
    older = {**r.plan, "provenance": {k: v for k, v in r.plan["provenance"].items() if k != "causal_mask"}}
    assert "sdpa_without_dense_masks" not in recipe._launch(older, presets.model("pythia-1b"))
    # Checkpointed (no cache): the measurement assumed one sequence per row, and the line says so.
    ckpt = recipe._launch({**r.plan, "activation_checkpointing": True}, presets.model("pythia-1b"))
    assert "sdpa_without_dense_masks(unpacked=True)  # one sequence per row (no packing)" in ckpt
    # CPU threads as the benchmark's ranks had them (torchrun alone gives each rank one): the line, run by bash
    import subprocess

    def threads(plan: dict, cores: int, preset: str = "") -> str:
        script = recipe._launch(plan, presets.model("pythia-1b"))
        line = next(x for x in script.splitlines() if "OMP_NUM_THREADS" in x and x.startswith("if")).split("  #")[0]
        env = {"PATH": os.environ["PATH"], **({"OMP_NUM_THREADS": preset} if preset else {})}
        return subprocess.run(["bash", "-c", f"nproc() {{ echo {cores}; }}; {line}; echo $OMP_NUM_THREADS"],
                              env=env, capture_output=True, text=True, check=True).stdout.strip()

    two = {**r.plan, "num_gpus": 2}
    assert (threads(two, 64), threads(two, 2), threads(two, 64, "3")) == ("16", "1", "3")
    # FSDP offload steps on the host: all the cores, shared by the ranks
    assert threads({**two, "sharding": "fsdp2", "offloading": True, "world_size": 2}, 64) == "32"
    assert threads({**two, "sharding": "zero1", "offloading": True, "world_size": 2}, 64) == "16"
    # FSDP offload on several GPUs: accelerate needs telling, before transformers starts the process group.
    fsdp = {**r.plan, "sharding": "fsdp3", "offloading": True, "world_size": 2}
    launch = recipe._launch(fsdp, presets.model("pythia-1b"))
    assert "export ACCELERATE_USE_FSDP=true FSDP_OFFLOAD_PARAMS=true" in launch
    # the benchmark's glibc settings are its own: the Trainer ran FSDP offload fast without them
    assert "MALLOC_" not in launch
    for other in ({**fsdp, "world_size": 1}, {**fsdp, "offloading": False}, {**fsdp, "sharding": "zero3"}):
        assert "ACCELERATE_USE_FSDP" not in recipe._launch(other, presets.model("pythia-1b"))
    notes: list[str] = []
    recipe.for_device(a, None, "cpu", notes)
    assert not a["tf32"] and a["optim"] == "adamw_torch" and len(notes) == 2
    TrainingArguments(**{**a, "output_dir": str(tmp_path)})


def test_cpu_plans_degrade_fp16_and_say_so():
    presets = load_presets([TINY])
    row = {"trial_id": "t", "model": "tiny-roberta", "gpu": "cpu", "num_gpus": 1, "num_nodes": 1, "micro_batch": 8,
           "grad_accum": 1, "free_lunch": True, "tf32": False, "compile": False, "activation_checkpointing": False,
           "sharding": "zero2", "offloading": True}
    notes: list[str] = []
    args = recipe.training_args(row, presets.model("tiny-roberta"), "cpu", notes)
    assert not args["fp16"] and not args["bf16"] and args["use_cpu"]
    assert any("fp16" in n and "fp32" in n for n in notes)
    assert "fp16" not in recipe.deepspeed_config(row, presets.model("tiny-roberta"), "cpu")
    gpu = recipe.deepspeed_config(row, presets.model("tiny-roberta"), "cuda")  # DeepSpeed's own Adam on a GPU
    assert "torch_adam" not in gpu["optimizer"]["params"] and gpu["zero_optimization"]["offload_optimizer"]["pin_memory"]


@pytest.mark.parametrize("name, expected", [
    ("cosine to 0.1x", {"lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": {"min_lr_rate": 0.1}}),
    ("cosine to 1e-5", {"lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": {"min_lr": 1e-5}}),
    ("linear", {"lr_scheduler_type": "linear"}),
    ("constant", {"lr_scheduler_type": "constant_with_warmup"}),
])
def test_schedules_map_to_hugging_face_names(name, expected):
    from engine.data.presets import Training

    t = Training(batch_size=8, steps=10, precision="fp32", optimizer="adam", lr=1e-3, betas=(0.9, 0.99), eps=1e-8,
                 weight_decay=0.0, max_grad_norm=None, schedule=name, warmup_steps=5)
    assert recipe.schedule(t, "m") == expected
    with pytest.raises(PlannerError, match="has no Hugging Face equivalent"):
        recipe.schedule(Training(**{**t.__dict__, "schedule": "one-cycle"}), "m")


def test_bad_input_says_what_is_wrong(swept, tmp_path, capsys):
    db, _ = swept
    presets = load_presets([TINY])
    with Store.open(db, read_only=True) as s:
        with pytest.raises(PlannerError, match=r"no usable measured result for tiny-neox on 2 x cpu.*1 x cpu"):
            recipe.pick(s, presets, "tiny-neox", "cpu", 2)
        with pytest.raises(PlannerError, match="unknown model 'no-such-model'"):
            recipe.pick(s, presets, "no-such-model", "cpu", 1)
        with pytest.raises(PlannerError, match="no trial nope"):
            recipe.pick(s, presets, None, None, None, trial_id="nope")
    with Store.open(shipped_db()) as s:
        paper = s.query("SELECT trial_id FROM trials WHERE source = 'paper-table1' LIMIT 1")[0]["trial_id"]
        with pytest.raises(PlannerError, match="only measured trials can be exported"):
            recipe.pick(s, load_presets(), None, None, None, trial_id=paper)
    with pytest.raises(PlannerError, match="--device cpu"):  # this machine has no GPU
        run_verify(VerifyRequest(_exported(db, tmp_path / "best"), device="cuda"))
    (tmp_path / "empty").mkdir()
    assert main(["verify", str(tmp_path / "empty")]) == 2
    assert "no plan.json" in capsys.readouterr().err
    assert _export(db, tmp_path / "x", "--model", "tiny-neox") == 2
    assert "--num-gpus" in capsys.readouterr().err


def test_export_and_verify_load_no_torch():
    """A machine without the bench extra exports; verify's parent leaves torch to the training process."""
    code = ("import sys; import engine.recipe.export, engine.recipe.verify, tui_planner.export_cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'textual')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]"


def test_a_fused_fp8_row_exports_liger_and_accelerates_fp8_recipe(tmp_path, monkeypatch):
    """Issue 42: fused -> use_liger_kernel; fp8 -> accelerate's mixed_precision fp8 with the torchao backend (the
    config file accelerate reads, and the same in launch.sh's environment and verify's), said to change numerics."""
    from accelerate.commands.config.config_args import load_config_from_file
    from transformers import TrainingArguments

    presets = load_presets()
    with Store.open(shipped_db()) as s:
        # a model liger-kernel knows (Pythia's cell is now led by a row with the planner's own patch, which
        # transformers' use_liger_kernel cannot reproduce: the export says so instead)
        choice = recipe.pick(s, presets, "llama-3.2-1b", "h100", 1)
    assert not choice.row.get("fused")
    row = {**choice.row, "fused": True, "fp8": True, "sharding": "fsdp2", "offloading": False}
    r = recipe.build(recipe.Choice(row, None, choice.counts), presets, shipped_db())
    a = r.training_args
    assert a["use_liger_kernel"] is True
    assert "use_liger_kernel" in {f.name for f in __import__("dataclasses").fields(TrainingArguments)}
    assert a["bf16"] is False and a["fp16"] is False  # else transformers would override accelerate's fp8
    assert r.plan["fp8"] and r.plan["fused"] and r.plan["changes_numerics"] and r.plan["methods"] == "fused+fp8+fsdp2"
    assert "CHANGES NUMERICS" in r.explain and "accelerate_config.yaml" in r.explain
    env = recipe.fp8_env(r.plan)
    assert env["ACCELERATE_MIXED_PRECISION"] == "fp8" and env["ACCELERATE_FP8_BACKEND"] == "AO"
    assert env["ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"] == "false"  # as the row measured it (no float8 gather)
    # a row whose FSDP gathered its fp8 weights in float8 (Methods.fp8_gathered_in_float8): the export does as it did
    gathered = {**row, "provenance": json.dumps({"fp8": {"recipe": "tensorwise", "all_gather": "float8"}})}
    g = recipe.build(recipe.Choice(gathered, None, choice.counts), presets, shipped_db())
    assert recipe.fp8_env(g.plan)["ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"] == "true"
    assert "enable_fsdp_float8_all_gather: true" in recipe.accelerate_config(g.plan)
    offloaded = {**gathered, "offloading": True}  # a shared file's claim the engine never runs: not followed
    o = recipe.build(recipe.Choice(offloaded, None, choice.counts), presets, shipped_db())
    assert recipe.fp8_env(o.plan)["ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"] == "false"
    zero = {**gathered, "sharding": "zero3"}  # DeepSpeed has no float8 gather: never claimed
    z = recipe.build(recipe.Choice(zero, None, choice.counts), presets, shipped_db())
    assert recipe.fp8_env(z.plan)["ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER"] == "false"
    assert "export " + " ".join(f"{k}={v}" for k, v in env.items()) in r.launch
    paths = recipe.write(r, tmp_path / "out")
    assert tmp_path / "out" / recipe.ACCELERATE in paths
    cfg = load_config_from_file(str(tmp_path / "out" / recipe.ACCELERATE))  # accelerate reads it back
    assert cfg.mixed_precision == "fp8" and cfg.fp8_config["backend"] == "AO" and cfg.distributed_type == "FSDP"
    monkeypatch.chdir(tmp_path / "out")
    notes: list[str] = []
    recipe.for_device(a, None, "cpu", notes)  # verify --device cpu: no Triton kernels there, and it says so
    assert "use_liger_kernel" not in a and any("liger" in n for n in notes)
    TrainingArguments(**{**a, "output_dir": str(tmp_path)})  # transformers takes the rest on this CPU
    # without the extras: none of it
    plain = recipe.build(choice, presets, shipped_db())
    assert "use_liger_kernel" not in plain.training_args and plain.training_args["bf16"]
    # a model type liger-kernel has no patch for ran the planner's own (its provenance says): the Trainer's flag would
    # change nothing, so the export says what to call instead
    generic = {**row, "provenance": json.dumps({"fused": {"via": "tui-planner's generic liger patch", "covers": []}})}
    g = recipe.build(recipe.Choice(generic, None, choice.counts), presets, shipped_db())
    assert "use_liger_kernel" not in g.training_args and "engine.bench.fast.apply_fused" in g.explain
    # a compiled row ran the loss kernel only: liger's own function with the keyword arguments it took, the rest left
    # to torch.compile, and the loss untraced as in the benchmark
    kernels = {"rope": False, "fused_linear_cross_entropy": True, "rms_norm": False, "swiglu": False}
    own = {**row, "compile": True, "provenance": json.dumps({"fused": {
        "via": "liger_kernel apply_liger_kernel_to_llama", "covers": ["fused_linear_cross_entropy"],
        "liger_kernel_config": kernels}})}
    o = recipe.build(recipe.Choice(own, None, choice.counts), presets, shipped_db())
    assert o.training_args["use_liger_kernel"] is True and o.training_args["liger_kernel_config"] == kernels
    assert "liger_kernel_config" in {f.name for f in __import__("dataclasses").fields(TrainingArguments)}
    assert "keep_fused_loss_eager()" in o.explain
    g = recipe.build(recipe.Choice({**generic, "compile": True}, None, choice.counts), presets, shipped_db())
    assert "apply_fused(model, 'causal-lm', compiled=True)" in g.explain
    # a compiled row measured before fused left the norms to torch.compile swapped them: the export says so, as
    # verify applies them
    before = {**row, "compile": True, "provenance": json.dumps({"fused": {
        "via": "tui-planner's generic liger patch", "covers": ["layer_norm x33", "fused_linear_cross_entropy"]}})}
    b = recipe.build(recipe.Choice(before, None, choice.counts), presets, shipped_db())
    assert "LayerNorm -> LigerLayerNorm" in b.explain and "compiled=True" not in b.explain
    assert recipe.fp8_env(plain.plan) == {} and recipe.accelerate_config(plain.plan) is None
    assert "ACCELERATE_MIXED_PRECISION" not in plain.launch and "CHANGES NUMERICS" not in plain.explain
    recipe.write(plain, tmp_path / "out")  # a later export without fp8 leaves no stale FP8 recipe behind
    assert not (tmp_path / "out" / recipe.ACCELERATE).exists()
