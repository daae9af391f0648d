"""A model described from its config.json, without torch: the parameter count of every family it knows equals
what transformers builds from the same config (on the meta device: no memory, no weights), and a config it
cannot describe gets a message that names the file and what is missing."""

import json

import pytest

from conftest import ROOT
from engine.data.architecture import ArchitectureError, describe

VOCAB = 51_000


def _configs():
    import transformers as tf

    small = dict(hidden_size=256, intermediate_size=704, num_hidden_layers=3, num_attention_heads=8, vocab_size=VOCAB)
    return {
        "llama (GQA, tied)": (tf.LlamaConfig(**small, num_key_value_heads=2, tie_word_embeddings=True), None),
        "llama (biases)": (tf.LlamaConfig(**small, attention_bias=True, mlp_bias=True), None),
        "mistral": (tf.MistralConfig(**small, num_key_value_heads=2), None),
        "qwen2": (tf.Qwen2Config(**small, num_key_value_heads=2, tie_word_embeddings=True), None),
        "qwen3": (tf.Qwen3Config(**small, num_key_value_heads=2, head_dim=64), None),
        "olmo": (tf.OlmoConfig(**small), None),
        "olmo2": (tf.Olmo2Config(**small, num_key_value_heads=4), None),
        "gemma2": (tf.Gemma2Config(**small, num_key_value_heads=4, head_dim=32), None),
        "gemma3": (tf.Gemma3TextConfig(**small, num_key_value_heads=4, head_dim=32), None),
        "phi3": (tf.Phi3Config(**small, num_key_value_heads=4), None),
        "gpt2": (tf.GPT2Config(n_embd=256, n_layer=3, n_head=8, vocab_size=VOCAB, n_positions=128), None),
        "gpt_neox": (tf.GPTNeoXConfig(**{**small, "intermediate_size": 1024}), None),
        "bert": (tf.BertConfig(**{**small, "intermediate_size": 1024}), tf.BertForMaskedLM),
        "roberta": (tf.RobertaConfig(**{**small, "intermediate_size": 1024}), tf.RobertaForMaskedLM),
        "vit": (tf.ViTConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=3, num_attention_heads=8),
                tf.ViTForImageClassification),
    }


@pytest.mark.parametrize("family", ["llama (GQA, tied)", "llama (biases)", "mistral", "qwen2", "qwen3", "olmo",
                                    "olmo2", "gemma2", "gemma3", "phi3", "gpt2", "gpt_neox", "bert", "roberta", "vit"])
def test_the_parameter_count_of_each_family_is_what_transformers_builds(family):
    import torch
    import transformers as tf

    config, cls = _configs()[family]
    ours = describe(json.loads(config.to_json_string()), family)
    with torch.device("meta"):
        model = cls(config) if cls else tf.AutoModelForCausalLM.from_config(config)
    assert ours.params == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name, params", [("llama-3.2-1b", 1_235_814_400), ("qwen2.5-1.5b", 1_543_714_304),
                                          ("olmo-1b", 1_176_764_416)])
def test_shipped_configs_have_their_published_sizes(name, params):
    a = describe(json.loads((ROOT / "presets" / "configs" / f"{name}.json").read_text()), name)
    assert a.params == params and a.gated and a.tied


@pytest.mark.parametrize("change, message", [
    ({"num_local_experts": 8}, "mixture of experts"),
    ({"model_type": "rwkv"}, "is not one the hand-written describer knows"),
    ({"num_hidden_layers": 1_000_000}, "num_hidden_layers = '1000000' is not a whole number from 1 to 10,000"),
    ({"vocab_size": 10**12}, "vocab_size"),
    ({"num_attention_heads": 32, "num_key_value_heads": 5}, "not a multiple"),
    ({"hidden_size": "wide"}, "hidden_size = 'wide'"),
    ({"hidden_size": None}, "no hidden_size"),
])
def test_a_config_it_cannot_describe_says_what_and_where(change, message):
    base = json.loads((ROOT / "presets" / "configs" / "llama-3.2-1b.json").read_text())
    with pytest.raises(ArchitectureError) as e:
        describe({**base, **change}, "my/config.json")
    assert message in str(e.value) and str(e.value).startswith("my/config.json: ")
    if change.get("num_local_experts") or change.get("model_type"):
        assert "bench" in str(e.value)  # measuring still works
