"""One forward step of a Qwen3 decoder over the new tokens of several conversations at once, each
attending to its own cached keys and values, with results that do not depend on the step.

Why the results do not depend on the cache or the batch. On CPU a float32 matmul row can round
differently with the number of rows in the call (on one CPU 1-3 row calls took other kernels than 4+
row ones; on a CPU with AMX of 2026-12-03, 4 and 8 than 16+ in the layers' matmuls, while a decoding
step's attention matmuls of 2 rows gave the bits of a prefill's 16 to 64: the batcher checks both at
start and pads where needed), and a dot product over the keys rounds differently with how many keys
a kernel blocks together. So no row here ever sees the shape of the call it is in:
- every matmul of the layers gets a multiple of `rows` rows (the flat token batch and the rows of the
  LM head are padded with dummy rows), a prefill's attention query block a multiple of `rows` too and
  a decoding step's a multiple of `decode_rows` (1, unpadded, where the start check allows it), and a
  scores matmul at most QUERY_ROWS of them;
- attention scores are one matmul (per run of consecutive cache slots) over the keys padded to a
  multiple of BLOCK, masked (-inf) beyond each query's position, so how far the padding goes changes
  no score and no softmax; the weighted sum over the values is one matmul per block of BLOCK keys (a
  fixed contraction length) and the blocks are added in order, so keys past a query and blocks past a
  conversation's length add exact zeros;
- every other operation works row by row. The padding rows are only there for the matmuls' shapes:
  the softmax and the staging of the weighted sum run over the real query rows alone, and the scores
  and staging tensors are scratch buffers of the pool, reused from step to step (a staging buffer's
  padding rows keep stale finite values: a matmul's row reads only its own row, and the padding
  rows' outputs are dropped).
A token's keys and values are thus the same bits whether it was decoded alone, in a prefill chunk or
in a full re-encode, whoever else was in the step. tests/unit/eval/models/test_batching.py proves it bit for bit
(1 and 2 threads). On a GPU kernels are chosen per shape and no such promise could be made: the
backend uses the batcher on CPU only.

The decoder is run by hand from the checkpoint's weights, with the operations of transformers' Qwen3
modules (tested against its forward, and greedy and sampled answers against `generate`), without their
per-call machinery, which costs more than the arithmetic of a small model's decoding step. The weights
come straight from the checkpoint's files where `decoder_of_checkpoint` covers it (a plain Qwen3: a
rollout job then never imports transformers' modeling code), else from a loaded transformers model;
both give the same bits (test_batching.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

ROWS = 4  # every matmul of the layers gets a multiple of this many rows (the batcher checks it at start)
BLOCK = 128  # keys per block of the attention's weighted sum
QUERY_ROWS = 64  # the most query rows in one scores matmul (more can take another kernel: see attend)


def up(n: int, m: int) -> int:
    return -(-n // m) * m


class KVPool:
    """Keys [slots, kv_heads, capacity, d] and values [slots, blocks, kv_heads, BLOCK, d] per layer.

    The layouts make the keys of consecutive slots and the value blocks of one slot plain views for the
    two attention matmuls. Slots are taken and the tensors grown by the batcher's thread only; slots are
    given back (by session finalizers) from any thread.
    """

    def __init__(self, layers: int, kv_heads: int, head_dim: int, device, dtype):
        self.layers, self.kv_heads, self.head_dim = layers, kv_heads, head_dim
        self.device, self.dtype = device, dtype
        self.slots, self.capacity = 0, 0
        self.k: list = []
        self.v: list = []
        self.free: list[int] = []
        self.lock = threading.Lock()
        self.buffers: dict = {}  # scratch tensors of the attention (scratch)

    def _resize(self, slots: int, capacity: int) -> None:
        import torch

        kv, d, blocks = self.kv_heads, self.head_dim, capacity // BLOCK
        for i in range(self.layers):
            k = torch.zeros(slots, kv, capacity, d, device=self.device, dtype=self.dtype)  # finite padding
            v = torch.zeros(slots, blocks, kv, BLOCK, d, device=self.device, dtype=self.dtype)
            if i < len(self.k):
                k[: self.slots, :, : self.capacity] = self.k[i]
                v[: self.slots, : self.capacity // BLOCK] = self.v[i]
                self.k[i], self.v[i] = k, v
            else:
                self.k.append(k)
                self.v.append(v)
        self.slots, self.capacity = slots, capacity

    def acquire(self) -> int:
        with self.lock:
            if self.free:
                return self.free.pop()
        self._resize(self.slots + 1, max(self.capacity, BLOCK))
        return self.slots - 1

    def release(self, slot: int) -> None:
        with self.lock:
            self.free.append(slot)

    def reserve(self, tokens: int) -> None:
        if tokens > self.capacity:
            self._resize(self.slots, max(up(tokens, BLOCK), up(self.capacity * 5 // 4, BLOCK)))

    def scratch(self, name: str, numel: int, dtype):
        """A flat buffer of at least `numel` elements, reused from step to step (the batcher's thread
        only): a fresh tensor of a few MiB a call cost more in allocation and page faults than the
        softmax it fed."""
        buf = self.buffers.get((name, dtype))
        if buf is None or buf.numel() < numel:
            import torch

            # grown as the pool's capacity is (a quarter more), kept for the pool's life: at most a
            # quarter more than the largest step's scores (a prefill chunk's) or staging tensor
            size = max(numel, 0 if buf is None else buf.numel() * 5 // 4)
            buf = self.buffers[(name, dtype)] = torch.zeros(size, device=self.device, dtype=dtype)
        return buf[:numel]


@dataclass
class Group:
    """Segments attended together; their tokens are consecutive rows of the flat batch."""

    first: int  # flat row of the group's first token
    tokens: int  # new tokens per segment (a decode group: 1 each, several segments; else 1 segment)
    slots: list[int]
    bias: object  # additive mask, 0 up to each query row's position and -inf beyond, broadcast to the scores
    rows: int  # query rows per (segment, kv head), padded (a multiple of the step's rows or decode_rows)
    length: int  # the bias's width (the longest segment's keys, a multiple of BLOCK); a run attends its own
    blocks: list[int]  # value blocks each segment needs


def make_group(
    torch,
    first: int,
    tokens: int,
    slots: list[int],
    starts: list[int],
    pool: KVPool,
    per: int,
    multiple: int = ROWS,
):
    """The group of the segments in `slots` whose `tokens` new tokens start at positions `starts`."""
    rows, length = up(per * tokens, multiple), up(max(starts) + tokens, BLOCK)
    keys = np.arange(length)
    if tokens == 1:  # all query rows of a segment are at one position: [S * kv, 1, length]
        pos = np.repeat(np.asarray(starts), pool.kv_heads)[:, None, None]
    else:  # one segment; query row (head j, token i) is at starts[0] + i: [1, R, length]
        offset = np.tile(np.arange(tokens), per)
        pos = starts[0] + np.concatenate([offset, np.full(rows - len(offset), tokens - 1)])[None, :, None]
    bias = np.where(keys[None, None, :] > pos, np.float32(-np.inf), np.float32(0.0))
    blocks = [up(p + tokens, BLOCK) // BLOCK for p in starts]
    return Group(
        first, tokens, slots, torch.from_numpy(bias).to(pool.device, pool.dtype), rows, length, blocks
    )


@dataclass
class Plan:
    """One step: the flat rows' cache addresses, positions and attention groups."""

    n_real: int  # flat rows that are tokens (the rest are padding)
    positions: object  # [rows] position of each flat row (0 for padding)
    k_rows: object  # [n_real * kv] rows of a layer's keys viewed as [slots * kv * capacity, d]
    v_rows: object  # [n_real * kv] rows of a layer's values viewed as [slots * blocks * kv * BLOCK, d]
    groups: list[Group]


def make_plan(
    torch, pool: KVPool, slots: list[int], positions: list[int], groups: list[Group], multiple: int = ROWS
) -> Plan:
    kv, cap = pool.kv_heads, pool.capacity
    s, p = np.asarray(slots)[:, None], np.asarray(positions)[:, None]
    h = np.arange(kv)[None, :]
    k_rows = ((s * kv + h) * cap + p).reshape(-1)
    v_rows = (((s * (cap // BLOCK) + p // BLOCK) * kv + h) * BLOCK + p % BLOCK).reshape(-1)
    padded = np.zeros(up(len(positions), multiple), dtype=np.int64)
    padded[: len(positions)] = positions
    dev = pool.device
    return Plan(
        len(positions),
        torch.from_numpy(padded).to(dev),
        torch.from_numpy(k_rows).to(dev),
        torch.from_numpy(v_rows).to(dev),
        groups,
    )


def runs(slots: list[int]) -> list[tuple[int, int]]:
    """(index in `slots`, count) of each run of consecutive slot numbers, in order."""
    out, at = [], 0
    for j in range(1, len(slots) + 1):
        if j == len(slots) or slots[j] != slots[j - 1] + 1:
            out.append((at, j - at))
            at = j
    return out


def scores(torch, q, layer: int, pool: KVPool, g: Group, j: int, n: int, scaling: float, real: int):
    """Softmax of the first `real` query rows of segments j..j+n-1 (consecutive slots) against their
    keys, [n * kv, real, length], length the longest of the n segments' block-padded lengths.

    The keys of the run are a view of the pool (a gather would copy every key attended, at every layer
    of every step); each (segment, kv head) is its own matrix of the batched matmul and a row's dot
    products and softmax do not change with masked key blocks past it, so a run attending up to its own
    longest segment instead of the group's changes no bit and skips the other runs' padding.

    The matmul keeps every padded row (its shape picks the kernel); the mask is added to the real rows
    after it (a score plus 0 or -inf is what the matmul's own beta=1 addition gave: the same bits, and
    no copy of the mask into every padded row)."""
    kv, d = pool.kv_heads, pool.head_dim
    length = max(g.blocks[j : j + n]) * BLOCK
    rows = slice(j * kv, (j + n) * kv)
    k = pool.k[layer][g.slots[j] : g.slots[j] + n, :, :length].reshape(n * kv, length, d)
    bias = g.bias[:, :real, :length] if g.bias.shape[0] == 1 else g.bias[rows, :, :length]
    s = pool.scratch("scores", n * kv * q.shape[1] * length, q.dtype).view(n * kv, q.shape[1], length)
    s.baddbmm_(q[rows], k.transpose(1, 2), beta=0, alpha=scaling)
    return torch.softmax(s[:, :real] + bias, dim=-1, dtype=torch.float32)


def attend(torch, q, layer: int, pool: KVPool, g: Group, scaling: float):
    """One group's attention: q [tokens of the group, heads, d] -> [tokens, heads * d].

    A prefill's query rows go QUERY_ROWS at a time: with many rows the scores matmul can take another
    kernel than a decoding step's few and round otherwise (on a CPU of 2026-12-03, 128 query rows over one
    block of the pool's keys did, 16 to 96 did not); each row's scores, softmax and weighted sum are its
    own, so the split changes nothing else."""
    n_heads, d = q.shape[1], q.shape[2]
    kv = pool.kv_heads
    per, s_, t = n_heads // kv, len(g.slots), g.tokens
    q = q.view(s_, t, kv, per, d).permute(0, 2, 3, 1, 4).reshape(s_ * kv, per * t, d)
    q = torch.nn.functional.pad(q, (0, 0, 0, g.rows - per * t))
    parts = [
        attend_rows(torch, q, layer, pool, g, scaling, r, min(QUERY_ROWS, per * t - r))
        for r in range(0, g.rows, QUERY_ROWS)
    ]
    o = torch.cat(parts, dim=2) if len(parts) > 1 else parts[0]
    o = o[:, :, : per * t].reshape(s_, kv, per, t, d).permute(0, 3, 1, 2, 4)
    return o.reshape(s_ * t, n_heads * d)


def attend_rows(torch, q, layer: int, pool: KVPool, g: Group, scaling: float, first: int, real: int):
    """The attention of query rows first..first+QUERY_ROWS-1 of every (segment, kv head): [S, kv, R, d];
    the first `real` of them are queries, the others padding whose outputs the caller drops."""
    d, kv = q.shape[-1], pool.kv_heads
    q = q[:, first : first + QUERY_ROWS]
    rows = q.shape[1]
    assert 0 < real <= rows, (real, rows)  # every chunk holds a query (padding multiples divide QUERY_ROWS)
    bias = g.bias if g.bias.shape[1] == 1 else g.bias[:, first : first + rows]
    g = Group(g.first, g.tokens, g.slots, bias, rows, g.length, g.blocks)
    outs = []
    for j, n in runs(g.slots):
        p = scores(torch, q, layer, pool, g, j, n, scaling, real).to(q.dtype)
        blocks = p.shape[-1] // BLOCK
        # [n, blocks, kv, R, BLOCK]: each segment's blocks one contiguous batch for its values' matmul;
        # only the real rows are written (module docstring)
        staged = pool.scratch("staged", n * blocks * kv * rows * BLOCK, p.dtype)
        staged = staged.view(n, blocks, kv, rows, BLOCK)
        staged[:, :, :, :real] = p.view(n, kv, real, blocks, BLOCK).permute(0, 3, 1, 2, 4)
        for i in range(n):  # one segment's value blocks are a view of its slot
            nb = g.blocks[j + i]  # the run's blocks past this segment would add zeros
            v = pool.v[layer][g.slots[j + i], :nb].view(-1, BLOCK, d)
            o = torch.bmm(staged[i, :nb].view(-1, rows, BLOCK), v)
            outs.append(o.view(nb, kv, rows, d).sum(0))  # the blocks added in order
    return torch.stack(outs) if len(outs) > 1 else outs[0][None]


@dataclass
class Decoder:
    """What a step reads of a Qwen3 decoder: its shape, its weights (q/k/v and gate/up each fused into one
    matrix: fewer calls) and its rotary tables' source, `rotary(x, positions) -> (cos, sin)` as
    transformers' Qwen3RotaryEmbedding.forward."""

    heads: int
    kv: int
    head_dim: int
    eps: float
    embed: object
    norm: object
    head: object  # the LM head's weight (the embedding's when tied)
    layers: list[dict]
    rotary: object
    owner: object = None  # what holds the weights (a transformers model), kept alive with the step


# the Qwen3 configurations the step runs: (key, test, what it must be)
SUPPORTED = (
    ("model_type", lambda c: c.get("model_type") == "qwen3", "qwen3"),
    ("attention_bias", lambda c: not c.get("attention_bias", False), "false"),
    ("hidden_act", lambda c: c.get("hidden_act") == "silu", "silu"),
    (
        "layer_types",
        lambda c: set(c.get("layer_types") or ["full_attention"]) == {"full_attention"},
        "full_attention only",
    ),
)


def unsupported(cfg: dict) -> list[str]:
    """The keys of a model's config (as a dict) that the step cannot run, with their values."""
    return [f"{k}={cfg.get(k)!r} (needs {need})" for k, ok, need in SUPPORTED if not ok(cfg)]


def decoder_of_model(model) -> Decoder:
    """The decoder of a loaded transformers Qwen3ForCausalLM. Its modules' q/k/v and gate/up weights become
    views of the fused matrices, so no weight is held twice."""
    cfg = model.config
    problems = unsupported(cfg.to_dict())
    if problems:
        raise ValueError(f"the generation engine runs Qwen3 decoders only ({', '.join(problems)})")
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    base = model.model
    layers = []
    for layer in base.layers:
        a, m = layer.self_attn, layer.mlp
        w = {"q_norm": a.q_norm.weight.detach(), "k_norm": a.k_norm.weight.detach()}
        w.update(
            ln1=layer.input_layernorm.weight, ln2=layer.post_attention_layernorm.weight,
            o=a.o_proj.weight, down=m.down_proj.weight,
        )  # fmt: skip
        for key, mods in (("qkv", (a.q_proj, a.k_proj, a.v_proj)), ("gate_up", (m.gate_proj, m.up_proj))):
            w[key] = _fuse_views(mods)
        layers.append(_layer(w, heads, kv))
    return Decoder(
        heads, kv, getattr(cfg, "head_dim", None) or cfg.hidden_size // heads, cfg.rms_norm_eps,
        base.embed_tokens.weight, base.norm.weight, model.get_output_embeddings().weight, layers,
        base.rotary_emb, owner=model,
    )  # fmt: skip


def _fuse_views(mods) -> object:
    import torch

    fused = torch.cat([mod.weight.detach() for mod in mods])
    row = 0
    for mod in mods:
        n = mod.weight.shape[0]
        mod.weight.data = fused[row : row + n]
        row += n
    return fused


def _layer(w: dict, heads: int, kv: int) -> dict:
    """One layer's step weights from its tensors (the per-head norm weights of q and k side by side)."""
    import torch

    out = {k: w[k] for k in ("ln1", "ln2", "o", "down", "qkv", "gate_up")}
    out["qk_norm"] = torch.cat([w["q_norm"].expand(heads, -1), w["k_norm"].expand(kv, -1)])
    return out


# the config keys the checkpoint reader reads (a config.json without one is left to transformers)
EXPLICIT = (
    "num_attention_heads", "num_key_value_heads", "num_hidden_layers", "head_dim", "rms_norm_eps",
    "tie_word_embeddings",
)  # fmt: skip


def decoder_of_checkpoint(model_dir, dtype) -> Decoder | None:
    """The decoder read straight from a checkpoint's config.json and safetensors files, without importing
    transformers' modeling code (about 1.8 CPU-s of a rollout job's start). None for a checkpoint this
    reader does not cover (another architecture, scaled rotary embeddings, quantized or unexpected
    weights): the caller loads it through transformers instead, whose model gives the same step."""
    import json
    from pathlib import Path

    import torch

    d = Path(model_dir)
    try:
        cfg = json.loads((d / "config.json").read_text())
    except (OSError, ValueError):
        return None
    rope = cfg.get("rope_parameters") or {"rope_type": "default", "rope_theta": cfg.get("rope_theta")}
    if (
        unsupported(cfg)
        or not all(k in cfg for k in EXPLICIT)  # never a guess at transformers' defaults
        or cfg.get("quantization_config")
        or cfg.get("rope_scaling")
        or rope.get("rope_type") != "default"
        or not rope.get("rope_theta")
    ):
        return None
    state = _read_safetensors(d)
    if state is None:
        return None
    heads, kv, n = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    head_dim = cfg["head_dim"]
    names = {"embed": "model.embed_tokens.weight", "norm": "model.norm.weight", "head": "lm_head.weight"}
    per_layer = {
        "q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj", "o": "self_attn.o_proj",
        "q_norm": "self_attn.q_norm", "k_norm": "self_attn.k_norm", "gate": "mlp.gate_proj",
        "up": "mlp.up_proj", "down": "mlp.down_proj", "ln1": "input_layernorm", "ln2": "post_attention_layernorm",
    }  # fmt: skip
    tied = cfg["tie_word_embeddings"]
    wanted = {names["embed"], names["norm"]} | ({names["head"]} if not tied else set())
    wanted |= {f"model.layers.{i}.{m}.weight" for i in range(n) for m in per_layer.values()}
    if not wanted <= set(state) or not set(state) <= wanted | {names["head"]}:
        return None
    t = {k: v.to(dtype) for k, v in state.items()}
    layers = []
    for i in range(n):
        w = {k: t[f"model.layers.{i}.{m}.weight"] for k, m in per_layer.items()}
        w["qkv"], w["gate_up"] = torch.cat([w["q"], w["k"], w["v"]]), torch.cat([w["gate"], w["up"]])
        layers.append(_layer(w, heads, kv))
    embed = t[names["embed"]]
    return Decoder(
        heads, kv, head_dim, cfg["rms_norm_eps"], embed, t[names["norm"]],
        embed if tied else t[names["head"]], layers, DefaultRope(rope["rope_theta"], head_dim),
    )  # fmt: skip


def _read_safetensors(d) -> dict | None:
    """Every tensor of a checkpoint (one file or the shards of its index), None without safetensors."""
    import json

    from safetensors.torch import load_file

    index = d / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (d / "model.safetensors").exists():
        files = ["model.safetensors"]
    else:
        return None
    state: dict = {}
    for f in files:
        state.update(load_file(str(d / f)))
    return state


class DefaultRope:
    """The rotary tables of rope_type "default", computed with transformers' operations (Qwen3's
    compute_default_rope_parameters and Qwen3RotaryEmbedding.forward), so the bits are the same."""

    def __init__(self, theta: float, dim: int):
        import torch

        self.torch = torch
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))

    def __call__(self, x, position_ids):
        torch = self.torch
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * 1.0).to(dtype=x.dtype), (emb.sin() * 1.0).to(dtype=x.dtype)


class Qwen3Step:
    """The decoder of a Qwen3 causal LM, one batcher step at a time."""

    def __init__(self, model_or_decoder):
        """A Decoder, or a loaded transformers Qwen3ForCausalLM (raises ValueError for another model)."""
        import torch

        dec = (
            model_or_decoder if isinstance(model_or_decoder, Decoder) else decoder_of_model(model_or_decoder)
        )
        self.torch, self.decoder = torch, dec  # the decoder (and its owner) hold the weights used below
        self.heads, self.kv, self.head_dim = dec.heads, dec.kv, dec.head_dim
        self.eps, self.scaling = dec.eps, dec.head_dim**-0.5
        self.embed, self.rotary, self.norm, self.head = dec.embed, dec.rotary, dec.norm, dec.head
        self.layers = dec.layers
        self.pool = KVPool(len(dec.layers), self.kv, self.head_dim, dec.embed.device, dec.embed.dtype)
        self.cos = self.sin = None
        self.rows = ROWS  # the batcher raises it if this machine's kernels need more
        self.decode_rows = ROWS  # a decoding step's attention padding: the batcher lowers it where it can

    def rms(self, x, weight):
        """Qwen3RMSNorm (float32: torch's fused rms_norm; the per-head weights of q and k, [heads, d], are
        applied after it)."""
        torch, f = self.torch, self.torch.nn.functional
        if x.dtype != torch.float32:
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return weight * h.to(x.dtype)
        if weight.dim() == 1:
            return f.rms_norm(x, (x.shape[-1],), weight, self.eps)
        return weight * f.rms_norm(x, (x.shape[-1],), None, self.eps)

    def rope_tables(self, positions):
        """cos and sin [rows, 1, d] of these positions, from tables the model's rotary module filled."""
        torch = self.torch
        need = int(positions.max()) + 1
        if self.cos is None or need > self.cos.shape[0]:
            n = up(max(need, 2 * (0 if self.cos is None else self.cos.shape[0])), BLOCK)
            pos = torch.arange(n, device=self.pool.device)[None]
            cos, sin = self.rotary(self.embed[:1][None].to(self.pool.dtype), pos)
            self.cos, self.sin = cos[0].unsqueeze(1), sin[0].unsqueeze(1)
        return self.cos[positions], self.sin[positions]

    def rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + self.torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin

    def attention(self, i: int, w: dict, x, cos, sin, plan: Plan):
        torch, f = self.torch, self.torch.nn.functional
        rows, d, n, pool = x.shape[0], self.head_dim, plan.n_real, self.pool
        qkv = f.linear(x, w["qkv"])
        qk = self.rope(
            self.rms(qkv[:, : (self.heads + self.kv) * d].view(rows, -1, d), w["qk_norm"]), cos, sin
        )
        q, k, v = qk[:, : self.heads], qk[:, self.heads :], qkv[:, (self.heads + self.kv) * d :]
        pool.k[i].view(-1, d).index_copy_(0, plan.k_rows, k[:n].reshape(-1, d))
        pool.v[i].view(-1, d).index_copy_(0, plan.v_rows, v[:n].reshape(-1, d))
        outs = [
            attend(torch, q[g.first : g.first + len(g.slots) * g.tokens], i, pool, g, self.scaling)
            for g in plan.groups
        ]
        out = torch.cat(outs) if len(outs) > 1 else outs[0]
        out = f.pad(out, (0, 0, 0, rows - n))  # padding rows attend to nothing
        return f.linear(out, w["o"])

    def __call__(self, ids: list[int], plan: Plan, last_rows: list[int]):
        """Float32 logits after the given rows of the flat batch, [len(last_rows), vocab]."""
        torch, f = self.torch, self.torch.nn.functional
        total = up(len(ids), self.rows)
        pad = [0] * (total - len(ids))
        dev = self.pool.device
        with torch.inference_mode():
            x = f.embedding(torch.tensor(ids + pad, device=dev), self.embed)
            cos, sin = self.rope_tables(plan.positions)  # [rows, 1, d]: the same for every head
            for i, w in enumerate(self.layers):
                x = x + self.attention(i, w, self.rms(x, w["ln1"]), cos, sin, plan)
                gate, up_ = f.linear(self.rms(x, w["ln2"]), w["gate_up"]).chunk(2, dim=-1)
                x = x + f.linear(f.silu(gate) * up_, w["down"])
            last = f.pad(x[last_rows], (0, 0, 0, up(len(last_rows), self.rows) - len(last_rows)))
            return f.linear(self.rms(last, self.norm), self.head)[: len(last_rows)].float()
