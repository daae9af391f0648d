#!/usr/bin/env python3
"""A plain, hand-written DDP training loop: the yardstick the engine's multi-GPU free-lunch step is checked
against (issue 38: within 5% on the same machine and micro-batch). It shares no code with the engine: the
model comes from transformers by its config, the loop is the textbook one.

    torchrun --standalone --nproc-per-node 4 scripts/plain_ddp.py --micro-batch 16 --accum 16 --steps 3

What it does, per step: `accum` micro-batches of random tokens (forward under bf16 autocast, backward),
DDP's all-reduce skipped (no_sync) on all but the last, then gradient clipping at 1.0, fused AdamW and
zero_grad; torch.compile on the DDP module, SDPA attention, TF32 matmuls. Timing: torch.cuda.synchronize()
and a barrier before the clock starts and before it stops, warm-up steps (compilation) timed apart. It prints
one JSON line: the mean and each step time, tokens/s, and MFU (6 x params x tokens + attention, over the
GPUs' dense bf16 peak given by --peak-tflops).

The default model is Pythia-1B (EleutherAI/pythia-1b's config.json; 2049 tokens a sample, as the paper's
runs and the engine use); --config names any other config.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

PYTHIA_1B = dict(model_type="gpt_neox", hidden_size=2048, num_hidden_layers=16, num_attention_heads=8,
                 intermediate_size=8192, vocab_size=50304, max_position_embeddings=2048, rotary_pct=0.25,
                 rotary_emb_base=10000, use_parallel_residual=True, hidden_act="gelu", layer_norm_eps=1e-5,
                 tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="a model's config.json (default: Pythia-1B's)")
    ap.add_argument("--seq-len", type=int, default=2049, help="tokens a sample (default 2049)")
    ap.add_argument("--micro-batch", type=int, required=True, help="samples a GPU a pass")
    ap.add_argument("--accum", type=int, required=True, help="micro-batches a step (gradient accumulation)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps (default 3)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first, compilation included (default 2)")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--dense-mask", action="store_true", help="leave transformers' causal mask as it builds it")
    ap.add_argument("--peak-tflops", type=float, default=989.4, help="dense bf16 peak a GPU (H100 SXM: 989.4)")
    ap.add_argument("--out", help="also write the JSON line here (rank 0)")
    args = ap.parse_args()

    from transformers import AutoConfig, AutoModelForCausalLM

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)

    if args.config:
        with open(args.config) as f:
            cfg = json.load(f)
        config = AutoConfig.for_model(**cfg)
    else:
        config = AutoConfig.for_model(**PYTHIA_1B)
    if not args.dense_mask:
        # Pre-training rows hold one unpadded sequence each: no mask tensor, SDPA's own causal flag. (Under
        # torch.compile, transformers before torch 2.14 builds a dense (batch, 1, seq, seq) mask, which keeps
        # SDPA off its flash kernel; eager transformers skips it.) The documented hook: a mask function.
        from transformers import AttentionMaskInterface

        AttentionMaskInterface.register("sdpa", lambda *a, **k: None)
    net = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").cuda()
    params = sum(p.numel() for p in net.parameters())
    ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[local])
    forward = ddp if args.no_compile else torch.compile(ddp)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)

    gen = torch.Generator(device="cuda").manual_seed(rank)
    ids = torch.randint(0, config.vocab_size, (args.micro_batch, args.seq_len), device="cuda", generator=gen)

    def step() -> None:
        for i in range(args.accum):
            sync = i == args.accum - 1
            ctx = ddp.no_sync() if not sync else torch.enable_grad()
            with ctx:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = forward(input_ids=ids, labels=ids).loss
                loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)

    def synced() -> float:
        torch.cuda.synchronize()
        dist.barrier()
        return time.perf_counter()

    t0 = synced()
    for _ in range(args.warmup):
        step()
    warmup_s = synced() - t0
    times = []
    for _ in range(args.steps):
        t0 = synced()
        step()
        times.append(synced() - t0)
    step_s = sorted(times)[len(times) // 2]
    tokens = args.micro_batch * args.seq_len * args.accum * world
    # 6 x params per token (forward 2, backward 4) + attention's scores and values: 12 x layers x hidden x seq.
    flops = tokens * (6 * params + 12 * config.num_hidden_layers * config.hidden_size * args.seq_len)
    result = {
        "script": "scripts/plain_ddp.py", "world": world, "micro_batch": args.micro_batch, "accum": args.accum,
        "seq_len": args.seq_len, "params": params, "compile": not args.no_compile, "warmup_s": warmup_s,
        "step_s_median": step_s, "step_times_s": times, "tokens_per_s": tokens / step_s,
        "mfu": flops / step_s / (world * args.peak_tflops * 1e12),
        "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "device": torch.cuda.get_device_name(), "p2p_disabled": os.environ.get("NCCL_P2P_DISABLE", "0"),
        "dense_mask": args.dense_mask,
    }
    if rank == 0:
        line = json.dumps(result)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
