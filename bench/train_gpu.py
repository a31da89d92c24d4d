#!/usr/bin/env python
"""GPU training throughput and MFU of our code path (make_trainer), random-init Qwen3, no download.

  bash bench/train_gpu.sh            # 1.7B-shaped Qwen3, 20 steps at 8K and at 16K, one GPU

MFU = model FLOPs / (step time x peak bf16 FLOP/s), with model FLOPs per token
6 * (non-embedding params) + 6 * vocab * hidden (LM head) + 6 * layers * seq * heads * head_dim
(causal attention, forward + backward; recomputation by gradient checkpointing is not counted,
the usual convention). Peak: 989 TFLOP/s for H100/H200 SXM bf16 dense (override --peak-tflops).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

SHAPES = {
    "1.7b": dict(
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
    ),
    "8b": dict(
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="1.7b", choices=SHAPES)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--horizons", default="8192,16384")
    ap.add_argument("--peak-tflops", type=float, default=None)
    ap.add_argument(
        "--deepspeed", default=None, help="zero3 to include DeepSpeed (one GPU: plain is the fair figure)"
    )
    ap.add_argument("--attn", default="sdpa")
    a = ap.parse_args()

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    from horizon import config as hc
    from horizon.data.tokenizer import train_bpe
    from horizon.data.tokens import TOKENS_SCHEMA
    from horizon.train.examples import TrainSpec, build_examples
    from horizon.train.worker import make_trainer

    name = torch.cuda.get_device_name(0)
    peak = (a.peak_tflops or (989.0 if ("H100" in name or "H200" in name) else 312.0)) * 1e12
    vocab = 151936
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        train_bpe(["hello world"] * 10, tmp / "model", vocab_size=300)  # pad id only; ids below are random
        cfg = Qwen3Config(
            vocab_size=vocab, max_position_embeddings=32768, tie_word_embeddings=True, **SHAPES[a.shape]
        )
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
        model.save_pretrained(tmp / "model")
        n_all = sum(p.numel() for p in model.parameters())
        n_embed = vocab * cfg.hidden_size
        del model
        rng = np.random.default_rng(0)
        for k in [int(x) for x in a.horizons.split(",")]:
            rows = []
            for i in range(a.steps + 2):
                ids = rng.integers(0, vocab, size=k, dtype=np.int32)
                roles = (rng.random(k) < 0.7).astype(np.int8)
                rows.append(
                    {
                        "traj_id": f"t{i}",
                        "input_ids": ids.tolist(),
                        "roles": roles.tolist(),
                        "turns": [0] * k,
                        "n_tokens": k,
                    }
                )
            pq.write_table(pa.Table.from_pylist(rows, schema=TOKENS_SCHEMA), tmp / f"tok{k}.parquet")
            train = hc.load(Path(__file__).resolve().parents[1] / "config.yaml")["train"]
            train.update(
                deepspeed=a.deepspeed,
                save_steps=10**9,
                dataloader_workers=2,
                attn_implementation=a.attn,
                global_batch=1,  # one sequence per step, as tokens = steps x K below assumes
            )
            spec = TrainSpec(
                name=f"gpu-K{k}",
                model_init=str(tmp / "model"),
                tokenizer=str(tmp / "model"),
                token_shards=[str(tmp / f"tok{k}.parquet")],
                horizon=k,
                output=str(tmp / "out"),
                checkpoints=str(tmp / f"ck{k}"),
                train=train,
                seed=0,
            )
            build_examples(spec)
            os.environ.setdefault("RANK", "0")
            trainer, _ = make_trainer(spec)
            trainer.args.max_steps = 2
            trainer.train()  # warm-up (allocator, kernels)
            torch.cuda.synchronize()
            trainer.args.max_steps = a.steps
            t = time.perf_counter()
            trainer.train()
            torch.cuda.synchronize()
            dt = time.perf_counter() - t
            tokens = a.steps * k
            flops_tok = (
                6 * (n_all - n_embed)
                + 6 * vocab * cfg.hidden_size
                + 6 * cfg.num_hidden_layers * k * cfg.num_attention_heads * cfg.head_dim
            )
            mfu = tokens * flops_tok / dt / peak
            mem = torch.cuda.max_memory_allocated() / 2**30
            print(
                f"train GPU {name} {a.shape} ({n_all / 1e9:.2f}B) K={k}: {tokens / dt:,.0f} tok/s, "
                f"MFU {100 * mfu:.1f}% (goal >= 40%), peak memory {mem:.1f} GiB"
            )
            del trainer
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
