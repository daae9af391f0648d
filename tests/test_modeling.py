"""The model as a trial builds it: what reaches the attention kernel under torch.compile."""

import pytest
import torch

from conftest import FIXTURES
from engine.bench import modeling
from engine.data.presets import load_presets

TINY = load_presets([FIXTURES / "tiny" / "tiny.toml"])
masking_utils = pytest.importorskip("transformers.masking_utils")  # transformers 4.x before 4.53 has none


def _as_torch_before_2_14_compiling(monkeypatch):
    """transformers cannot tell compiling from exporting there, so on its own it builds a dense mask (newer
    transformers ask torch.compiler.is_exporting(); older ones, like the device's 5.17, do so anyway)."""
    monkeypatch.setattr(masking_utils, "is_torchdynamo_exporting", lambda: True, raising=False)


def _sdpa_calls(fn, *args, **kwargs):
    """Trace fn with torch.compile and return the (attn_mask, is_causal) of every SDPA call in its graphs."""
    calls = []

    def backend(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.target is torch._C._nn.scaled_dot_product_attention or \
                    getattr(node.target, "__name__", "") == "scaled_dot_product_attention":
                calls.append((node.kwargs.get("attn_mask"), node.kwargs.get("is_causal")))
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend)(*args, **kwargs)
    return calls, out


def _compiled_and_eager(model_id: str):
    """A model's compiled SDPA calls and loss, and the loss of eager attention (explicit masks), same weights.
    In eval mode: no dropout, so the two losses must match."""
    model = TINY.model(model_id)
    torch.manual_seed(0)
    net = modeling.build_model(model, "sdpa", "cpu").eval()
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    calls, out = _sdpa_calls(net, **batch)
    ref = modeling.build_model(model, "eager", "cpu").eval()
    ref.load_state_dict(net.state_dict())
    return calls, out.loss, ref(**batch).loss, (net, batch)


def _padded_calls(net, batch, row: int, n: int):
    pad = torch.ones_like(batch["input_ids"])
    pad[row, -n:] = 0
    calls, _ = _sdpa_calls(net, attention_mask=pad, **batch)
    return calls


def test_compiled_causal_attention_gets_the_causal_flag_not_a_mask_and_the_same_loss(monkeypatch):
    _as_torch_before_2_14_compiling(monkeypatch)
    calls, loss, eager, _ = _compiled_and_eager("tiny-neox")
    assert calls, "no SDPA call was traced"
    assert all(mask is None and causal is True for mask, causal in calls), calls
    assert torch.allclose(loss, eager, rtol=1e-5, atol=1e-5)  # the same numbers as an explicit causal mask


def test_a_padding_mask_is_still_applied_under_compile():
    *_, (net, batch) = _compiled_and_eager("tiny-neox")
    calls = _padded_calls(net, batch, 0, 5)
    assert calls and all(mask is not None for mask, _ in calls), calls


def test_a_compiled_encoder_gets_no_mask_and_the_same_loss(monkeypatch):
    _as_torch_before_2_14_compiling(monkeypatch)
    calls, loss, eager, (net, batch) = _compiled_and_eager("tiny-roberta")
    assert calls and all(mask is None and not causal for mask, causal in calls), calls
    assert torch.allclose(loss, eager, rtol=1e-5, atol=1e-5)
    calls = _padded_calls(net, batch, 1, 3)  # with padding the mask stays
    assert calls and all(mask is not None for mask, _ in calls), calls


def test_checkpointed_passes_get_the_causal_flag_too_and_the_same_loss(monkeypatch):
    # Without a cache (checkpointing turns it off) transformers looks for packed sequences in the position
    # ids, cannot rule them out while tracing, and builds a dense mask: on 2 x H200 that made Pythia-410M's
    # checkpointed FSDP passes 45% slower than checkpointed ZeRO ones. Trial batches hold one sequence per
    # row, so the engine turns that search off (unpacked=True in build_model); the record says what ran.
    _as_torch_before_2_14_compiling(monkeypatch)
    model = TINY.model("tiny-neox")
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    seen, losses = {}, {}
    for ckpt in (False, True):
        torch.manual_seed(0)
        net = modeling.build_model(model, "sdpa", "cpu")
        if ckpt:
            modeling.enable_checkpointing(net, model)
        net.eval()  # no dropout: losses comparable
        modeling.clear_masks_seen()
        calls, out = _sdpa_calls(net, **batch)  # (checkpointed layers trace SDPA inside their own subgraphs)
        seen[ckpt] = modeling.masks_seen()
        losses[ckpt] = out.loss
        assert calls and all(mask is None and causal is True for mask, causal in calls), (ckpt, calls)
    assert seen == {False: "none", True: "none"}
    ref = modeling.build_model(model, "eager", "cpu").eval()
    ref.load_state_dict(net.state_dict())
    assert torch.allclose(losses[True], ref(**batch).loss, rtol=1e-5, atol=1e-5)


def test_the_record_is_what_sdpa_got_not_every_mask_the_model_made(monkeypatch):
    # Qwen2-MoE builds a sliding-window mask beside the causal one on every forward, whether or not a layer slides;
    # no layer of this config does, so every SDPA call gets the causal flag. On 2 x H200 its rows were recorded
    # 'mixed' from the masks made, and the predictor took them for rows of the engine before its mask fix.
    import json

    import transformers

    _as_torch_before_2_14_compiling(monkeypatch)
    modeling.sdpa_without_dense_masks(unpacked=True)
    values = {k: v for k, v in json.loads((FIXTURES / "configs" / "qwen2_moe.json").read_text()).items()
              if k != "model_type"}
    config = transformers.Qwen2MoeConfig(**values)
    assert "sliding_attention" not in config.layer_types
    torch.manual_seed(0)
    net = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    ids = torch.randint(0, config.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    modeling.clear_masks_seen()
    calls, _ = _sdpa_calls(net, input_ids=ids, labels=ids)
    assert calls and all(mask is None and causal is True for mask, causal in calls), calls
    assert modeling.MASKS_SEEN == {"none", "dense"}  # made: the causal flag, and the unused sliding-window mask
    assert modeling.masks_seen() == "none"  # got: the flag, every call


def test_recording_what_sdpa_got_does_not_split_a_checkpointed_compiled_graph(monkeypatch):
    # The record is a side effect inside each layer, so inside checkpointing's region when training: Dynamo refuses
    # those ("HOP: Unsafe side effect") and compiles around every checkpointed layer (2 graphs became 4 here).
    _as_torch_before_2_14_compiling(monkeypatch)
    model = TINY.model("tiny-neox")
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    net = modeling.build_model(model, "sdpa", "cpu")
    modeling.enable_checkpointing(net, model)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    modeling.clear_masks_seen()
    torch.compile(net, backend=backend)(**batch).loss.backward()
    unsafe = [r for r in torch._dynamo.utils.counters["graph_break"] if "side effect" in r.lower()]
    assert not unsafe and len(graphs) <= 2, (len(graphs), unsafe)
    assert modeling.masks_seen() == "none"


def test_packed_rows_stay_transformers_business_unless_the_caller_says_unpacked():
    # Users' own data may pack several documents into a row: the default leaves packing detection on.
    import subprocess
    import sys

    code = ("import torch; from engine.bench import modeling; import transformers.masking_utils as mu; "
            "modeling.sdpa_without_dense_masks(); "
            "print(mu.find_packed_sequence_indices(torch.tensor([[0, 1, 2, 0, 1]])).tolist()); "
            "modeling.sdpa_without_dense_masks(unpacked=True); "
            "print(mu.find_packed_sequence_indices(torch.tensor([[0, 1, 2, 0, 1]])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=str(FIXTURES.parent.parent))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[[0,", "0,", "0,", "1,", "1]]", "None"]


@pytest.mark.parametrize("model_id", ["pythia-160m", "roberta-large", "vit-large"])
def test_a_presets_checkpoint_recompute_is_what_checkpointing_runs_again(model_id):
    """The predictor's checkpointing cost is the preset's share; it must be what torch counts today."""
    model = load_presets(include_user=False).model(model_id)
    assert modeling.checkpoint_recompute_share(model) == pytest.approx(model.checkpoint_recompute, abs=0.005)


def test_checkpointing_does_not_run_a_whole_forward_again():
    """Non-reentrant checkpointing stops once the backward has what it needs: Pythia's MLP output projection
    and its LM head are not run again, so the recompute is well under a forward (1/3 of a pass)."""
    share = modeling.checkpoint_recompute_share(load_presets(include_user=False).model("pythia-160m"))
    assert 0.1 < share < 0.3


@pytest.mark.parametrize("keep", [True, False])
def test_an_accumulating_trials_passes_run_with_the_gradients_held(keep):
    """Micro-batches 2..N of a step run with the gradients in memory: a trial that accumulates times (and
    measures the peak memory of) its passes so, its update zeroing the gradients without freeing them."""
    from engine.bench.steppers import make_stepper
    from engine.data.space import FREE_LUNCH

    model = TINY.model("tiny-neox")
    net = modeling.build_model(model, "sdpa", "cpu")
    stepper = make_stepper(net, model, FREE_LUNCH, "cpu", False, 2)
    stepper.keep_grads = keep
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    stepper.pass_(batch)
    stepper.update()
    grads = [p.grad for p in net.parameters() if p.requires_grad]
    if keep:
        assert all(g is not None and not g.any() for g in grads)
        stepper.pass_(batch)  # accumulates into the held buffers
        assert all(p.grad is grads[i] for i, p in enumerate(q for q in net.parameters() if q.requires_grad))
    else:
        assert all(g is None for g in grads)
