"""The model as a trial builds it: what reaches the attention kernel under torch.compile."""

import torch

from conftest import FIXTURES
from engine import modeling
from engine.presets import load_presets

TINY = load_presets([FIXTURES / "tiny" / "tiny.toml"])


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
    # As under torch.compile with torch < 2.14 (the device's 2.11): transformers cannot tell it from export,
    # so on its own it would build a dense mask.
    from transformers import masking_utils

    monkeypatch.setattr(masking_utils, "is_torchdynamo_exporting", lambda: True)
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
