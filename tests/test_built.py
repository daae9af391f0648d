"""A model described by building it on the meta device (engine/data/built.py): for every family the
hand-written describer does not know (MPT, OPT, Falcon, GPTBigCode, T5, BART, ModernBERT, DeBERTa, and the
mixtures of experts Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, DeepSeek-V3), from small config.json files in
tests/fixtures/configs/ (nothing downloaded). Parameter counts equal transformers' own to the parameter; FLOPs
per token are within 3% of 6 x the active matrix parameters, and attention's within 3% of 12 x layers x
heads x head size per s^2; a config that cannot be built is a message naming the file and the field."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from engine.data import built, counting, describer
from engine.data.architecture import ArchitectureError, describe, describe_or_build, from_built

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

FIXTURES = ROOT / "tests" / "fixtures" / "configs"
DECODERS = ["mpt", "opt", "falcon", "gpt_bigcode", "llama", "olmoe", "mixtral", "qwen2_moe", "qwen3_moe"]
MOE = ["olmoe", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3"]
ALL = sorted(p.stem for p in FIXTURES.glob("*.json"))


def _config(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


_DESCRIBED: dict[str, dict] = {}


def _described(name: str) -> dict:
    if name not in _DESCRIBED:
        _DESCRIBED[name] = describer.describe_by_building(_config(name))
    return _DESCRIBED[name]


def _transformers_own(name: str):
    """The model transformers builds from the fixture, by the class its `architectures` names."""
    config = _config(name)
    cfg = transformers.AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items()
                                                                    if k != "model_type"})
    cls = getattr(transformers, config["architectures"][0])
    with torch.device("meta"):
        return cls(cfg)


@pytest.mark.parametrize("name", ALL)
def test_the_built_parameter_count_is_transformers_own(name):
    d = _described(name)
    net = _transformers_own(name)
    assert d["hf_class"] == type(net).__name__
    assert d["params"] == net.num_parameters()
    assert d["block_class"] in (net._no_split_modules or {"DebertaV2Layer"}) and d["layers"] >= 2


@pytest.mark.parametrize("name", DECODERS)
def test_decoder_flops_per_token_are_6_x_active_matrix_parameters_and_attention(name):
    d = _described(name)
    a, b = d["flops"]
    matmul = d["active_params"] - d["embedding_params"] + (d["vocab"] * d["hidden"] if d["tied"] else 0)
    assert a == pytest.approx(6 * matmul, rel=0.03), d["flops_source"]
    assert b == pytest.approx(12 * d["layers"] * d["heads"] * d["head_dim"], rel=0.03)
    assert d["flops_source"].startswith("counted by torch's FLOP formulas")


@pytest.mark.parametrize("name", ["llama", "olmoe", "t5", "modernbert"])
def test_the_counter_totals_what_flopcountermode_totals(name):
    # The worker's counter is FlopCounterMode without its per-module counts: the same formulas, the same totals.
    from torch.utils.flop_counter import FlopCounterMode

    cfg, _, kind, net, _ = describer._build(_config(name))
    length = [(64, 32)]
    ours = counting._count_each(net, kind, length)
    real = counting._counter
    try:
        counting._counter = lambda: FlopCounterMode(display=False)
        theirs = counting._count_each(net, kind, length)
    finally:
        counting._counter = real
    assert ours == theirs and ours[0] > 0


@pytest.mark.parametrize("name", MOE)
def test_a_mixture_of_experts_counts_the_experts_a_token_reaches(name):
    d = _described(name)
    net = _transformers_own(name)
    experts = sum(p.numel() for n, m in net.named_modules() if n.endswith(".experts") for p in m.parameters())
    E, k = d["experts"], d["experts_per_token"]
    assert E > k >= 1 and d["expert_params"] == experts
    assert d["active_params"] == d["params"] - experts * (E - k) // E
    assert d["active_params"] < d["params"]
    arch = from_built(d)
    assert arch.active == d["active_params"] and "experts" in arch.summary()


def test_olmoe_active_parameters_by_hand():
    c = _config("olmoe")
    h, f, L, E, k = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_experts"], c["num_experts_per_tok"]
    d = _described("olmoe")
    assert d["params"] - d["active_params"] == L * (E - k) * 3 * h * f


@pytest.mark.parametrize("name, objective, decoder_layers", [("t5", "seq2seq-lm", 2), ("bart", "seq2seq-lm", 2),
                                                               ("modernbert", "masked-lm", 0),
                                                               ("deberta-v2", "masked-lm", 0)])
def test_encoders_and_encoder_decoders_say_what_they_train(name, objective, decoder_layers):
    d = _described(name)
    assert d["objective"] == objective and d["decoder_layers"] == decoder_layers
    if objective == "seq2seq-lm":
        a_s, a_t, b_s, b_t, b_x = d["flops"]
        # the encoder's blocks run on the input, the decoder's and the LM head on the target
        assert a_s > 0 and a_t > a_s and b_s > 0 and b_t > 0 and b_x > 0


@pytest.mark.parametrize("path", [FIXTURES / "llama.json", ROOT / "presets" / "configs" / "llama-3.2-1b.json",
                                  ROOT / "presets" / "configs" / "qwen2.5-1.5b.json",
                                  ROOT / "presets" / "configs" / "olmo-1b.json"], ids=lambda p: p.stem)
def test_the_hand_written_describer_agrees_with_the_built_model(path):
    """The fast path (no torch) against the model built from the same config: the same parameters, shape,
    and 6 x its matrix parameters within 3% of the FLOPs counted per token."""
    config = json.loads(path.read_text())
    d = describer.describe_by_building(config)
    a = describe(config, path.name)
    assert not a.built and a.params == d["params"] and a.embedding_params == d["embedding_params"]
    assert (a.layers, a.hidden, a.heads, a.kv_heads, a.head_dim) == (d["layers"], d["hidden"], d["heads"],
                                                                    d["kv_heads"], d["head_dim"])
    matmul = a.params - a.embedding_params + (a.vocab * a.hidden if a.tied else 0)
    assert d["flops"][0] == pytest.approx(6 * matmul, rel=0.03)
    assert d["flops"][1] == pytest.approx(12 * a.layers * a.heads * a.head_dim, rel=0.03)


def test_deepseek_latent_attention_and_shared_experts_count_as_active():
    d = _described("deepseek_v3")
    matmul = d["active_params"] - d["embedding_params"]
    assert d["flops"][0] == pytest.approx(6 * matmul, rel=0.03) and d["shared_ffn"] == 32


def _deeper(config: dict, more: int) -> dict:
    """The same model with `more` blocks more in each of its stacks."""
    keys = built.SIZE_LIMITS["layers"][0]
    return {k: v + more if k in keys and isinstance(v, int) else v for k, v in config.items()}


@pytest.mark.parametrize("name, change", [(n, {}) for n in ALL] + [
    ("qwen2_moe", {"mlp_only_layers": [1, 4]}),  # dense blocks between the experts' (not only leading ones)
    ("deepseek_v3", {"first_k_dense_replace": 3}),
], ids=lambda x: x if isinstance(x, str) else ",".join(x) or "-")
def test_counting_by_blocks_is_counting_the_whole_model(name, change):
    """The FLOPs counted with a few blocks and the rest added by difference (the fast path) equal those of the
    whole model, at every length, for every fixture with a few blocks more."""
    config = {**_deeper(_config(name), 3), **change}
    cfg, auto, kind, net, _ = describer._build(config)
    names, lengths = describer._block_names(net), describer.LENGTHS[kind]
    fast = describer._counted(cfg, auto, kind, net, names, lengths, whole=False)
    assert fast == pytest.approx(describer._counted(cfg, auto, kind, net, names, lengths, whole=True), rel=1e-9)


@pytest.mark.parametrize("change, field", [
    ({"auto_map": {"AutoModelForCausalLM": "modeling_x.X"}}, "auto_map"),
    ({"trust_remote_code": True}, "trust_remote_code"),
    ({"n_layers": 1_000_000}, "n_layers"),
    ({"vocab_size": 10**12}, "vocab_size"),
    ({"d_model": "wide"}, "d_model"),
    ({"d_model": 100_000, "n_layers": 1000}, "parameters"),
    ({"model_type": "no_such_model"}, "model_type"),
    ({"model_type": None}, "model_type"),
])
def test_a_config_that_cannot_be_built_names_the_field_and_builds_nothing(change, field):
    config = {**_config("mpt"), **change}
    with pytest.raises(built.BuildError) as e:
        built.check(config, "my/config.json") if field != "model_type" or change["model_type"] is None \
            else describer.describe_by_building(config)
    assert field in str(e.value)


def test_a_config_transformers_refuses_is_a_message():
    with pytest.raises(built.BuildError) as e:
        describer.describe_by_building({**_config("t5"), "feed_forward_proj": "no-such-activation"})
    assert "transformers refuses" in str(e.value)


def test_a_build_is_cached_by_the_config_and_read_back_without_torch(tmp_path, monkeypatch):
    """One real build in its own process; then a fresh interpreter describes the model from the cache alone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = {**_config("olmoe"), "_name_or_path": "someone/olmoe-tiny"}
    with pytest.raises(ArchitectureError, match="building it"):
        describe(config, "olmoe.json")  # not built yet
    arch = describe_or_build(config, "olmoe.json")
    assert arch.built and arch.experts == 8 and arch.params == _described("olmoe")["params"]
    cached = list((tmp_path / "tui-planner" / "described").glob("*.json"))
    assert len(cached) == 1
    # the same values without their private keys (as a preset holds them) hit the same entry
    assert built.cached({k: v for k, v in config.items() if not k.startswith("_")}) is not None
    code = (f"import sys, json; sys.path.insert(0, {str(ROOT)!r})\n"
            "from engine.data.architecture import describe\n"
            f"a = describe(json.loads({json.dumps(json.dumps(config))}), 'x')\n"
            "print(a.active, a.params, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    active, params, loaded = out.stdout.split(" ", 2)
    assert int(active) == arch.active and int(params) == arch.params and loaded.strip() == "[]"


def test_a_build_that_fails_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ArchitectureError) as e:
        describe_or_build({"model_type": "no_such_model", "hidden_size": 8}, "their/config.json")
    assert str(e.value).startswith("their/config.json: ") and "no_such_model" in str(e.value)
    assert not list(tmp_path.rglob("described/*.json"))  # nothing described


@pytest.fixture
def built_cache(tmp_path, monkeypatch):
    """The fixtures' descriptions in a cache of the test's own, as a build would leave them (no process)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def put(name: str):
        config = _config(name)
        path = built._path_for(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**_described(name), "version": built.VERSION}))
        return FIXTURES / f"{name}.json"

    return put


def test_a_mixture_of_experts_is_costed_on_its_active_parameters_and_held_whole(built_cache):
    from engine.data.presets import load_presets
    from engine.data.runs import model_for
    from engine.data.space import Methods
    from engine.predict import memory, terms

    path = built_cache("olmoe")
    presets, model = model_for(load_presets(include_user=False), str(path))
    d = _described("olmoe")
    s = memory.shape(model)
    assert (s.params, s.active_params, s.experts) == (d["params"], d["active_params"], 8)
    static = memory.static_terms(model, Methods(free_lunch=True), 1)
    assert static["weights fp32"] == 4 * d["params"]  # every expert's weights, on every GPU
    per_sample = model.flops_per_step / model.training.batch_size
    assert per_sample == pytest.approx(d["flops"][0] * model.seq_len)  # the counted, active FLOPs
    assert terms.compute_flops_per_sample(model) == pytest.approx(
        terms.MOE_COMPUTE_FACTOR * (per_sample + d["flops"][1] * model.seq_len ** 2))
    lines = terms.moe_lines(model, 4, 8)
    assert "no expert parallelism" in " ".join(lines) and "unmeasured" in " ".join(lines)
    measured = " ".join(terms.moe_lines(model, 4, 8, own=True))  # its own rows set its speed: not "unmeasured"
    assert "unmeasured" not in measured and "1.5x apart" in measured
    # Why a sharding's path sets its speed is said either way: the expert products run in the weights' dtype.
    assert all("in the weights' dtype, outside autocast" in t for t in (measured, " ".join(lines)))
    assert terms.expert_parallel_bytes(model, 4, 1) == 0 < terms.expert_parallel_bytes(model, 4, 8)
    assert "active" in model.training_flops_source


def test_an_encoder_decoder_run_counts_input_tokens_and_says_its_target(built_cache):
    from engine.data.presets import load_presets
    from engine.data.runs import RunFlags, describe_run, model_for, run_key
    from engine.predict import terms

    path = built_cache("t5")
    _, model = model_for(load_presets(include_user=False), str(path))
    assert model.objective == "seq2seq-lm" and model.hf_class == "T5ForConditionalGeneration"
    assert (model.seq_len, model.target_len) == (512, 128)
    assert "512 in + 128 target" in describe_run(model) and "input tokens" in describe_run(model)
    a_s, a_t, b_s, b_t, b_x = _described("t5")["flops"]
    assert terms.attention_flops_per_sample(model) == pytest.approx(b_s * 512**2 + b_t * 128**2 + b_x * 512 * 128)
    _, longer = model_for(load_presets(include_user=False), str(path), RunFlags(seq_len=1024))
    assert longer.target_len == 256 and "+256" in run_key(longer)  # the target keeps its share of the input


@pytest.mark.parametrize("name", ["olmoe", "t5", "modernbert", "falcon"])
def test_a_built_model_gets_a_prediction_on_several_gpus_and_a_ranking(built_cache, capsys, name):
    from tui_planner.cli import main

    path = str(built_cache(name))
    assert main(["predict", "--model", path, "--gpu", "h100", "--num-gpus", "2", "--methods", "free-lunch"]) == 0
    out = capsys.readouterr().out
    assert "free-lunch" in out and "days" in out
    assert ("mixture of experts" in out) == (name == "olmoe")
    assert main(["rank", "--model", path, "--budget", "100000"]) == 0
    out = capsys.readouterr().out
    assert "pred" in out and ("input tokens" in out) == (name == "t5")


# --- the build worker: its imports trimmed, its counting on two cores, begun early, run again plain ----------

def _worker(name: str, tmp_path, trimmed: bool = True) -> dict:
    """What the worker process says of a fixture, with what it imported: as built.build runs it."""
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(ROOT), **({} if trimmed else {"TUI_PLANNER_PLAIN_BUILD": "1"})}
    code = ("import json, sys\n"
            "from engine.data import describer\n"
            f"describer._main([{str(FIXTURES / (name + '.json'))!r}])\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('torch._dynamo.', 'torch.distributed.'))"
            " and sys.modules[m] is not None)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                         cwd=tmp_path)
    desc, loaded = out.stdout.strip().splitlines()[-2:]
    return {**json.loads(desc), "loaded": json.loads(loaded)}


@pytest.mark.parametrize("name", ["olmoe", "t5"])
def test_the_trimmed_worker_describes_as_the_plain_build_and_leaves_the_compiler_out(name, tmp_path):
    """The worker's description, imports trimmed and counts shared with a forked copy, is the one built here
    plainly (all imports, one process), to the FLOP; and the compiler and torch.distributed stayed out."""
    said = _worker(name, tmp_path)
    loaded = said.pop("loaded")
    assert said == _described(name)
    assert not [m for m in loaded if m.startswith(("torch._dynamo.convert", "torch._dynamo.symbolic",
                                                   "torch.distributed.tensor", "torch.distributed.fsdp"))]
    tables = list((tmp_path / "tui-planner" / "imports").glob("*.json"))
    assert tables  # transformers' table of its modules, remembered for the next build


def test_a_build_that_fails_trimmed_is_built_again_plain_and_its_refusals_are_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = []
    job = built._Job

    class Counted(job):
        def __init__(self, payload, plain):
            runs.append(plain)
            super().__init__(payload, plain)

    monkeypatch.setattr(built, "_Job", Counted)
    # A model type transformers does not know: the same whichever way it is built, said after one run.
    with pytest.raises(built.BuildError, match="not a model type transformers"):
        built.build({**_config("t5"), "model_type": "no_such_model"}, "t5.json")
    assert runs == [False]
    # A build that fails trimmed (here: its imports hidden with the optional packages) is run again plain.
    runs.clear()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the worker's sitecustomize: torch hidden when trimmed
    (tmp_path / "sitecustomize.py").write_text(
        "import os, sys\nif not os.environ.get('TUI_PLANNER_PLAIN_BUILD'):\n    sys.modules['torch'] = None\n")
    d = built.build(_config("llama"), "llama.json")
    assert runs == [False, True] and d["params"] == _described("llama")["params"]


@pytest.fixture
def no_builds_left():
    """Whatever a test began and did not wait for is stopped after it (as at exit), not left to the next test."""
    yield
    built._stop_started()


def test_a_build_begun_early_is_the_one_waited_for_and_one_never_asked_for_is_stopped(tmp_path, monkeypatch,
                                                                                     no_builds_left):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    config = _config("falcon")
    assert built.start(config, "falcon.json")
    job = built._STARTED[built._payload(config)]
    assert built.build(config, "falcon.json")["params"] == _described("falcon")["params"]
    assert job.proc.returncode == 0 and not built._STARTED  # that process, not a second one
    assert not built.start(config, "falcon.json")  # cached now: nothing to begin
    assert not built.start({**config, "num_hidden_layers": 10 ** 7}, "falcon.json")  # refused: build() says why
    other = {**config, "hidden_size": 128}
    assert built.start(other, "falcon.json")
    left = built._STARTED[built._payload(other)]
    built._stop_started()  # as at exit
    assert left.proc.poll() is not None and not built._STARTED and not __import__("os").path.exists(left.tmp)


def test_the_cli_begins_a_build_only_for_a_config_that_needs_one(tmp_path, monkeypatch, no_builds_left):
    from engine.data.runs import start_describing

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    begun = []
    monkeypatch.setattr(built, "start", lambda config, where: begun.append(config["model_type"]) or True)
    start_describing("pythia-1b")  # a preset
    start_describing(str(FIXTURES / "llama.json"))  # a family described by hand
    start_describing(str(tmp_path / "missing.json"))  # said later, by model_for
    start_describing(str(FIXTURES / "opt.json"))
    assert begun == ["opt"]


def test_transformers_table_of_modules_reads_back_as_it_was_scanned(tmp_path):
    from transformers.utils import import_utils

    from engine.data import lean

    folder = str(tmp_path / "models")  # a folder of the test's own: its time is the key's
    (tmp_path / "models").mkdir()
    tables = tmp_path / "tables"
    table = import_utils.create_import_structure_from_path(str(Path(transformers.__file__).parent / "models" / "t5"))
    assert table and lean._decode(json.loads(json.dumps(lean._encode(table)))) == table
    scans = []

    class Utils:  # the two names _remember_table reads of transformers.utils.import_utils
        __file__ = import_utils.__file__

        @staticmethod
        def create_import_structure_from_path(path):
            scans.append(path)
            return {"x": {frozenset({"torch"}): {"modeling_x": {"X"}}}}

    for _ in range(2):  # a second process: read from the file, not scanned
        utils = Utils()
        lean._remember_table(utils, tables)
        assert utils.create_import_structure_from_path(folder) == {"x": {frozenset({"torch"}): {"modeling_x": {"X"}}}}
        assert utils.create_import_structure_from_path(folder) is not None
    assert scans == [folder]
    for path in tables.glob("*.json"):
        path.write_text('{"d": [["x", {"s": [1]}]]}')  # not a table: scanned again
    utils = Utils()
    lean._remember_table(utils, tables)
    utils.create_import_structure_from_path(folder)
    assert scans == [folder, folder]


def test_an_unsharded_mixture_of_experts_recipe_says_its_experts_run_in_fp32(built_cache):
    from engine.data.presets import load_presets
    from engine.data.runs import model_for
    from engine.recipe import export

    presets, model = model_for(load_presets(include_user=False), str(built_cache("olmoe")))
    row = {"trial_id": "t", "model": model.id, "gpu": "h200", "num_gpus": 2, "num_nodes": 1, "micro_batch": 1,
           "grad_accum": model.training.batch_size // 2, "free_lunch": True, "tf32": True, "compile": True,
           "activation_checkpointing": False, "sharding": "none", "offloading": False}
    said = {}
    for sharding in ("none", "zero2", "fsdp2"):
        notes: list[str] = []
        export.training_args({**row, "sharding": sharding}, model, "cuda", notes)
        said[sharding] = any("expert products" in n for n in notes)
    assert said == {"none": True, "zero2": False, "fsdp2": False}
    dense = presets.model("pythia-160m")
    notes = []
    export.training_args({**row, "model": dense.id, "grad_accum": dense.training.batch_size // 2}, dense, "cuda", notes)
    assert not any("expert products" in n for n in notes)


def test_the_cli_begins_building_before_it_makes_its_parser(monkeypatch):
    # The build is begun from the raw arguments, before the parser (a sixth of a second) is made; nothing for --help
    # or for a command that takes no model, and a broken argument list is the parser's to say.
    import engine.data.runs as runs
    from tui_planner import cli

    begun = []
    monkeypatch.setattr(runs, "start_describing", begun.append)
    for argv in (["predict", "--model", "a.json", "--gpu", "h100"], ["--db", "x.duckdb", "rank", "--model=b.json"],
                 ["predict", "--model", "c.json", "--help"], ["results", "--model", "d.json"], ["predict", "--model"],
                 ["bench", "--db", "export", "--model", "e.json"], ["predict", "--model", "--gpu", "h100"],
                 ["export", "--model", "f.json", "--model", "g.json"], ["predict", "--", "--model", "h.json"]):
        cli._start_building_early(argv)
    assert begun == ["a.json", "b.json", "g.json"]  # the last --model, as argparse takes it


def test_layerdrop_skips_no_layer_while_counting():
    # M2M-100's config drops 5% of its layers at random in training mode (layerdrop): a count would miss some.
    base = {"model_type": "m2m_100", "architectures": ["M2M100ForConditionalGeneration"], "d_model": 32,
            "encoder_layers": 3, "decoder_layers": 3, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
            "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 200, "max_position_embeddings": 256}
    dropping = describer.describe_by_building({**base, "encoder_layerdrop": 0.5, "decoder_layerdrop": 0.5})
    whole = describer.describe_by_building({**base, "encoder_layerdrop": 0.0, "decoder_layerdrop": 0.0})
    assert dropping["flops"] == whole["flops"] and all(x >= 0 for x in whole["flops"]) and whole["flops"][0] > 0


def test_building_leaves_transformers_own_initialisation_alone():
    # transformers copies torch's init functions when its initialization module first loads; were that inside the
    # build's no-op window, every later model of the process would keep its values uninitialised.
    import subprocess
    import sys

    code = ("import json; from engine.data import describer; import torch, transformers; "
            f"c = json.load(open({str(FIXTURES / 'llama.json')!r})); c.pop('architectures', None); "
            "describer.describe_by_building(c); "
            "cfg = transformers.LlamaConfig(**{k: v for k, v in c.items() if k != 'model_type'}); "
            "torch.manual_seed(0); net = transformers.LlamaForCausalLM(cfg); "
            "print(float(net.model.layers[0].self_attn.q_proj.weight.std()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-2000:]
    assert abs(float(out.stdout.split()[-1]) - 0.02) < 0.005  # the config's initializer_range, not torch's default
