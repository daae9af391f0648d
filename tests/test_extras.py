"""Issue 42's methods beyond the paper (fused: liger-kernel; fp8: torchao float8), on the CPU: the search
space, why they cannot run here (said, no row), the float8 swap run for real in torchao's emulation, the
generic fused loss against transformers' own, and the numerics run end to end into a row's details."""

import json
from dataclasses import replace
import subprocess
import sys
import types

import pytest

from conftest import ROOT, TINY
from engine.bench import events as ev
from engine.data import space
from engine.data.presets import load_presets
from engine.data.space import Methods


def test_the_extras_are_opt_in_and_combine_with_every_free_lunch_point():
    assert [len(space.search_space("all", n)) for n in (1, 2)] == [13, 23]  # the paper's space is unchanged
    one = space.search_space("all", 1, ("fused", "fp8"))
    labels = [m.label for m in one]
    assert labels[:5] == ["naive", "free-lunch", "fused", "fp8", "fused+fp8"]
    assert "fused+ckpt+zero3+offload" in labels and not any("fp8" in lbl and "zero" in lbl for lbl in labels)
    assert not any(m.extras and not m.free_lunch for m in one)
    assert len(set(labels)) == len(labels)
    for m in space.search_space("all", 4, ("fused", "fp8")):  # every label names its point, and back
        assert space.by_label(m.label) == m
    assert [m.label for m in space.search_space("free-lunch", 1, ("fp8",))] == ["naive", "free-lunch", "fp8"]
    assert Methods(fp8=True).changes_numerics and not Methods(fused=True).changes_numerics
    assert not space.is_valid(Methods(free_lunch=False, fused=True), 1)
    with pytest.raises(ValueError, match="'int8' is not one of the extra methods"):
        space.search_space("all", 1, ("int8",))


def test_why_an_extra_cannot_run_is_said_per_method(monkeypatch):
    from engine.bench import fast

    both = Methods(fused=True, fp8=True)
    cpu = fast.unavailable(both, "cpu")
    assert "fused: liger-kernel's Triton kernels need a CUDA GPU" in cpu and "fp8: " in cpu and "on the CPU" in cpu
    assert fast.unavailable(Methods(fp8=True), "cuda", "NVIDIA A100-SXM4-80GB", "8.0") == (
        "infeasible: no FP8 tensor cores (NVIDIA A100-SXM4-80GB: compute capability 8.0; FP8 needs 8.9 or later)")
    assert fast.unavailable(Methods(fp8=True), "cuda", "L40S", "8.9") is None
    assert fast.unavailable(both, "cuda", "H100", "9.0") is None
    assert fast.unavailable(Methods(fused=True), "cuda", "A100", "8.0") is None  # liger needs no FP8
    real = fast.importlib.util.find_spec
    monkeypatch.setattr(fast.importlib.util, "find_spec", lambda name: None if name == "torchao" else real(name))
    assert fast.unavailable(both, "cuda", "H100", "9.0") == (
        "fp8: torchao is not installed (pip install 'tui-planner[bench]')")


def test_a_cpu_sweep_says_why_it_skips_the_extras_and_writes_no_row_for_them(tmp_path):
    from engine.bench.sweep import SweepRequest, run_sweep
    from engine.data.store import Store

    seen = []
    req = SweepRequest(model="tiny-neox", device="cpu", presets=(TINY,), methods="free-lunch",
                       only=("fused", "fp8", "fused+fp8"), db=tmp_path / "x.duckdb")
    run_sweep(req, on_event=seen.append)
    done = {e.label: e for e in seen if isinstance(e, ev.TrialFinished)}
    assert set(done) == {"fused", "fp8", "fused+fp8"} and {e.status for e in done.values()} == {"unavailable"}
    assert "need a CUDA GPU" in done["fused"].message and "FP8 tensor cores" in done["fp8"].message
    assert not any(isinstance(e, (ev.BatchTried, ev.Measuring)) for e in seen)  # nothing launched
    with Store.open(req.db) as s:
        assert s.trials() == []
        assert s.runs()[0]["command"].endswith("--only fused fp8 fused+fp8")  # which implies the extras


@pytest.fixture(scope="module")
def tiny():
    return load_presets((TINY,)).model("tiny-neox")


def _net(model, seed=0):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = getattr(transformers, model.config_class)(**dict(model.config))
    return getattr(transformers, model.hf_class)(config)


def test_fp8_swaps_the_linear_layers_but_the_head_and_trains_in_torchaos_emulation(tiny):
    import torch

    from engine.bench import fast

    pytest.importorskip("torchao")
    ids = torch.randint(0, tiny.vocab_size, (2, tiny.seq_len), generator=torch.Generator().manual_seed(1))
    ref = _net(tiny)(input_ids=ids, labels=ids).loss
    net = _net(tiny)
    done = fast.apply_fp8(net, emulate=True)
    assert all(m.config.pad_inner_dim for m in net.modules() if type(m).__name__ == "Float8Linear")
    assert done["linears"] == 8 and done["of"] == 9 and len(done["kept_16bit"]) == 1 and done["kept_16bit"][0].endswith(" (output head)")
    loss = net(input_ids=ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss) and loss.item() != ref.item()  # float8 rounding: close, not the same
    assert loss.item() == pytest.approx(ref.item(), rel=0.01)
    assert all(p.grad is not None for p in net.parameters() if p.requires_grad)


def test_the_generic_fused_loss_is_transformers_own_loss_without_the_logits(tiny, monkeypatch):
    """GPT-NeoX is not in liger-kernel's list: apply_fused's own patch computes the loss inside the head's call
    from the hidden states and the head's weight. With a plain matrix product in place of liger's Triton kernel
    and torch's LayerNorm kept (no GPU here), the shifted labels and the mean come out as transformers' own loss,
    in fp32 and under bf16 autocast with fp32 weights (as the trials run)."""
    import torch

    import liger_kernel.transformers as lt
    from engine.bench import fast

    class Plain(torch.nn.Module):
        def __init__(self, ignore_index=-100):
            super().__init__()
            self.ignore_index = ignore_index

        def forward(self, w, h, y, b=None):
            return torch.nn.functional.cross_entropy(h @ w.t() + (0 if b is None else b), y,
                                                     ignore_index=self.ignore_index)

    monkeypatch.setattr(lt, "LigerFusedLinearCrossEntropyLoss", Plain)
    monkeypatch.setattr(fast, "_swap_layer_norms", lambda net: 0)
    ids = torch.randint(0, tiny.vocab_size, (3, tiny.seq_len), generator=torch.Generator().manual_seed(2))
    labels = ids.clone()
    labels[1, :10] = -100  # ignored positions count in neither
    ref, net = _net(tiny), _net(tiny)
    done = fast.apply_fused(net, "causal-lm")
    assert done["covers"] == ["fused_linear_cross_entropy"]
    calls = []
    net.get_output_embeddings().register_forward_pre_hook(lambda mod, args: calls.append(args[0].shape))
    assert net(input_ids=ids, labels=labels).loss.item() == pytest.approx(ref(input_ids=ids, labels=labels).loss.item(),
                                                                          rel=1e-6)
    assert calls == [torch.Size([3 * tiny.seq_len, tiny.config["hidden_size"]])]  # in the head's call: ZeRO gathers it
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = ref(input_ids=ids, labels=labels).loss, net(input_ids=ids, labels=labels).loss
    assert got.item() == pytest.approx(want.item(), rel=2e-2) and torch.isfinite(got)


def test_fused_says_what_it_covers_and_what_it_leaves(tiny):
    from engine.bench import fast

    pytest.importorskip("liger_kernel")
    net = _net(tiny)
    done = fast.apply_fused(net, "causal-lm")
    assert done["covers"] == ["layer_norm x5", "fused_linear_cross_entropy"]  # 2 blocks x 2 + the final norm
    assert any("gelu" in part for part in done["not_covered"]) and any("rotary" in p for p in done["not_covered"])
    assert type(net.gpt_neox.final_layer_norm).__name__ == "LigerLayerNorm"
    # torch.compile leaves liger's fused loss untraced (Dynamo cannot trace its in-place addmm on torch 2.11)
    from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction as Flce
    assert getattr(Flce.apply, "_torchdynamo_disable", False)
    # A model type liger-kernel knows goes through its own function, which patches module classes for the
    # whole process: in a process of its own.
    code = ("import transformers\nfrom engine.bench import fast\n"
            "c = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, "
            "num_attention_heads=4, vocab_size=128)\n"
            "print(fast.apply_fused(transformers.LlamaForCausalLM(c), 'causal-lm'))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    shown = out.stdout.strip().splitlines()[-1]
    assert "apply_liger_kernel_to_llama" in shown and "'rms_norm'" in shown and "'swiglu'" in shown \
        and "'fused_linear_cross_entropy'" in shown


def test_the_numerics_run_is_stored_on_the_methods_rows_and_shown_in_their_details(tmp_path, tiny):
    pytest.importorskip("torchao")
    from engine.bench import numerics
    from engine.data.store import Store, Trial
    from tui_planner.app import details

    result = numerics.compare(tiny, Methods(fp8=True), steps=12, micro_batch=2, seq_len=32, device="cpu")
    assert result["method"] == "fp8" and result["fp8_emulated"] and result["steps"] == 12
    assert result["loss_method"] < result["start_loss"] and result["loss_baseline"] < result["start_loss"]  # it learns
    assert abs(result["gap"]) < 0.05 and abs(result["largest_gap"]) < 0.05 and result["gap"] != 0  # measured, small
    assert result["fp8"]["linears"] == 8 and len(result["curve_method"]) == len(result["curve_baseline"])
    assert "padded" in result["fp8"]["recipe"]
    # the noise floor: bf16 again from another initialisation, on the same batches
    assert result["loss_other_init"] < result["start_loss"] and result["noise"] != 0
    assert result["curve_other_init"][0] != result["curve_baseline"][0]  # another initialisation: another first loss
    assert len(result["curve_other_init"]) == len(result["curve_baseline"]) == 12  # every step kept
    # the second half, paired step by step: recomputable from the stored curves
    assert result["paired_from_step"] == 7
    assert result["gap_paired"] == pytest.approx(numerics.paired_gap(result["curve_baseline"], result["curve_method"], 6)[0])
    low, high = result["gap_paired_95"]
    assert low < result["gap_paired"] < high and result["gap_within_1pct"] == numerics.within(low, high)
    assert result["noise_within_1pct"] in ("under", "over", "not resolved")
    db = tmp_path / "n.duckdb"
    with Store.open(db) as s:
        s.add_trial(Trial(model="tiny-neox", gpu="h100", num_gpus=1, feasible=True, source="measured", fp8=True,
                          free_lunch=True, sharding="none"))
        s.add_trial(Trial(model="tiny-neox", gpu="h100", num_gpus=1, feasible=True, source="measured",
                          free_lunch=True, sharding="none"))
        assert s.set_numerics("tiny-neox", False, True, json.dumps(result)) == 1
        rows = s.trials()
    fp8_row = next(r for r in rows if r["fp8"])
    assert next(r for r in rows if not r["fp8"])["numerics"] is None
    words = "\n".join(details.settings_lines(fp8_row))
    assert "changes numerics" in words and "loss vs bf16" in words and "after 12 steps" in words
    assert "[fp8 emulated on the CPU]" in words and "bf16 from another init" in words
    assert "from step 7, step by step: method" in words and "1%" in words
    # the verdict shown is worked out from the interval, never the file's word; an interval that is not one is refused
    forged = details.numerics_words(json.dumps({**result, "gap_within_1pct": "[b]under[/b]", "gap_paired_95": [1, 2],
                                                "gap_paired": 1.5}))
    assert "[b]" not in forged and "method +150.0% (+100.0% to +200.0%, 95%): over 1%" in forged
    for bad in ({"gap_paired_95": "12"}, {"gap_paired_95": [0.5, 0.1]}, {"paired_from_step": 1e400},
                {"noise_paired_95": [float("nan"), 1]}):
        assert "not measured" in details.numerics_words(json.dumps({**result, **bad}))
    assert "not measured (tui-planner numerics" in details.numerics_words("{\"loss_method\": \"[b]x\"}")
    # under FSDP, how the fp8 weights were gathered (float8 since 2026-11-28; 16 bits before, and with offload)
    sharded = {**fp8_row, "sharding": "fsdp3", "provenance": json.dumps({"fp8": {"recipe": "tensorwise", "all_gather": "float8"}})}
    assert "FSDP gathers the weights in float8" in "\n".join(details.settings_lines(sharded))
    older = {**sharded, "provenance": json.dumps({"fp8": {"recipe": "tensorwise"}})}
    assert "FSDP gathers the weights in 16 bits" in "\n".join(details.settings_lines(older))
    assert "FSDP gathers" not in words  # not sharded: nothing to say
    predicted = {**older, "source": "predicted", "provenance": json.dumps({"predicted": True})}
    assert "FSDP gathers the weights in float8" in "\n".join(details.settings_lines(predicted))  # as the engine runs it
    assert "FSDP gathers" not in "\n".join(details.settings_lines({**predicted, "source": "paper"}))  # nothing recorded


def test_the_numerics_runs_side_by_side_lose_the_same_as_one_after_another(tiny):
    """Three or more cards: each run in a process of its own (spawned, as on a GPU host), the same losses to the
    bit; a fourth card adds the method from the other initialisation, its gap read against that bf16 run."""
    pytest.importorskip("torchao")
    import multiprocessing

    from engine.bench import numerics
    from tui_planner.app import details

    kw = dict(steps=10, micro_batch=2, seq_len=32, device="cpu")
    one = numerics.compare(tiny, Methods(fp8=True), **kw)
    four = numerics.compare(tiny, Methods(fp8=True), cards=[None] * 4, **kw)
    for curve in ("curve_baseline", "curve_method", "curve_other_init"):
        assert four[curve] == one[curve]
    assert one["side_by_side"] == 0 and four["side_by_side"] == 4 and "gap_other_init" not in one
    again = four["curve_method_other_init"]
    assert len(again) == len(four["curve_other_init"]) and again != four["curve_method"]
    assert again[0] != four["curve_other_init"][0] or again[1:] != four["curve_other_init"][1:]  # fp8, not bf16
    assert "fp8 against bf16 from that initialisation" in numerics.sentence(four)
    assert not multiprocessing.active_children()
    with pytest.raises(ValueError, match="side by side needs three"):
        numerics.compare(tiny, Methods(fp8=True), cards=[None, None], **kw)
    # another learning rate: said, and it changes the run
    slow = numerics.compare(tiny, Methods(fp8=True), lr=tiny.training.lr / 10, **kw)
    assert slow["lr"] == tiny.training.lr / 10 and slow["lr_own"] is False and "lr_own" not in one
    assert slow["curve_baseline"][0] == one["curve_baseline"][0] and slow["curve_baseline"][-1] != one["curve_baseline"][-1]
    assert f"at learning rate {tiny.training.lr / 10:g}" in numerics.sentence(slow)
    assert f"at lr {tiny.training.lr / 10:g}" in details.numerics_words(json.dumps(slow))


def test_a_paired_gap_says_under_1pct_only_where_its_interval_is():
    """The paired gap's 95% interval comes from blocks of steps (neighbouring steps are correlated): a gap of
    0.2% with little spread is under 1%, one of 3% is over, one of 1% with a wide spread is not resolved."""
    import random

    from engine.bench import numerics

    rng = random.Random(0)
    a = [3 + rng.gauss(0, 0.3) for _ in range(300)]

    def run(gap, spread):
        return numerics.paired_gap(a, [x * (1 + gap + rng.gauss(0, spread)) for x in a], 150)

    for gap, spread, said in ((0.002, 0.01, "under"), (0.03, 0.01, "over"), (0.01, 0.05, "not resolved"),
                              (-0.03, 0.01, "over")):
        mean, low, high = run(gap, spread)
        assert low < mean < high and abs(mean - gap) < 0.01
        assert numerics.within(low, high) == said, (gap, spread, low, high)
    # what would resolve it: only said where it is not resolved, and more steps the wider the interval
    loose = [x * (1 + 0.01 + rng.gauss(0, 0.05)) for x in a]
    looser = [x * (1 + 0.01 + rng.gauss(0, 0.15)) for x in a]
    assert numerics.steps_to_resolve(a, [x * 1.002 for x in a], 150, 300) == {}
    need, more = (numerics.steps_to_resolve(a, b, 150, 300)["steps_to_resolve"] for b in (loose, looser))
    assert 300 < need < more
    # a slow drift: the blocks see it, single steps would not (the interval is wider than iid steps' would be)
    drift = [x * (1 + 0.02 * i / 300) for i, x in enumerate(a)]
    mean, low, high = numerics.paired_gap(a, drift, 0)
    assert high - low > 0.005 and numerics.within(low, high) == "not resolved"
    with pytest.raises(ValueError, match="at least 2"):
        numerics.paired_gap(a, a, 299)
    # every step in a block: 10 steps of 0 then 9 of 5% spread over the blocks, not dropped from them
    mean, low, high = numerics.paired_gap([1.0] * 19, [1.0] * 10 + [1.05] * 9, 0)
    assert high - low > 0.01 and numerics.within(low, high) == "not resolved"
    # close to 1% but already narrow: no guide shorter than the run; a mean at 1% cannot be told by any length
    rng = random.Random(0)
    a = [3 + rng.gauss(0, 0.3) for _ in range(300)]
    near = [x * (1.0085 + rng.gauss(0, 0.012)) for x in a]
    mean, low, high = numerics.paired_gap(a, near, 150)
    assert numerics.within(low, high) == "not resolved" and high - low < 0.005  # +/-0.25%: under +/-0.5% already
    assert numerics.steps_to_resolve(a, near, 150, 300)["steps_to_resolve"] > 300
    assert numerics.steps_to_resolve(a, [x * 1.0101 for x in a], 150, 300) == {}


def test_a_side_by_side_run_that_fails_or_hangs_stops_them_all_and_is_named(tiny):
    import multiprocessing

    from engine.bench import numerics

    ids = numerics.corpus_ids()[:5000]
    good = (tiny, Methods(), 10, 2, 32, "cpu", 0, ids, False)
    bad = (tiny, Methods(), 10, 2, 32, "cpu", "not a seed", ids, False)
    with pytest.raises(RuntimeError, match=r"the broken run failed: ValueError"):
        numerics._side_by_side([("fine", good), ("broken", bad), ("fine too", good)], [None] * 3, timeout=600)
    assert not multiprocessing.active_children()  # the others were stopped, not left running
    with pytest.raises(RuntimeError, match=r"the a, b, c run\(s\) did not finish in 0.5 s: stopped"):
        numerics._side_by_side([("a", good), ("b", good), ("c", good)], [None] * 3, timeout=0.5)
    assert not multiprocessing.active_children()


def test_runs_that_finished_before_the_others_were_stopped_are_kept(tiny, tmp_path, monkeypatch, capsys):
    """A side-by-side comparison stopped at its timeout hands back the losses of the runs that had finished
    (on 4 x H200 two bf16 runs of Pythia-1B finished and were lost when the fp8 ones passed --timeout), and
    `numerics --json` writes them, marked unfinished, and stores nothing."""
    import multiprocessing

    from engine.bench import numerics
    from tui_planner.cli import main

    ids = numerics.corpus_ids()[:5000]
    quick = (tiny, Methods(), 10, 2, 32, "cpu", 0, ids, False)
    slow = (tiny, Methods(), 1_000_000, 2, 32, "cpu", 0, ids, False)
    # 75 s: the quick runs' processes start torch under a loaded suite (at 45 s they once had not finished)
    with pytest.raises(numerics.Unfinished, match=r"the slow run\(s\) did not finish in 75 s") as caught:
        numerics._side_by_side([("quick", quick), ("slow", slow), ("quick too", quick)], [None] * 3, timeout=75)
    assert set(caught.value.finished) == {"quick", "quick too"} and not multiprocessing.active_children()
    assert len(caught.value.finished["quick"]) == 10 and caught.value.finished["quick"] == caught.value.finished["quick too"]

    def stopped(*_a, **_k):
        raise numerics.Unfinished("the fp8 run(s) did not finish in 330 s: stopped", {"bf16": [3.0, 2.5]})

    monkeypatch.setattr(numerics, "compare", stopped)
    out = tmp_path / "n.json"
    assert main(["numerics", "--model", "tiny-neox", "--presets", TINY, "--extras", "fp8", "--device", "cpu",
                 "--steps", "10", "--json", str(out)]) != 0
    err = capsys.readouterr().err
    assert "did not finish in 330 s" in err and f"the losses of bf16 written to {out}" in err
    kept = json.loads(out.read_text())
    assert kept["finished_runs"] == {"bf16": [3.0, 2.5]} and "did not finish" in kept["unfinished"]
    assert kept["model"] == "tiny-neox" and kept["steps"] == 10


def test_side_by_side_runs_stop_on_sigterm_and_leave_an_ignored_sighup_ignored(tiny):
    """`timeout` or `kill` stops the runs (no child left, the handler given back); under nohup a hang-up
    stays ignored."""
    import multiprocessing
    import os
    import signal
    import threading

    from engine.bench import numerics

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set from the main thread only")
    good = (tiny, Methods(), 10, 2, 32, "cpu", 0, numerics.corpus_ids()[:5000], False)
    before_term, before_hup = signal.getsignal(signal.SIGTERM), signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        seen = []
        timer = threading.Timer(1.0, lambda: (seen.append(signal.getsignal(signal.SIGHUP)),
                                              os.kill(os.getpid(), signal.SIGTERM)))
        timer.start()
        with pytest.raises(RuntimeError, match="stopped by SIGTERM"):
            numerics._side_by_side([("a", good), ("b", good), ("c", good)], [None] * 3, timeout=600)
        timer.join()
        assert seen == [signal.SIG_IGN]  # nohup's hang-up stayed ignored while the runs ran
        assert not multiprocessing.active_children()
        assert signal.getsignal(signal.SIGTERM) == before_term and signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before_hup)


def test_the_numerics_command_refuses_what_cannot_run_here():
    out = subprocess.run([sys.executable, "-m", "tui_planner", "numerics", "--model", "tiny-neox", "--presets", TINY,
                          "--extras", "fused", "--device", "cpu"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode != 0 and "liger-kernel's Triton kernels need a CUDA GPU" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_search_with_extras_predicts_them_before_it_measures_them():
    """The guided search stores a prediction of each combination before measuring it: the extras too, with
    fp8 infeasible on a GPU without FP8 tensor cores."""
    from engine.bench.guide import guide_for
    from engine.data.paths import shipped_db
    from engine.data.store import Store

    presets = load_presets()
    with Store.open(shipped_db(), read_only=True, create=False) as s:
        rows = s.query("SELECT * FROM trials WHERE source <> 'predicted'")
    guide = guide_for(rows, presets, "pythia-1b", "h100", 1, "free-lunch", extras=("fused", "fp8"))
    assert {"free-lunch", "fused", "fp8", "fused+fp8"} <= set(guide.guesses)
    fl, fp8 = guide.guesses["free-lunch"], guide.guesses["fp8"]
    assert fp8.feasible and fp8.days < fl.days and fp8.days_low < fp8.days < fp8.days_high
    a100 = guide_for(rows, presets, "pythia-1b", "a100", 1, "free-lunch", extras=("fp8",))
    assert not a100.guesses["fp8"].feasible and "FP8" in a100.guesses["fp8"].reason


def test_an_fp8_row_never_bounds_a_16bit_setting(tmp_path):
    """The best measured so far leaves unrun what cannot win and stops timing what cannot beat it; an fp8 row is
    not the same training, so a very fast one (here a stored row, as a resumed sweep finds it) must not cut a
    16-bit setting's timing short."""
    from engine.bench.sweep import SweepRequest, run_sweep, trial_key
    from engine.data.store import Store, Trial

    req = SweepRequest(model="tiny-neox", device="cpu", presets=(TINY,), methods="free-lunch", compile=False,
                       only=("free-lunch", "fp8"), repetitions=3, warmup=1, db=tmp_path / "b.duckdb")
    with Store.open(req.db) as s:
        s.add_trial(Trial(model="tiny-neox", gpu="cpu", num_gpus=1, feasible=True, source="measured", fp8=True,
                          free_lunch=True, sharding="none", key=trial_key(req, "cpu", space.by_label("fp8")),
                          step_s=1e-6, days=1e-8, micro_batch=16, grad_accum=1))
    seen = []
    run_sweep(req, on_event=seen.append)
    with Store.open(req.db) as s:
        (row,) = [r for r in s.trials() if not r["fp8"]]
    assert row["feasible"] and row["repetitions"] >= 3
    assert "stopped_early" not in json.loads(row["provenance"])


def test_numerics_emulated_on_the_cpu_is_printed_never_stored(tmp_path, capsys):
    pytest.importorskip("torchao")
    from engine.data.store import Store, Trial
    from tui_planner.cli import main

    db = tmp_path / "e.duckdb"
    with Store.open(db) as s:
        s.add_trial(Trial(model="tiny-neox", gpu="h100", num_gpus=1, feasible=True, source="measured", fp8=True))
    assert main(["numerics", "--model", "tiny-neox", "--presets", TINY, "--extras", "fp8", "--device", "cpu",
                 "--steps", "10", "--micro-batch", "2", "--seq-len", "16", "--db", str(db),
                 "--json", str(tmp_path / "out" / "n.json")]) == 0
    out = capsys.readouterr().out
    assert "fp8: loss" in out and "vs" in out and "not stored" in out and "emulated" in out
    with Store.open(db) as s:
        assert [r["numerics"] for r in s.trials()] == [None]
    written = json.loads((tmp_path / "out" / "n.json").read_text())  # the file says what the print says
    assert written["model"] == "tiny-neox" and written["steps"] == 10 and written["fp8_emulated"]
    assert f"{written['loss_method']:.3f}" in out and len(written["curve_method"]) == 10


def _row(model, label, days, **kw):
    m = space.by_label(label)
    return {"source": "measured", "feasible": True, "model": model, "gpu": "h200", "num_gpus": kw.pop("n", 1),
            "num_nodes": 1, "days": days, "free_lunch": m.free_lunch, "activation_checkpointing": m.activation_checkpointing,
            "sharding": m.sharding, "offloading": m.offloading, "fused": m.fused, "fp8": m.fp8, **kw}


def test_a_method_measured_beside_its_setting_gives_a_ratio_and_the_closest_one_is_taken():
    from engine.predict import extras

    rows = [_row("a", "free-lunch", 40), _row("a", "free-lunch", 38), _row("a", "fp8", 35.1),
            _row("b", "free-lunch", 20), _row("b", "fp8", 16),
            _row("b", "fsdp3", 10, n=2), _row("b", "fp8+fsdp3", 15, n=2),
            _row("c", "fp8", 1.0),  # no setting without it measured: no pair
            _row("a", "fused", 30, failure_kind="failed"), _row("a", "fused", 30, source="predicted")]
    pairs = extras.measured_pairs(rows)
    assert [(p.model, p.label, round(p.ratio, 3)) for p in pairs] == [("a", "fp8", 0.9), ("b", "fp8", 0.8),
                                                                      ("b", "fp8+fsdp3", 1.5)]
    cell = extras.take(pairs, space.by_label("fp8"), "a", "h200", 1)  # this very cell: its own margin
    assert cell.how == "this cell, measured" and cell.ratio == pytest.approx(0.9) and cell.low == pytest.approx(0.855)
    on_a = extras.take(pairs, space.by_label("fp8+ckpt"), "a", "h100", 8)  # this model, carried: a wider margin
    assert on_a.how.startswith("this model") and on_a.ratio == pytest.approx(0.9) and on_a.low < cell.low
    on_c = extras.take(pairs, space.by_label("fp8"), "c", "h100", 1)  # other models on other GPUs, unsharded only
    assert on_c.how.startswith("other models on other cards, the same kind") and on_c.ratio == pytest.approx(0.85)
    # a model with no pair of its own on a card that has some: that card's pairs (pooled with the model's, had it any)
    on_h200 = extras.take(pairs + [replace(pairs[0], gpu="h100", days=pairs[0].base_days * 1.2)],
                          space.by_label("fp8"), "c", "h200", 1)
    assert on_h200.how.startswith("this model or this card") and on_h200.ratio == pytest.approx(0.85)
    mixed = extras.take(pairs + [replace(pairs[0], model="c", gpu="h100", days=pairs[0].base_days * 0.6)],
                        space.by_label("fp8"), "c", "h200", 1)  # c's own pair on another card, with h200's two
    assert mixed.ratio == pytest.approx(0.8) and len(mixed.pairs) == 3
    assert extras.take(pairs, space.by_label("fp8+fsdp2"), "a", "h200", 2).ratio == pytest.approx(1.5)  # b's FSDP
    assert extras.take(pairs, space.by_label("fp8+fsdp2+offload"), "b", "h200", 2) is None  # no offloaded pair
    assert "measured x0.90" in cell.words(("fp8",))


def test_a_cell_measured_again_gives_its_ratio_from_the_latest_rows():
    """fp8 under FSDP-3 was measured at x1.44 while half the blocks ran uncompiled, then at x0.84 once each
    compiled: the later measurement of a setting supersedes the earlier (as findings and scaling take it); rows of
    one moment stay together."""
    from engine.predict import extras

    rows = [_row("d", "fsdp3", 21.3, n=2, created_at="2026-11-27 20:52:39"),
            _row("d", "fp8+fsdp3", 30.5, n=2, created_at="2026-11-27 20:53:40"),
            _row("d", "fsdp3", 19.9, n=2, created_at="2026-11-27 21:03:33"),
            _row("d", "fp8+fsdp3", 17.8, n=2, created_at="2026-11-27 21:04:40"),
            _row("d", "fp8+fsdp3", 17.0, n=2, created_at="2026-11-27 21:04:40")]
    [pair] = extras.measured_pairs(rows)
    assert pair.base_days == 19.9 and pair.days == pytest.approx(17.4) and pair.ratio == pytest.approx(17.4 / 19.9)
    assert extras.measured_pairs(list(reversed(rows)))[0].ratio == pytest.approx(pair.ratio)  # whatever the order
    # a later row timed under a micro-batch cap (`bench --max-micro-batch 2`) is another step: it supersedes nothing
    capped = rows + [_row("d", "fsdp3", 40.0, n=2, created_at="2026-11-28 05:00:00", key="d|h200|2|1|fsdp3|cuda|max-mb-2")]
    assert extras.measured_pairs(capped)[0].ratio == pytest.approx(pair.ratio)


def test_fp8_under_fsdp_takes_the_ratios_of_weights_gathered_as_the_engine_gathers_them():
    """Gathered in 16 bits, fp8 under FSDP measured x1.08 the days of 16 bits (Pythia-6.9B, 4 x H100); gathered in
    float8, x0.82. A prediction of fp8 under FSDP takes the float8-gathered pairs where any were measured, even from
    another model, over its own cell's 16-bit ones; with CPU offload (gathered in 16 bits) the 16-bit ones; with no
    float8 pair at all, what there is."""
    import json

    from engine.predict import extras

    f8 = json.dumps({"fp8": {"recipe": "tensorwise", "all_gather": "float8"}})
    rows = [_row("a", "fsdp2", 10, n=4), _row("a", "fp8+fsdp2", 10.8, n=4),  # 16-bit gathers (no record)
            _row("b", "fsdp3", 20, n=4), _row("b", "fp8+fsdp3", 16.4, n=4, provenance=f8),
            _row("a", "fsdp3+offload", 30, n=4), _row("a", "fp8+fsdp3+offload", 27, n=4),
            # a shared file's offloaded row that says float8: not how the engine gathers with offload
            _row("b", "fsdp3+offload", 30, n=4), _row("b", "fp8+fsdp3+offload", 15, n=4, provenance=f8)]
    pairs = extras.measured_pairs(rows)
    assert {(p.model, p.label, p.gather) for p in pairs} == {("a", "fp8+fsdp2", "16-bit"), ("b", "fp8+fsdp3", "float8"),
                                                             ("a", "fp8+fsdp3+offload", "16-bit"),
                                                             ("b", "fp8+fsdp3+offload", "float8")}
    on_a = extras.take(pairs, space.by_label("fp8+fsdp2"), "a", "h100", 4)
    assert on_a.ratio == pytest.approx(0.82) and on_a.how.startswith("other models")  # not its own x1.08
    assert "float8 gathers" in on_a.words(("fp8",))
    off = extras.take(pairs, space.by_label("fp8+fsdp3+offload"), "c", "h100", 4)
    assert off.ratio == pytest.approx(0.9) and off.how.startswith("other models")  # a's 16-bit one, not b's x0.5
    # one cell measured with both gathers: two pairs, each against the cell's latest 16-bit row
    again = rows[:2] + [_row("a", "fsdp2", 10.4, n=4, created_at="2026-11-28 02:10"),
                        _row("a", "fp8+fsdp2", 8.5, n=4, provenance=f8, created_at="2026-11-28 02:12")]
    both = {p.gather: round(p.ratio, 3) for p in extras.measured_pairs(again)}
    assert both == {"16-bit": round(10.8 / 10.4, 3), "float8": round(8.5 / 10.4, 3)}
    old = extras.take(extras.measured_pairs(rows[:2]), space.by_label("fp8+fsdp2"), "a", "h200", 4)
    assert old.ratio == pytest.approx(1.08)  # nothing gathered in float8 measured: the 16-bit pair, said as such
    assert "16-bit gathers" in old.words(("fp8",))


def test_where_a_method_was_measured_its_prediction_rests_on_the_measurement():
    """Fused kernels were measured under torch.compile (1 x H200, Llama-3.2-1B: at first slower than free-lunch, since
    the compiled step-up x0.98 of its time): the prediction takes the measured ratio and says so; with those rows left
    out it falls back to the assumed effect (another ratio), and says that it is one."""
    from engine.data.paths import shipped_db
    from engine.data.store import Store
    from engine.predict.validate import build_predictor

    presets = load_presets()
    with Store.open(shipped_db(), read_only=True, create=False) as s:
        rows = s.query("SELECT * FROM trials WHERE source <> 'predicted'")
    assert any(r["fused"] and r["model"] == "llama-3.2-1b" and r["source"] == "measured" for r in rows)
    measured = build_predictor(rows, presets, for_model="llama-3.2-1b")
    fl = measured.predict("llama-3.2-1b", "h200", 1, space.by_label("free-lunch"))
    fused = measured.predict("llama-3.2-1b", "h200", 1, space.by_label("fused"))
    cell = {r["key"].split("|")[4]: r["days"] for r in rows if r["model"] == "llama-3.2-1b" and r["gpu"] == "h200"
            and r["num_gpus"] == 1 and r["source"] == "measured" and r["feasible"] and r["days"]}
    ratio = cell["fused"] / cell["free-lunch"]  # the cell's own rows (one each: the later ones supersede)
    assert fused.days / fl.days == pytest.approx(ratio, rel=0.01) and f"measured x{ratio:.2f}" in fused.basis
    assert fused.days_low < fused.days < fused.days_high
    assert any("in place of the assumed effect" in line for line in fused.lines)
    assert any(f"= {fused.days:.1f} days" in line for line in fused.lines)  # the explanation is of this figure
    assumed = build_predictor([r for r in rows if not (r["fused"] or r["fp8"])], presets, for_model="llama-3.2-1b")
    guess = assumed.predict("llama-3.2-1b", "h200", 1, space.by_label("fused"))
    guessed = guess.days / assumed.predict("llama-3.2-1b", "h200", 1, space.by_label("free-lunch")).days
    assert abs(guessed - ratio) > 0.01  # the measurement moved the figure
    assert "an assumption" in guess.basis and "measured x" not in guess.basis


def test_under_compile_fused_puts_in_the_loss_kernel_only(tiny):
    """Measured on an H200, liger's norms and activations inside a compiled model were slower than what Inductor
    fuses (Pythia-1B 50% MFU against 56%): a compiled trial takes the fused linear cross-entropy only and says what
    it left to torch.compile, for the generic patch (GPT-NeoX) and for liger's own function (Llama: the keyword
    arguments it took travel to the export's liger_kernel_config)."""
    pytest.importorskip("liger_kernel")
    from engine.bench import fast

    net = _net(tiny)
    done = fast.apply_fused(net, "causal-lm", compiled=True)
    assert done["covers"] == ["fused_linear_cross_entropy"]
    assert done["not_covered"] == ["layer norms (left to torch.compile, which fuses it with its neighbours)"]
    assert type(net.gpt_neox.final_layer_norm).__name__ == "LayerNorm"  # torch's, not liger's
    import transformers  # an encoder has no loss to fuse: liger's LayerNorm, as uncompiled, rather than nothing

    enc = transformers.RobertaForMaskedLM(transformers.RobertaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, vocab_size=128))
    assert fast.apply_fused(enc, "masked-lm", compiled=True)["covers"] == ["layer_norm x4"]
    code = ("import transformers\nfrom engine.bench import fast\n"
            "c = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, "
            "num_attention_heads=4, vocab_size=128)\n"
            "net = transformers.LlamaForCausalLM(c)\n"
            "print(fast.apply_fused(net, 'causal-lm', compiled=True))\n"
            "print(type(net.model.norm).__name__, type(net.model.layers[0].mlp).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    shown, classes = out.stdout.strip().splitlines()[-2:]
    assert "'covers': ['fused_linear_cross_entropy']" in shown
    assert "'liger_kernel_config': {'rope': False, 'fused_linear_cross_entropy': True, 'rms_norm': False, " \
           "'swiglu': False}" in shown and "rms_norm (left to torch.compile" in shown
    assert classes == "LlamaRMSNorm LlamaMLP"  # not liger's LigerRMSNorm / LigerSwiGLUMLP


def test_a_compiled_trial_records_what_dynamo_made_of_it():
    """A row says how many graphs torch.compile made, its graph breaks, and each function for which Dynamo hit its
    recompile limit (from then on uncompiled): what showed that half of an FSDP model's blocks ran eager."""
    import torch

    from engine.bench.trial import DynamoWatch

    torch._dynamo.reset()
    f = torch.compile(lambda x: x.sin() + 1, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=1, automatic_dynamic_shapes=False), DynamoWatch() as watch:
        for n in (2, 3, 4):
            f(torch.randn(n))
    report = watch.report()
    assert report["graphs"] >= 1 and isinstance(report["graph_breaks"], int)
    assert len(report["recompile_limit_hit"]) == 1 and "recompile_limit (1)" in report["recompile_limit_hit"][0]
    with DynamoWatch() as quiet:
        f(torch.randn(2))  # compiled already: nothing to say
    assert quiet.report()["recompile_limit_hit"] == []


FSDP_BLOCKS = r"""
import dataclasses, functools, json, os, socket, sys
import torch, torch.distributed as dist
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
dist.init_process_group("gloo")
from engine.bench import modeling, steppers
from engine.bench.trial import DynamoWatch
from engine.data.presets import load_presets
from engine.data.space import Methods
base = load_presets((sys.argv[1],)).model("tiny-neox")
model = dataclasses.replace(base, config={**dict(base.config), "num_hidden_layers": 12})
steppers.torch.compile = functools.partial(torch.compile, backend="eager")  # Dynamo's frames, no codegen
out = {}
for raised in (False, True):
    torch._dynamo.reset()
    torch._dynamo.config.recompile_limit = 8
    if not raised:
        real, steppers.allow_a_compile_per_block = steppers.allow_a_compile_per_block, lambda blocks: None
    net = modeling.build_model(model, "sdpa", "cpu")
    stepper = steppers.FsdpStepper(net, model, Methods(sharding="fsdp3"), "cpu", compile=True)
    if not raised:
        steppers.allow_a_compile_per_block = real
    batch = modeling.make_batch(model, 1, "cpu", torch.Generator().manual_seed(0))
    with DynamoWatch() as watch:
        stepper.pass_(batch)
    out[str(raised)] = watch.report()["recompile_limit_hit"]
print(json.dumps(out))
dist.destroy_process_group()
"""


def test_fsdp_compiles_every_block_not_the_first_eight():
    """Under FSDP each block is a Dynamo frame of its own, compiled once per layer index; past the recompile limit
    (8) the rest ran uncompiled, on the GPU too (2 x H200: fp8 x0.7 of FSDP-3 without it, x1.12-1.20 once every
    block compiled). A 12-block model under FSDP on the CPU: the limit is hit without the stepper raising it, and
    not with it."""
    out = subprocess.run([sys.executable, "-c", FSDP_BLOCKS, str(TINY)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    hits = json.loads(out.stdout.strip().splitlines()[-1])
    assert hits["False"] and "recompile_limit (8)" in hits["False"][0]
    assert hits["True"] == []


FSDP_FP8 = r"""
import json, os, socket, sys
import torch, torch.distributed as dist
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
dist.init_process_group("gloo")
from engine.bench import fast, modeling, steppers
from engine.data.presets import load_presets
from engine.data.space import Methods
model = load_presets((sys.argv[1],)).model("tiny-neox")
calls = []
real = fast.precompute_fp8_scales
fast.precompute_fp8_scales = lambda net: (calls.append(1), real(net))
out = {}
for label, m in (("fsdp3", Methods(sharding="fsdp3", fp8=True)), ("offload", Methods(sharding="fsdp3", fp8=True, offloading=True))):
    calls.clear()
    torch.manual_seed(0)
    net = modeling.build_model(model, "sdpa", "cpu")
    done = fast.apply(net, m, model.objective, emulate_fp8=True)
    stepper = steppers.FsdpStepper(net, model, m, "cpu", compile=False)
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    losses = []
    for _ in range(4):
        stepper.pass_(batch)
        losses.append(float(stepper.forward(**batch).loss))
        stepper.update()
    kinds = sorted({type(getattr(p, "_local_tensor", p)).__name__ for p in net.parameters()})
    scales = sum(getattr(getattr(p, "_local_tensor", None), "_precomputed_scale", None) is not None
                 for p in net.parameters())
    out[label] = {"record": done["fp8"], "losses": losses, "kinds": kinds, "precomputed": len(calls), "scales": scales}
print(json.dumps(out))
dist.destroy_process_group()
"""


def test_under_fsdp_fp8_weights_are_gathered_in_float8_with_their_scales_after_each_step():
    """Gathered in 16 bits, every rank cast every whole weight in every pass (fp8 x1.08-1.10 the days of 16 bits
    on 4 x H100): under FSDP with the parameters on the GPU, torchao's float8 all-gather, each step's scales
    precomputed after the optimizer step. A real fully_shard on the CPU (gloo, one rank, torchao's emulation):
    the weights are float8-casting shards, it trains, and the row's record says so; with CPU offload it stays as
    it was (16-bit gather, nothing precomputed)."""
    pytest.importorskip("torchao")
    assert Methods(sharding="fsdp2", fp8=True).fp8_gathered_in_float8
    assert not Methods(sharding="zero3", fp8=True).fp8_gathered_in_float8
    assert not Methods(sharding="fsdp3").fp8_gathered_in_float8
    out = subprocess.run([sys.executable, "-c", FSDP_FP8, str(TINY)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    on, off = got["fsdp3"], got["offload"]
    assert on["record"]["all_gather"] == "float8" and "WeightWithDynamicFloat8CastTensor" in on["kinds"]
    assert on["precomputed"] == 4 and on["scales"] == 8  # every float8 weight's shard holds its scale for the gather
    assert all(x == x for x in on["losses"]) and on["losses"][-1] < on["losses"][0]  # it trains
    assert "all_gather" not in off["record"] and "WeightWithDynamicFloat8CastTensor" not in off["kinds"]
    assert off["precomputed"] == 0 and off["scales"] == 0


def test_fused_and_fp8_are_validated_with_their_whole_cell_held_out():
    """predict --validate checks each configuration measured with fused or fp8 against a prediction made without
    its cell: never from its own pair, its error the prediction's against the measurement; fp8 under FSDP from
    the engine before float8 gathers is named, not checked."""
    from engine.data.paths import shipped_db
    from engine.data.store import Store
    from engine.predict.validate import EXTRAS_TARGET, extras_leave_one_out

    with Store.open(shipped_db(), read_only=True, create=False) as s:
        rows = s.trials()
    report = extras_leave_one_out(rows, load_presets())
    checks = report["checks"]
    assert len(checks) >= 10 and report["count"] == sum(c["error"] is not None for c in checks)
    for c in checks:
        assert c["how"] != "this cell, measured"  # its own pair was held out with it
        assert c["error"] == pytest.approx(c["predicted_days"] / c["actual_days"] - 1)
        assert c["inside"] == (c["low"] <= c["actual_days"] <= c["high"])
    assert report["within"] == sum(abs(c["error"]) <= EXTRAS_TARGET for c in checks)
    assert report["met"] == (report["within"] == report["count"])
    assert any("gathered otherwise" in why for why in report["skipped"])
    # a measured ratio rests the prediction: with every other fused and fp8 row gone, the assumption is left
    one = next(c for c in checks if c["model"] == "llama-3.2-1b" and c["label"] == "fp8" and c["num_gpus"] == 1)
    bare = [r for r in rows if not (r.get("fused") or r.get("fp8")) or
            (r["model"], r["gpu"], r["num_gpus"]) == ("llama-3.2-1b", "h200", 1)]
    alone = next(c for c in extras_leave_one_out(bare, load_presets())["checks"]
                 if (c["model"], c["label"], c["num_gpus"]) == ("llama-3.2-1b", "fp8", 1))
    assert alone["how"] == "the assumption (terms.py)" and one["how"] != alone["how"]
    assert alone["predicted_days"] != pytest.approx(one["predicted_days"])


def test_results_say_fused_and_fp8_beside_the_setting(tmp_path, capsys):
    """A row with fp8 is another training's maths: the results table never shows it as plain free-lunch (it
    did: 'FL' beside Pythia-1B's fastest H200 rows), and the JSON carries the two flags."""
    from engine.data.store import Store, Trial
    from tui_planner.cli import main

    db = tmp_path / "r.duckdb"
    with Store.open(db) as s:
        for fused, fp8, days in ((False, False, 40.0), (True, False, 39.0), (False, True, 35.0), (True, True, 34.0)):
            s.add_trial(Trial(model="tiny-neox", gpu="h200", num_gpus=1, feasible=True, source="measured",
                              free_lunch=True, activation_checkpointing=False, sharding="none", offloading=False,
                              fused=fused, fp8=fp8, days=days))
    assert main(["results", "--db", str(db), "--presets", TINY]) == 0
    out = capsys.readouterr().out
    lines = {float(x.split()[3]): x for x in out.splitlines() if x.strip().startswith("tiny-neox")}
    assert "fp8" not in lines[40.0] and "fused" not in lines[40.0]
    assert "FL fused" in lines[39.0] and "fp8" not in lines[39.0]
    assert "FL fp8≈" in lines[35.0] and "FL fused fp8≈" in lines[34.0]
    assert "fp8≈ FP8 matrix products (changes numerics)" in " ".join(out.split())
    assert main(["results", "--db", str(db), "--presets", TINY, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["fused"], r["fp8"]) for r in rows) == [(False, False), (False, True), (True, False), (True, True)]
