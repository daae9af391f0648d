"""Your own training run: any model from its config.json, on your tokens, batch and sequence length; the store
keys every row by the run it answers for (engine/data/runs.py, schema v4)."""

import json
import os
import subprocess
import sys

import duckdb
import pytest

from conftest import ROOT, TINY
from engine.data import store as store_mod
from engine.data.errors import PlannerError
from engine.data.presets import load_presets
from engine.data.runs import RunFlags, describe_run, model_for, run_key, tokens, with_run
from engine.data.store import SCHEMA_VERSION, Store
from tui_planner.cli import main

CONFIGS = ROOT / "presets" / "configs"


@pytest.fixture(scope="module")
def presets():
    return load_presets()


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# --- the run ---------------------------------------------------------------------------------------


def test_tokens_set_the_steps_and_keep_the_model(presets):
    base = presets.model("pythia-1b")
    longer = with_run(base, RunFlags(tokens=2 * tokens(base)))
    assert longer.id == base.id and run_key(longer) == run_key(base)  # the same step, twice as many
    assert longer.training.steps == 2 * base.training.steps
    assert longer.training_flops == pytest.approx(2 * base.training_flops)
    assert with_run(base, RunFlags()) is base


def test_a_new_sequence_length_is_another_model_with_the_same_tokens_a_step(presets):
    base = presets.model("pythia-1b")
    m = with_run(base, RunFlags(seq_len=4098))
    assert m.id == "pythia-1b+b512s4098" and m.seq_len == 4098
    assert m.training.batch_size * m.seq_len == base.training.batch_size * base.seq_len
    assert tokens(m) == pytest.approx(tokens(base), rel=1e-3)
    assert run_key(m) == "512x4098 bf16 adam" and "4,098" in describe_run(m)
    m2 = with_run(base, RunFlags(batch_tokens=1e6, precision="fp16"))
    assert m2.training.batch_size == round(1e6 / 2049) and m2.id.endswith("-fp16")


def test_tokens_per_parameter_counts_the_parameters_from_the_config(presets):
    _, m = model_for(presets, str(CONFIGS / "llama-3.2-1b.json"), RunFlags(tokens_per_param=20))
    assert tokens(m) == pytest.approx(20 * 1_235_814_400, rel=1e-3)


@pytest.mark.parametrize("flags, why", [
    (RunFlags(tokens=1e9, steps=10), "one of --tokens"),
    (RunFlags(batch=8, batch_tokens=1e6), "--batch"),
    (RunFlags(tokens=float("nan")), "--tokens must be"),
    (RunFlags(tokens=1e30), "--tokens must be"),
    (RunFlags(seq_len=0), "--seq-len must be"),
    (RunFlags(precision="int4"), "--precision"),
])
def test_a_run_that_cannot_be_is_refused_naming_the_flag(presets, flags, why):
    with pytest.raises(PlannerError, match=why):
        with_run(presets.model("pythia-1b"), flags)


def test_an_image_model_takes_batch_and_steps_not_tokens(presets):
    with pytest.raises(PlannerError, match="image model"):
        with_run(presets.model("vit-large"), RunFlags(tokens=1e9))
    m = with_run(presets.model("vit-large"), RunFlags(batch=1024, steps=5000))
    assert m.training.steps == 5000 and "images" in describe_run(m)


def test_an_encoder_cannot_run_past_its_learned_positions(presets):
    with pytest.raises(PlannerError, match="learned positions"):
        with_run(presets.model("roberta-large"), RunFlags(seq_len=4096))


def test_a_sequence_past_the_configs_positions_is_refused_or_said_naming_the_limit(presets, tmp_path, capsys):
    """Issue 41, item 11: GPT-2's learned positions (n_positions) end at 1,024: a longer sequence is refused,
    naming the limit (it was planned silently); rotary positions run past max_position_embeddings, so such a
    run is planned and the command says so, with the limit."""
    from engine.data.runs import position_note

    gpt2 = tmp_path / "gpt2-small.json"
    gpt2.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                "vocab_size": 50257, "n_positions": 1024, "architectures": ["GPT2LMHeadModel"]}))
    _, m = model_for(presets, str(gpt2))
    assert m.seq_len == 1024  # its own run fits its positions
    with pytest.raises(PlannerError, match=r"--seq-len 2048: gpt2-small has learned positions for 1,024 tokens at "
                                           r"most \(its config's n_positions = 1,024\)"):
        model_for(presets, str(gpt2), RunFlags(seq_len=2048))
    code, _, err = run_cli(capsys, "rank", "--model", str(gpt2), "--seq-len", "2048", "--budget", "50000")
    assert code == 2 and "n_positions = 1,024" in err
    olmo = presets.model("olmo-1b")  # rotary, max_position_embeddings 2,048
    assert position_note(olmo, 2048) is None and position_note(olmo, None) is None
    assert position_note(olmo, 4096).startswith("sequence 4,096 is past the model config's max_position_embeddings "
                                                "(2,048): planned as asked")
    code, out, err = run_cli(capsys, "rank", "--model", str(CONFIGS / "olmo-1b.json"), "--seq-len", "4096",
                             "--tokens", "100B", "--budget", "50000", "--format", "json")
    assert code == 0 and json.loads(out) and "note: sequence 4,096 is past the model config's " \
        "max_position_embeddings (2,048)" in err


def test_a_config_is_named_by_what_it_calls_its_model_not_its_folder(tmp_path):
    from engine.data.runs import config_id

    mine = tmp_path / "checkpoints" / "config.json"
    assert config_id(mine, {"_name_or_path": "student/llama-1b-2k"}) == "llama-1b-2k"
    assert config_id(mine, {"_name_or_path": "/data/runs/step-5000/"}) == "step-5000"
    assert config_id(tmp_path / "my-llama.json", {}) == "my-llama"
    hub = tmp_path / "hub" / "models--meta-llama--Llama-3.2-1B" / "snapshots" / "4e20de36" / "config.json"
    assert config_id(hub, {}) == "Llama-3.2-1B"  # Hugging Face's cache: the repository, not the commit
    assert config_id(mine, {"_name_or_path": ""}) == "checkpoints"  # nothing else names it
    assert config_id(mine, {"_name_or_path": "a/[b]\x1b;x"}) == "b-x"  # an id's letters only


# --- a model from its config.json alone ---------------------------------------------------------------


@pytest.mark.parametrize("name, hf_class", [("llama-3.2-1b.json", "LlamaForCausalLM"),
                                            ("qwen2.5-1.5b.json", "Qwen2ForCausalLM"),
                                            ("olmo-1b.json", "OlmoForCausalLM")])
def test_a_config_alone_is_a_model_with_the_default_run(presets, name, hf_class):
    import dataclasses

    # the paper's presets only: the shipped own-runs presets hold these configs already
    paper_only = dataclasses.replace(presets, models={k: v for k, v in presets.models.items()
                                                      if v.source.startswith("paper")})
    _, m = model_for(paper_only, str(CONFIGS / name))
    assert m.hf_class == hf_class and m.objective == "causal-lm" and m.seq_len == 2048
    assert m.training.batch_size == 512 and m.training.precision == "bf16" and m.training.optimizer == "adamw"
    assert m.fsdp_wrap == ""  # the model's own _no_split_modules says what to wrap (engine/bench/modeling.py)


def test_a_configs_model_on_a_run_of_your_own_keeps_its_models_rows(presets, tmp_path):
    """A config.json measured once and then planned on another run (here --seq-len 1024): the run's model and
    the config's own model are both in the presets the predictor gets, so the rows of the config's model (its
    residual: measured, not assumed) rest the run's prediction, as for a preset's run."""
    from engine.predict import Predictor

    config = tmp_path / "my-llama.json"
    config.write_text((CONFIGS / "llama-3.2-1b.json").read_text().replace('"num_hidden_layers": 16',
                                                                        '"num_hidden_layers": 12'))
    got, run = model_for(presets, str(config), RunFlags(seq_len=1024))
    assert run.id == "my-llama+b1024s1024" and run.seq_len == 1024
    assert got.models["my-llama"].seq_len == 2048  # the config's own model, on its default run, beside it
    assert "my-llama" in Predictor([], got)._same_model(run.id)


def test_a_config_a_preset_already_has_is_that_preset(presets):
    _, m = model_for(presets, str(CONFIGS / "llama-3.2-1b.json"))
    assert m is presets.model("llama-3.2-1b") and m.training.steps == 100_000
    own = load_presets([ROOT / "examples" / "my-run.toml"])
    _, m = model_for(own, str(CONFIGS / "olmo-1b.json"))
    assert m is own.model("olmo-1b-200b") and m.seq_len == 4096


@pytest.mark.parametrize("text, why", [
    ("{not json", "readable config.json"),
    ('{"model_type": "mixtral", "num_local_experts": 1000000}', "num_local_experts"),
    ('{"model_type": "mpt", "auto_map": {"AutoModelForCausalLM": "x.Y"}}', "auto_map"),
    ('{"model_type": "mpt", "n_layers": 1000000}', "n_layers"),
    ('{"model_type": "t5", "vocab_size": 1000000000000}', "vocab_size"),
    ('{"model_type": "falcon", "hidden_size": 200000, "num_hidden_layers": 1000, "vocab_size": 10000000}',
     "parameters"),
    ('{"model_type": "llama", "hidden_size": 64}', "num_hidden_layers"),
    ('{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 1000000, "num_attention_heads": 4, '
     '"intermediate_size": 128, "vocab_size": 100}', "num_hidden_layers"),
    ('{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, '
     '"intermediate_size": 128, "vocab_size": 1000000000000}', "vocab_size"),
    ('[1, 2]', "JSON object"),
    ("[" * 100_000 + "]" * 100_000, "nested"),
])
def test_a_bad_config_names_the_file_and_the_field_before_anything_runs(tmp_path, capsys, text, why):
    path = tmp_path / "mine.json"
    path.write_text(text)
    for cmd in (["predict", "--model", str(path), "--gpu", "h100"], ["rank", "--model", str(path), "--budget", "1e5"]):
        code, out, err = run_cli(capsys, *cmd)
        assert code == 2 and str(path) in err and why in err and "Traceback" not in err, (cmd, err)


def test_a_huge_config_is_refused(tmp_path, capsys):
    path = tmp_path / "huge.json"
    path.write_bytes(b" " * (5 * 2**20) + b"{}")
    code, _, err = run_cli(capsys, "predict", "--model", str(path), "--gpu", "h100")
    assert code == 2 and "at most 4 MiB" in err


def test_a_dotted_model_id_in_toml_is_told_to_quote_it(tmp_path, capsys):
    text = (ROOT / "presets" / "own-runs.toml").read_text().replace('[models."llama-3.2-1b"]', "[models.llama-3.2-1b]")
    text = text.replace('[models."llama-3.2-1b".training]', "[models.llama-3.2-1b.training]")
    text = text.replace('"configs/', '"' + str(CONFIGS) + "/")
    (tmp_path / "dotted.toml").write_text(text)
    code, _, err = run_cli(capsys, "presets", "--presets", str(tmp_path / "dotted.toml"))
    assert code == 2 and '"llama-3.2-1b"' in err and "quote" in err


# --- the store keys results by the run ------------------------------------------------------------------


def test_a_version_3_file_gets_each_rows_run_from_its_stored_presets_or_the_shipped_ones(tmp_path, presets):
    path = tmp_path / "v3.duckdb"
    con = duckdb.connect(str(path))
    con.execute(store_mod._SCHEMA_V1)
    for v in (2, 3):
        con.execute(store_mod.MIGRATIONS[v])
    con.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    mine = {"training": {"batch_size": 64, "steps": 7, "precision": "bf16", "optimizer": "adamw"}, "seq_len": 128}
    con.execute("INSERT INTO presets VALUES ('r1', 'model', 'mine', ?, NULL)", [json.dumps(mine)])
    for tid, run, model in (("a", "r1", "mine"), ("b", "r2", "pythia-1b"), ("c", "r2", "nobody-knows")):
        con.execute("INSERT INTO trials (trial_id, run_id, model, gpu, num_gpus, feasible, source, days) "
                    "VALUES (?, ?, ?, 'h100', 1, true, 'measured', 5)", [tid, run, model])
    con.close()
    with Store.open(path) as s:
        assert s.schema_version == SCHEMA_VERSION >= 4
        rows = {r["trial_id"]: r for r in s.trials()}
    assert (rows["a"]["training_run"], rows["a"]["steps"]) == ("64x128 bf16 adamw", 7)
    p1b = presets.model("pythia-1b")
    assert (rows["b"]["training_run"], rows["b"]["steps"]) == (run_key(p1b), p1b.training.steps)
    assert rows["c"]["training_run"] is None  # a model no preset knows: left as it is, not guessed


def test_the_shipped_database_keys_every_known_row_by_its_run():
    from engine.data.paths import shipped_db

    with Store.open(shipped_db()) as s:
        missing = s.query("SELECT model, count(*) AS n FROM trials WHERE training_run IS NULL OR steps IS NULL "
                          "GROUP BY ALL")
        runs = {r["model"]: r["training_run"] for r in s.query("SELECT DISTINCT model, training_run FROM trials")}
    assert missing == []
    assert runs["pythia-1b"] == "1024x2049 bf16 adam" and runs["llama-3.2-1b"] == "512x2048 bf16 adamw"


# --- rank, predict and export answer for the run ---------------------------------------------------------


def test_rank_on_more_tokens_scales_every_figure_by_the_steps(capsys):
    def ranked(*extra):
        code, out, err = run_cli(capsys, "rank", "--model", "pythia-1b", "--budget", "100000", "--format", "json",
                                 *extra)
        assert code == 0, err
        return {(r["gpu"], r["num_gpus"]): r for r in json.loads(out) if r["days"] is not None}

    base, twice = ranked(), ranked("--steps", str(2 * 143_000))
    assert base.keys() == twice.keys() and len(base) > 20
    for cell, r in base.items():
        assert twice[cell]["days"] == pytest.approx(2 * r["days"]) and twice[cell]["source"] == r["source"]
        if r["days_high"] is not None:
            assert twice[cell]["days_high"] == pytest.approx(2 * r["days_high"])
        assert twice[cell]["mfu"] == pytest.approx(r["mfu"])  # the same step


def test_rank_and_predict_a_model_the_database_has_never_seen(capsys):
    cfg = str(CONFIGS / "olmo-1b.json")
    code, out, err = run_cli(capsys, "rank", "--model", cfg, "--budget", "50000", "--deadline", "30",
                             "--tokens", "100B", "--seq-len", "4096")
    assert code == 0, err
    assert "olmo-1b+b256s4096" in out and "100B tokens: 95,368 steps of 256 x 4,096" in out
    assert "Buy " in out and "pred" in out
    code, out, err = run_cli(capsys, "predict", "--model", cfg, "--gpu", "h100", "--format", "json",
                             "--tokens", "100B", "--seq-len", "4096")
    assert code == 0, err
    rows = json.loads(out)
    assert {r["training_run"] for r in rows} == {"256x4096 bf16 adamw"}
    best = min((r for r in rows if r["feasible"]), key=lambda r: r["days"])
    assert best["days_low"] < best["days"] < best["days_high"]


def test_export_gives_the_runs_steps_and_days(tmp_path, capsys):
    measured = ROOT / "data" / "measured" / "h100-x1-pythia-1b-causal-2026-11-23.jsonl"
    from engine.data.jsonl import import_jsonl

    db = tmp_path / "m.duckdb"
    with Store.open(db, read_only=False) as s:
        import_jsonl(s, measured)
    plans = []
    for extra in ([], ["--steps", "286000"]):
        out_dir = tmp_path / f"e{len(plans)}"
        code, out, err = run_cli(capsys, "export", "--db", str(db), "--model", "pythia-1b", "--gpu", "h100",
                                 "--num-gpus", "1", "--out", str(out_dir), *extra)
        assert code == 0, err
        plans.append(json.loads((out_dir / "plan.json").read_text()))
        args = json.loads((out_dir / "training_args.json").read_text())
        assert args["max_steps"] == plans[-1]["steps"]
    assert plans[1]["steps"] == 2 * plans[0]["steps"] and plans[1]["days"] == pytest.approx(2 * plans[0]["days"])
    assert plans[1]["trial_id"] == plans[0]["trial_id"] and "286,000 steps" in plans[1]["run"]


# --- bench measures a model from its config.json ---------------------------------------------------------


TINY_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 32,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
              "vocab_size": 256, "max_position_embeddings": 128, "tie_word_embeddings": False}


def test_bench_measures_a_config_on_your_run_and_fsdp_wraps_its_own_blocks(tmp_path):
    """No preset: the sweep and every trial read the model from the file; FSDP wraps what the model's
    _no_split_modules names (LlamaDecoderLayer), since nobody wrote fsdp_wrap."""
    cfg = tmp_path / "tiny-llama.json"
    cfg.write_text(json.dumps(TINY_LLAMA))
    db = tmp_path / "b.duckdb"
    out = subprocess.run([sys.executable, "-m", "tui_planner", "bench", "--model", str(cfg), "--device", "cpu",
                          "--methods", "all", "--exhaustive", "--only", "ckpt+fsdp2+offload", "--no-compile",
                          "--repetitions", "3", "--seq-len", "32", "--batch", "8", "--tokens", "1e6",
                          "--db", str(db)], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr + out.stdout
    assert "tiny-llama+b8s32" in out.stdout and "1M tokens: 3,907 steps of 8 x 32" in out.stdout
    with Store.open(db, read_only=True) as s:
        rows = s.trials()
    assert len(rows) == 1, rows
    r = rows[0]
    assert r["feasible"], r["failure_message"]
    assert (r["model"], r["training_run"], r["steps"]) == ("tiny-llama+b8s32", "8x32 bf16 adamw", 3907)
    assert r["sharding"] == "fsdp2" and r["activation_checkpointing"] and r["days"] > 0


def test_block_classes_come_from_the_model_when_the_preset_names_none():
    pytest.importorskip("transformers")
    import transformers

    from engine.bench.modeling import block_classes, blocks_of

    presets = load_presets([TINY])
    _, m = model_for(presets, "tiny-neox")
    net = transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**m.config))
    assert block_classes(net, m) == ("GPTNeoXLayer",)
    import dataclasses

    unnamed = dataclasses.replace(m, fsdp_wrap="")
    assert block_classes(net, unnamed) == tuple(net._no_split_modules)
    assert len(blocks_of(net, unnamed)) == 2


def test_a_longer_sequence_costs_attention_and_keeps_what_the_architecture_measured(capsys):
    def best(seq):
        code, out, err = run_cli(capsys, "predict", "--model", "pythia-1b", "--gpu", "h100", "--format", "json",
                                 "--seq-len", str(seq))
        assert code == 0, err
        return min((r for r in json.loads(out) if r["feasible"]), key=lambda r: r["days"])

    own, same, longer, longest = best(2049), best(2048), best(4098), best(8196)
    # One token less a sequence, the same tokens a step: the measured architecture's own rows still speak.
    assert same["days"] == pytest.approx(own["days"], rel=0.01)
    # Twice the sequence, the same tokens: attention's s x s products grow, so the run takes longer.
    assert own["days"] < longer["days"] < longest["days"]
    assert longest["mfu"] < own["mfu"]  # MFU counts 6·N·D, which leaves attention out


def test_a_model_id_is_read_from_the_local_hugging_face_cache_only(tmp_path, monkeypatch, presets):
    """Offline: the snapshot refs/main names, its config.json; an id the cache lacks is a message saying the
    planner downloads nothing."""
    from engine.data.runs import RunError, config_path, hf_cached_config

    hub = tmp_path / "hub"
    repo = hub / "models--lab--tiny-llama"
    for snap, layers in (("aaaa11", 2), ("bbbb22", 3)):
        (repo / "snapshots" / snap).mkdir(parents=True)
        config = json.loads((CONFIGS / "llama-3.2-1b.json").read_text()) | {"num_hidden_layers": layers}
        (repo / "snapshots" / snap / "config.json").write_text(json.dumps(config))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("aaaa11\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    assert hf_cached_config("lab/tiny-llama") == repo / "snapshots" / "aaaa11" / "config.json"
    _, m = model_for(presets, "lab/tiny-llama")
    assert m.config["num_hidden_layers"] == 2 and m.id == "tiny-llama"
    assert hf_cached_config("../../etc") is None
    with pytest.raises(RunError, match="downloads nothing"):
        config_path("lab/not-here")
