"""The model as a trial builds it: what reaches the attention kernel under torch.compile."""

import pytest
import torch

from conftest import FIXTURES
from engine import modeling
from engine.presets import load_presets

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


def test_compiled_causal_attention_gets_the_causal_flag_not_a_mask_and_the_same_loss(monkeypatch):
    _as_torch_before_2_14_compiling(monkeypatch)
    model = TINY.model("tiny-neox")
    torch.manual_seed(0)
    net = modeling.build_model(model, "sdpa", "cpu")
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))

    calls, out = _sdpa_calls(net, **batch)
    assert calls, "no SDPA call was traced"
    assert all(mask is None and causal is True for mask, causal in calls), calls

    # Same numbers as attention with an explicit causal mask (eager attention, same weights).
    ref = modeling.build_model(model, "eager", "cpu")
    ref.load_state_dict(net.state_dict())
    assert torch.allclose(out.loss, ref(**batch).loss, rtol=1e-5, atol=1e-5)


def test_a_padding_mask_is_still_applied_under_compile():
    model = TINY.model("tiny-neox")
    net = modeling.build_model(model, "sdpa", "cpu")
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    pad = torch.ones_like(batch["input_ids"])
    pad[0, -5:] = 0
    calls, _ = _sdpa_calls(net, attention_mask=pad, **batch)
    assert calls and all(mask is not None for mask, _ in calls), calls


def test_a_compiled_encoder_gets_no_mask_and_the_same_loss(monkeypatch):
    _as_torch_before_2_14_compiling(monkeypatch)
    model = TINY.model("tiny-roberta")
    torch.manual_seed(0)
    net = modeling.build_model(model, "sdpa", "cpu").eval()  # no dropout: the losses must match exactly
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    calls, out = _sdpa_calls(net, **batch)
    assert calls and all(mask is None and not causal for mask, causal in calls), calls
    ref = modeling.build_model(model, "eager", "cpu").eval()
    ref.load_state_dict(net.state_dict())
    assert torch.allclose(out.loss, ref(**batch).loss, rtol=1e-5, atol=1e-5)

    # With padding the mask stays.
    pad = torch.ones_like(batch["input_ids"])
    pad[1, -3:] = 0
    calls, _ = _sdpa_calls(net, attention_mask=pad, **batch)
    assert calls and all(mask is not None for mask, _ in calls), calls


def test_what_sdpa_got_is_recorded_and_checkpointing_still_gets_a_dense_mask(monkeypatch):
    # Without a cache (checkpointing turns it off) transformers cannot rule out packed sequences while
    # tracing and builds the mask itself: the record says so rather than claiming the flag.
    _as_torch_before_2_14_compiling(monkeypatch)
    model = TINY.model("tiny-neox")
    batch = modeling.make_batch(model, 2, "cpu", torch.Generator().manual_seed(0))
    seen = {}
    for ckpt in (False, True):
        net = modeling.build_model(model, "sdpa", "cpu")
        if ckpt:
            modeling.enable_checkpointing(net, model)
        modeling.MASKS_SEEN.clear()
        _sdpa_calls(net, **batch)  # (checkpointed layers trace SDPA inside their own subgraphs)
        seen[ckpt] = modeling.masks_seen()
    assert seen == {False: "none", True: "dense"}
