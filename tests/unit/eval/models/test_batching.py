"""The in-process generation batcher: the KV cache and batching change no output bit, a rewritten history
falls back to its common prefix, and the backend answers as one generate() call per episode does."""

import threading

import pytest
import torch

from horizon.eval.models.backends import TransformersBackend
from horizon.eval.models.batching import Batcher, Request, Sampler
from horizon.eval.models.kvstep import Qwen3Step
from tests.helpers import fixture_rows


@pytest.fixture(scope="module")
def model():
    """A random-init Qwen3 of the demo's width with four layers (more layers than the demo's two: more
    places for a bit to differ; no training needed to compare bits)."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=1024, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=4096,
                      tie_word_embeddings=True)  # fmt: skip
    return AutoModelForCausalLM.from_config(cfg).eval()


@pytest.fixture
def threads(request):
    old = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(old)


def tokens(n: int, seed: int) -> list[int]:
    return torch.randint(3, 1024, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def full_encode(batcher: Batcher, seq: list[int]):
    """The logits after `seq` run in one piece in a fresh session (no cache, no company)."""
    return batcher.run_step([(batcher.session(), seq)])[0]


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
def test_logits_do_not_depend_on_cache_chunks_or_batch(model, threads):
    """Four conversations of different lengths, run in random chunks (mostly one token, as when decoding)
    and random company, give at every probe the same bits as a full re-encode of their prefix."""
    batcher = Batcher(model, eos_token_id=-1)
    seqs = [tokens(n, i) for i, n in enumerate((700, 131, 1100, 17))]
    probes = [{1, 2, 129, 400, 700}, {16, 128, 131}, {300, 1024, 1100}, {1, 17}]
    want = {(i, u): full_encode(batcher, s[:u]) for i, s in enumerate(seqs) for u in probes[i]}
    sessions = [batcher.session() for _ in seqs]
    fed, rng, checked = [0] * len(seqs), torch.Generator().manual_seed(5), 0
    while any(fed[i] < len(s) for i, s in enumerate(seqs)):
        step, who = [], []
        for i, s in enumerate(seqs):
            if fed[i] >= len(s) or torch.rand(1, generator=rng).item() < 0.3:
                continue  # done, or sits this step out
            n = (
                1
                if torch.rand(1, generator=rng).item() < 0.7
                else int(torch.randint(2, 300, (1,), generator=rng))
            )
            n = min(n, min(u for u in probes[i] | {len(s)} if u > fed[i]) - fed[i])
            step.append((sessions[i], s[fed[i] : fed[i] + n]))
            who.append(i)
            fed[i] += n
        if not step:
            continue
        for i, logits in zip(who, batcher.run_step(step)):
            if fed[i] in probes[i]:
                assert torch.equal(logits, want[(i, fed[i])]), (
                    i,
                    fed[i],
                    (logits - want[(i, fed[i])]).abs().max(),
                )
                checked += 1
    assert checked == sum(len(p) for p in probes)


def test_a_decode_step_over_scattered_slots_gives_each_conversation_its_bits(model):
    """Conversations decoding next to each other while others sit out (their slots not consecutive: the
    keys are read run by run) get the bits of a full re-encode."""
    from horizon.eval.models.kvstep import runs

    batcher = Batcher(model, eos_token_id=-1)
    seqs = [tokens(n, 40 + n) for n in (60, 200, 35, 140, 90, 260)]
    sessions = [batcher.session() for _ in seqs]
    batcher.run_step([(sess, s[:-12]) for sess, s in zip(sessions, seqs)])  # prefilled, all but 12 tokens
    fed, rng, scattered = [len(s) - 12 for s in seqs], torch.Generator().manual_seed(3), 0
    for _ in range(12):
        who = [i for i in range(len(seqs)) if fed[i] < len(seqs[i]) and torch.rand(1, generator=rng) < 0.5]
        if not who:
            continue
        who = [who[j] for j in torch.randperm(len(who), generator=rng)]  # any order: the batcher sorts
        scattered += len(runs(sorted(sessions[i].slot for i in who))) > 1
        got = batcher.run_step([(sessions[i], [seqs[i][fed[i]]]) for i in who])
        for i, logits in zip(who, got):
            fed[i] += 1
            assert torch.equal(logits, full_encode(batcher, seqs[i][: fed[i]])), (i, fed[i])
    assert scattered >= 3  # the case this test is for did occur


def test_a_run_of_short_conversations_beside_a_long_one_attends_only_its_own_length(model, monkeypatch):
    """Neighbouring slots decoding together (one run) beside a much longer conversation attend up to
    the run's longest conversation, not the step's, whichever of the run is the longest; every
    conversation still gets the bits of a full re-encode."""
    from horizon.eval.models import kvstep

    batcher = Batcher(model, eos_token_id=-1)
    lengths = [100, 200, 50, 400, 60]  # slots 0-4; slots 0 and 1 need 2 key blocks, slot 3 needs 4
    seqs = [tokens(n + 6, 70 + n) for n in lengths]  # room for five decoded tokens
    sessions = [batcher.session() for _ in seqs]
    batcher.run_step([(sess, s[:n]) for sess, s, n in zip(sessions, seqs, lengths)])
    seen, score = [], kvstep.scores

    def recording(torch_, q, layer, pool, g, j, n, scaling, real):
        p = score(torch_, q, layer, pool, g, j, n, scaling, real)
        seen.append((n, p.shape[-1], g.length, g.blocks[j] * kvstep.BLOCK))
        return p

    monkeypatch.setattr(kvstep, "scores", recording)
    fed = list(lengths)
    for who in ([0, 1, 3], [2, 3], [3, 0, 1, 4], [1, 0, 4, 3], [2, 3, 4]):
        got = batcher.run_step([(sessions[i], [seqs[i][fed[i]]]) for i in who])
        for i, logits in zip(who, got):
            fed[i] += 1
            assert torch.equal(logits, full_encode(batcher, seqs[i][: fed[i]])), (who, i)
    # the cases did occur: a run shorter than the step, and a run whose first conversation is not its longest
    assert any(n > 1 and length < longest for n, length, longest, _ in seen), seen
    assert any(n > 1 and first < length for n, length, _, first in seen), seen


def test_engine_logits_are_the_models(model):
    """The engine's hand-run decoder computes transformers' Qwen3 forward (eager attention)."""
    batcher = Batcher(model, eos_token_id=-1)
    seq = tokens(300, 9)
    with torch.inference_mode():
        ref = model(torch.tensor([seq])).logits[0, -1]
    torch.testing.assert_close(full_encode(batcher, seq), ref, atol=1e-5, rtol=1e-5)


def in_threads(fn, n: int) -> list:
    """fn(0..n-1), each in its own thread, at once; their results (an exception in one is raised here)."""
    out, errors = [None] * n, []

    def one(i):
        try:
            out[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return out


def run_requests(batcher: Batcher, prompts, seeds, temperature: float, parallel: bool) -> list[list[int]]:
    def one(i):
        return batcher.run(
            Request(batcher.session(), prompts[i], 40, Sampler(temperature, 0.9, seeds[i]))
        ).out

    return in_threads(one, len(prompts)) if parallel else [one(i) for i in range(len(prompts))]


@pytest.mark.parametrize("temperature", [0.0, 0.6])
def test_outputs_do_not_depend_on_batching(model, temperature):
    """Six requests at once (batched, arriving in any order) sample what each samples alone."""
    prompts, seeds = [tokens(n, 20 + n) for n in (5, 90, 400, 33, 250, 700)], [11, 12, 13, 14, 15, 16]
    together = Batcher(model, eos_token_id=-1)
    alone = Batcher(model, eos_token_id=-1, batching=False)
    try:
        assert run_requests(together, prompts, seeds, temperature, True) == run_requests(
            alone, prompts, seeds, temperature, False
        )
        assert together.stats["sampled"] > together.stats["steps"]  # they did share steps
    finally:
        together.close()
        alone.close()


def test_a_rewritten_history_falls_back_to_the_common_prefix(model):
    """A prompt that no longer extends the cache (an observation truncated in the middle) reuses only the
    common prefix, is counted, and answers what a fresh session answers."""
    batcher = Batcher(model, eos_token_id=-1)
    try:
        sess = batcher.session()
        first = batcher.run(Request(sess, tokens(200, 1), 30, Sampler(0.6, 1.0, 3)))
        assert first.reused == 0 and not first.continued
        history = first.prompt + first.out[:-1]
        assert sess.ids == history  # the last sampled token was never run
        follow = batcher.run(Request(sess, history + tokens(50, 2), 30, Sampler(0.6, 1.0, 4)))
        assert follow.continued and follow.reused == len(history)
        changed = follow.prompt[:120] + [7, 7, 7] + follow.prompt[125:]
        miss = batcher.run(Request(sess, changed, 30, Sampler(0.6, 1.0, 5)))
        assert not miss.continued and miss.reused == 120
        fresh = batcher.run(Request(batcher.session(), changed, 30, Sampler(0.6, 1.0, 5)))
        assert fresh.reused == 0 and miss.out == fresh.out
    finally:
        batcher.close()


def conversations():
    """The fixture conversations cut after a user turn, of different lengths."""
    out = []
    for row in fixture_rows():
        conv = row["conversations"]
        out.append(conv[: 1 + 2 * (len(out) % 3)])
    return out


def talk(backend, conv, seed, episodes=3):
    msgs, answers = list(conv), []
    for ep in range(episodes):
        c = backend.complete(msgs, seed=seed + ep, max_tokens=24)
        answers.append(c.text)
        msgs += [
            {"role": "assistant", "content": c.text},
            {"role": "user", "content": f"New Terminal Output:\n{ep}"},
        ]
    return answers


@pytest.mark.parametrize("temperature", [0.0, 0.6])
def test_backend_answers_as_one_generate_per_episode(tiny_corpus, temperature):
    """Several concurrent multi-episode conversations of different lengths, through the KV cache and
    batching, answer as the sequential generate() path does. Greedy: the tokens are the same unless two
    logits tie within a rounding error; sampled: each draw also comes from the same generator stream."""
    student = tiny_corpus / "student"
    plain = TransformersBackend(student, student, temperature=temperature, kv_cache=False, batching=False)
    fast = TransformersBackend(student, student, temperature=temperature)
    assert plain.batcher is None and fast.batcher is not None
    convs = conversations()
    want = [talk(plain, c, 100 * i) for i, c in enumerate(convs)]
    got = in_threads(lambda i: talk(fast, convs[i], 100 * i), len(convs))
    fast.close()
    assert len(convs) == 3 and got == want
    assert fast.batcher.stats["reused_tokens"] > 0


def test_backend_reports_the_cache_per_call(tiny_corpus):
    student = tiny_corpus / "student"
    b = TransformersBackend(student, student, temperature=0.0)
    conv = conversations()[1]
    first = b.complete(conv, seed=0, max_tokens=8)
    assert first.cached_tokens == 0 and first.continued is False
    again = b.complete(conv, seed=0, max_tokens=8)  # the same prompt: all but its last token reused
    assert again.cached_tokens == first.prompt_tokens - 1 and again.text == first.text
    b.close()


def test_a_failing_engine_raises_in_the_caller(model, monkeypatch):
    batcher = Batcher(model, eos_token_id=-1)

    def broken(*a, **k):
        raise RuntimeError("kaput")

    monkeypatch.setattr(Qwen3Step, "__call__", broken)
    with pytest.raises(RuntimeError, match="generation engine failed") as e:
        batcher.run(Request(batcher.session(), tokens(10, 0), 5, Sampler(0.0, 1.0, 0)))
    assert "kaput" in str(e.value.__cause__)
    with pytest.raises(RuntimeError, match="failed earlier"):
        batcher.run(Request(batcher.session(), tokens(10, 0), 5, Sampler(0.0, 1.0, 0)))


def test_sessions_of_finished_threads_give_their_slot_back(model):
    backend_like = Batcher(model, eos_token_id=-1)
    local = threading.local()

    def attempt():
        local.s = getattr(local, "s", None) or backend_like.session()
        backend_like.run(Request(local.s, tokens(20, 1), 3, Sampler(0.0, 1.0, 0)))

    for _ in range(4):  # four waves of two threads (as successive rollout jobs in one process)
        in_threads(lambda i: attempt(), 2)
    backend_like.close()
    assert backend_like.pool.slots <= 3


def test_a_model_the_engine_cannot_run_falls_back_to_generate(tmp_path, tiny_corpus, caplog):
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip
    AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path / "llama")
    student = tiny_corpus / "student"
    b = TransformersBackend(tmp_path / "llama", student, temperature=0.0)
    assert b.batcher is None and "runs Qwen3 decoders only" in caplog.text
    assert b.complete(conversations()[0], seed=0, max_tokens=4).completion_tokens > 0


def test_a_machine_whose_kernels_are_not_batch_invariant_gets_plain_generate(
    tiny_corpus, monkeypatch, caplog
):
    """The engine checks at start that a decoded token gets the bits of a full re-encode; where the bits
    depend on the batch (simulated: logits nudged by the step's row count), it is not used."""
    step = Qwen3Step.__call__

    def batch_dependent(self, ids, plan, last_rows):
        return step(self, ids, plan, last_rows) + 1e-7 * len(ids)

    monkeypatch.setattr(Qwen3Step, "__call__", batch_dependent)
    student = tiny_corpus / "student"
    b = TransformersBackend(student, student, temperature=0.0)
    assert b.batcher is None and "not batch invariant on this machine" in caplog.text


def test_the_start_check_sees_a_prefill_kernel_inside_one_key_block(model, monkeypatch):
    """A CPU of 2026-12-03 rounded a prefill's attention (many query rows over one block of keys)
    otherwise than a decode's (few rows): simulated here by nudging the scores of such calls only, the
    engine's start check must see it at every padding and refuse the engine (the three-block probe alone
    did not)."""
    from horizon.eval.models import kvstep

    score = kvstep.scores

    def one_block_kernel(torch_, q, layer, pool, g, j, n, scaling, real):
        p = score(torch_, q, layer, pool, g, j, n, scaling, real)
        return p * (1 + 2**-20) if q.shape[1] > 16 and p.shape[-1] == kvstep.BLOCK else p

    monkeypatch.setattr(kvstep, "scores", one_block_kernel)
    with pytest.raises(ValueError, match="not batch invariant on this machine"):
        Batcher(model, eos_token_id=-1)


def test_a_decoding_step_s_attention_is_padded_only_where_this_machine_needs_it(model, monkeypatch, caplog):
    """The start check runs a decoding step's attention over its real query rows alone (2 here: 4 heads
    over 2 key heads) where that gives a full re-encode's bits. Where an attention matmul of so few rows
    rounds otherwise (simulated: scores nudged when a call's query rows are not a multiple of 4), it pads
    them as the layers' matmuls, says so, and decoding still gives a re-encode's bits."""
    from horizon.eval.models import kvstep

    score = kvstep.scores

    def few_rows_kernel(torch_, q, layer, pool, g, j, n, scaling, real):
        p = score(torch_, q, layer, pool, g, j, n, scaling, real)
        return p * (1 + 2**-20) if q.shape[1] % 4 else p

    monkeypatch.setattr(kvstep, "scores", few_rows_kernel)
    with caplog.at_level("INFO", logger="horizon.eval.models.batching"):
        padded = Batcher(model, eos_token_id=-1)
    assert padded.step_fn.decode_rows == padded.step_fn.rows >= 4
    assert f"attention padded to {padded.step_fn.rows} rows" in caplog.text
    assert padded._decodes_as_encoded(tokens(300, 4), 280)  # 20 tokens decoded beside another conversation


@pytest.mark.parametrize("unpadded_ok", [True, False])
def test_the_start_check_keeps_a_decoding_step_s_attention_unpadded_when_its_probes_pass(
    model, monkeypatch, unpadded_ok
):
    """Whatever this machine's kernels: the check keeps decode_rows at 1 when the probes pass with it, and
    falls back to the layers' rows when they fail only then."""
    monkeypatch.setattr(
        Batcher, "_decodes_as_encoded", lambda self, seq, cached: unpadded_ok or self.step_fn.decode_rows > 1
    )
    batcher = Batcher(model, eos_token_id=-1)
    assert batcher.step_fn.rows == 4  # the first padding the check tries passed
    assert batcher.step_fn.decode_rows == (1 if unpadded_ok else 4)


def test_scores_add_the_mask_after_the_matmul_with_the_bits_of_a_masked_matmul():
    """scores() runs the matmul without the mask (beta=0) and adds 0 or -inf to the real rows after it:
    the bits of baddbmm(mask, ...) over every padded row, then the softmax of the real rows."""
    from horizon.eval.models import kvstep

    gen = torch.Generator().manual_seed(3)
    pool = kvstep.KVPool(1, 2, 32, torch.device("cpu"), torch.float32)
    pool.acquire(), pool.acquire(), pool.acquire()
    pool.reserve(300)
    pool.k[0].copy_(torch.randn(pool.k[0].shape, generator=gen))
    for starts, tokens_ in (([100, 200, 30], 1), ([150], 5)):  # a decode group, then a prefill's
        slots = [0, 1, 2][: len(starts)]
        g = kvstep.make_group(torch, 0, tokens_, slots, starts, pool, per=2, multiple=16)
        q = torch.randn(len(slots) * 2, g.rows, 32, generator=gen)
        real = 2 * tokens_
        got = kvstep.scores(torch, q, 0, pool, g, 0, len(slots), 0.17, real)
        length = max(g.blocks) * kvstep.BLOCK
        keys = pool.k[0][: len(slots), :, :length].reshape(len(slots) * 2, length, 32)
        bias = g.bias[:, :, :length]
        want = torch.softmax(torch.baddbmm(bias, q, keys.transpose(1, 2), alpha=0.17)[:, :real], dim=-1)
        assert got.shape == want.shape and torch.equal(got, want), starts


def test_a_decoding_step_softmaxes_only_its_real_query_rows(model, monkeypatch):
    """The padding rows exist for the matmul's shape only: the softmax (and the weighted sum's staging)
    see a decoding conversation's real query rows, one per query head of a key head."""
    from horizon.eval.models import kvstep

    batcher = Batcher(model, eos_token_id=-1)
    batcher.step_fn.decode_rows = batcher.step_fn.rows  # padded, as where the start check needs it (>= 4)
    sessions = [batcher.session() for _ in range(3)]
    batcher.run_step([(s, tokens(40 + 30 * i, i)) for i, s in enumerate(sessions)])
    seen, score = [], kvstep.scores

    def recording(torch_, q, layer, pool, g, j, n, scaling, real):
        p = score(torch_, q, layer, pool, g, j, n, scaling, real)
        seen.append((q.shape[1], p.shape[1]))
        return p

    monkeypatch.setattr(kvstep, "scores", recording)
    batcher.run_step([(s, [7]) for s in sessions])
    per = model.config.num_attention_heads // model.config.num_key_value_heads
    assert seen and all(rows >= 4 > per == got for rows, got in seen), seen
    for s in sessions:  # and the padded step still gives a re-encode's bits
        assert torch.equal(batcher.run_step([(s, [8])])[0], full_encode(batcher, s.ids))


def test_a_summarised_history_falls_back_cleanly(tiny_corpus):
    """As when the agent loop summarises its history between episodes (a summary call, then a shorter,
    rewritten conversation): the call after it reuses only what is still common, says so, and answers
    what a backend without any cache answers."""
    student = tiny_corpus / "student"
    fast = TransformersBackend(student, student, temperature=0.6)
    plain = TransformersBackend(student, student, temperature=0.6, kv_cache=False, batching=False)

    def episodes(backend):
        msgs, outs = list(conversations()[2]), []
        outs.append(backend.complete(msgs, seed=5, max_tokens=16))
        msgs += [{"role": "assistant", "content": outs[-1].text}, {"role": "user", "content": "Summarise."}]
        outs.append(backend.complete(msgs, seed=6, max_tokens=16))
        rewritten = [
            msgs[0],
            {"role": "user", "content": f"Summary: {outs[-1].text}\nNew Terminal Output:\n$"},
        ]
        outs.append(backend.complete(rewritten, seed=7, max_tokens=16))
        return outs

    got, want = episodes(fast), episodes(plain)
    fast.close()
    assert [c.text for c in got] == [c.text for c in want]
    assert not got[2].continued and 0 < got[2].cached_tokens < got[1].prompt_tokens  # kept the first turn


def small_qwen3(tmp_path, name: str, **kw):
    """A random-init Qwen3 saved as a checkpoint (and the model)."""
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(len(name))
    cfg = Qwen3Config(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      **kw)  # fmt: skip
    model = AutoModelForCausalLM.from_config(cfg).eval()
    model.save_pretrained(tmp_path / name)
    return tmp_path / name, model


@pytest.mark.parametrize("tied", [True, False])
def test_the_checkpoint_reader_steps_as_the_transformers_model(tmp_path, tied):
    """The engine's weights read straight from the checkpoint (no transformers modeling code) give the
    bits the loaded transformers model gives: prefill, decoding after a cached prefix, next to another
    conversation; an untied LM head is read as its own matrix."""
    from horizon.eval.models.kvstep import decoder_of_checkpoint

    path, model = small_qwen3(tmp_path, f"q{tied}", tie_word_embeddings=tied)
    read = decoder_of_checkpoint(path, torch.float32)
    assert read is not None and (read.head is read.embed) == tied
    engines = [Batcher(Qwen3Step(read), eos_token_id=-1), Batcher(model, eos_token_id=-1)]
    seq = torch.randint(0, 300, (200,), generator=torch.Generator().manual_seed(1)).tolist()
    outs = []
    for b in engines:
        mine, other = b.session(), b.session()
        first = b.run_step([(mine, seq[:150]), (other, seq[:20])])[0]
        steps = [b.run_step([(mine, [t]), (other, [u])])[0] for t, u in zip(seq[150:], seq[20:70])]
        outs.append(torch.stack([first, *steps]))
    assert torch.equal(outs[0], outs[1])
    assert not torch.equal(outs[0][0], outs[0][1])  # the steps see different contexts


def test_the_checkpoint_reader_leaves_other_checkpoints_to_transformers(tmp_path):
    """Scaled rotary embeddings, another architecture's, an unexpected tensor or a key left to transformers'
    defaults (which differ from the demo's: untied head, head_dim 128): not read (None), so the backend
    loads the model through transformers; a damaged config.json is not read either."""
    import json

    from safetensors.torch import load_file, save_file

    from horizon.eval.models.kvstep import decoder_of_checkpoint

    scaled, _ = small_qwen3(tmp_path, "scaled", rope_parameters={"rope_type": "linear", "factor": 2.0,
                                                                 "rope_theta": 10000.0})  # fmt: skip
    assert decoder_of_checkpoint(scaled, torch.float32) is None
    extra, _ = small_qwen3(tmp_path, "extra")
    assert decoder_of_checkpoint(extra, torch.float32) is not None
    state = load_file(str(extra / "model.safetensors"))
    save_file(
        {**state, "model.layers.0.self_attn.q_proj.bias": torch.zeros(64)}, str(extra / "model.safetensors")
    )
    assert decoder_of_checkpoint(extra, torch.float32) is None
    save_file(state, str(extra / "model.safetensors"))
    cfg = json.loads((extra / "config.json").read_text())
    for change in ({"model_type": "llama"}, {"tie_word_embeddings": None}, {"head_dim": None}):
        changed = {k: v for k, v in {**cfg, **change}.items() if v is not None}  # None: the key left out
        (extra / "config.json").write_text(json.dumps(changed))
        assert decoder_of_checkpoint(extra, torch.float32) is None, change
    (extra / "config.json").write_text(json.dumps(cfg))
    assert decoder_of_checkpoint(extra, torch.float32) is not None
    (extra / "config.json").write_text("{not json")
    assert decoder_of_checkpoint(extra, torch.float32) is None


def test_a_rollout_backend_starts_without_transformers_modeling_code(tiny_corpus):
    """The point of the reader: a rollout job's backend over a Qwen3 checkpoint never imports
    transformers' modeling code (about 1.8 CPU-s of each job's start), and still answers."""
    import subprocess
    import sys

    student = tiny_corpus / "student"
    code = (
        "import sys\n"
        "from horizon.eval.models.backends import TransformersBackend\n"
        f"b = TransformersBackend({str(student)!r}, {str(student)!r}, temperature=0.0)\n"
        "c = b.complete([{'role': 'user', 'content': 'ls'}], seed=0, max_tokens=4)\n"
        "b.close()\n"
        "print(b.batcher is not None, c.completion_tokens > 0,"
        " 'transformers.models.qwen3.modeling_qwen3' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[-2] == "True True False"
