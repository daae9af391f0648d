"""Bytes a tiny T5 and a tiny Llama keep for backward on the CPU (saved-tensor hooks), against the memory
model's per-layer count (engine/predict/memory.py, Shape.layer_bytes_per_token). Not a test: a check of how
engine/predict/memory.py charges an encoder-decoder's activations (every layer on the input length).

    python scripts/saved_activations.py

Fits the kept bytes over several (input, target) lengths as a_s s + a_t t + quadratic terms and prints the
per-token coefficients with their ratio to the formula (torch and transformers needed; a few seconds)."""

import logging
import warnings

import numpy as np
import torch
import transformers as tf

H_, HEADS, D, F_ = 128, 4, 32, 512


def kept(net, feed) -> int:
    """Bytes of the distinct tensors autograd saves for backward in one forward, parameters left out."""
    params = {p.untyped_storage().data_ptr() for p in net.parameters()}
    seen: dict[int, int] = {}

    def pack(x):
        st = x.untyped_storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.nbytes()
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        net(**feed)
    return sum(seen.values())


def layer_formula(gated: bool) -> int:
    h, q = H_, HEADS * D
    return 2 * h + 2 * q + 4 * q + 2 * q + h + 4 * h + 2 * h + (6 if gated else 4) * F_ + h


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    torch.manual_seed(0)
    llama = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=128, hidden_size=H_, intermediate_size=F_, num_hidden_layers=2,
                                               num_attention_heads=HEADS, num_key_value_heads=HEADS))
    llama = llama.to(torch.bfloat16).train()
    lengths = [64, 128, 256]
    m = np.array([kept(llama, {"input_ids": torch.randint(0, 128, (1, s))}) for s in lengths], float)
    a = np.linalg.lstsq(np.array([[s, s * s] for s in lengths], float), m, rcond=None)[0]
    print(f"llama, 2 layers: {a[0]:.0f} B per token kept, {a[0] / 2 / layer_formula(True):.2f} x the formula")
    t5 = tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=128, d_model=H_, d_kv=D, d_ff=F_, num_layers=2,
                                                   num_decoder_layers=2, num_heads=HEADS, feed_forward_proj="relu",
                                                   decoder_start_token_id=0, pad_token_id=0))
    t5 = t5.to(torch.bfloat16).train()
    pairs = [(64, 32), (128, 32), (64, 16), (128, 64), (256, 32), (256, 128), (96, 48)]
    m = np.array([kept(t5, {"input_ids": torch.randint(0, 128, (1, s)), "labels": torch.randint(0, 128, (1, t))})
                  for s, t in pairs], float)
    a_s, a_t, *_ = np.linalg.lstsq(np.array([[s, t, s * s, t * t, s * t] for s, t in pairs], float), m, rcond=None)[0]
    layer = layer_formula(False)
    cross_t, cross_s = 2 * H_ + 4 * HEADS * D + H_ + 2 * H_, 4 * HEADS * D  # cross-attention: on t; its K, V on s
    print(f"t5, 2 + 2 layers: {a_s:.0f} B per input token, {a_t:.0f} per target token")
    print(f"  encoder on s, decoder on t: {a_s / (2 * layer + 2 * cross_s + 2 * H_):.2f} and "
          f"{a_t / (2 * (layer + cross_t)):.2f} x the formula")
    per_s = a_s + a_t / 4  # at the planner's share, t = s / 4
    print(f"  at t = s/4: {per_s:.0f} B per input token; every layer on s (the memory model): "
          f"{per_s / (4 * layer):.2f} x; encoder on s and decoder on t: "
          f"{per_s / (2 * layer + 2 * cross_s + 2 * H_ + 2 * (layer + cross_t) / 4):.2f} x")


if __name__ == "__main__":
    main()
