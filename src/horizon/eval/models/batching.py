"""In-process generation for the attempts of a rollout job: a KV cache per attempt kept across
episodes, and continuous batching across the attempts that wait for the model at the same time.

Each calling thread holds a Session (its conversation's cache in a slot of the pool). A request runs
only the prompt tokens after the longest common prefix of the session's cached tokens and the prompt,
so an episode that extends the previous one (the previous prompt, the answer and the new user turn)
encodes only the new turn, and a rewritten history (a changed template, a truncated observation, a
summary) falls back to what is still common, never to a wrong continuation. One background thread runs
every active request's next tokens in one step (kvstep.py: the outputs do not depend on the cache or
on the batch, bit for bit on CPU).

Sampling is `generate`'s (temperature, then top-p, then softmax and one multinomial draw), but each
request draws from its own torch.Generator seeded with the episode's seed, so a draw does not depend on
the requests that ran next to it. transformers' own continuous batching (5.x `generate_batch`) draws
every request's token from one global generator and attends through kernels that are not batch
invariant, so it cannot give these guarantees.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
import weakref
from dataclasses import dataclass, field

from horizon.eval.models.kvstep import QUERY_ROWS, Qwen3Step, make_group, make_plan

log = logging.getLogger("horizon.eval.models.batching")

PREFILL_CHUNK = 512  # prompt tokens of one request per step (bounds the score matrix)


class Session:
    """One conversation's cache: `ids` are the tokens whose keys and values sit in the pool's slot.

    The slot is taken by the batcher's thread when the session first runs, and given back when the
    session is garbage (its thread ended, or the caller replaced it).
    """

    def __init__(self, pool):
        self.pool = pool
        self.slot: int | None = None
        self.ids: list[int] = []

    def bind(self) -> None:
        if self.slot is None:
            self.slot = self.pool.acquire()
            weakref.finalize(self, self.pool.release, self.slot)


@dataclass
class Sampler:
    """`generate`'s sampling (temperature, top-p, softmax, multinomial) with a generator of its own."""

    temperature: float
    top_p: float
    seed: int
    device: str = "cpu"

    def __post_init__(self):
        import torch

        self.greedy = self.temperature <= 0
        self.warpers = []  # generate's order; called directly (LogitsProcessorList inspects each call)
        if not self.greedy and self.temperature != 1.0:
            self.warpers.append(self._temperature)  # TemperatureLogitsWarper's one division
        if not self.greedy and self.top_p < 1.0:  # transformers imported only where top-p is asked for
            from transformers.generation.logits_process import TopPLogitsWarper

            self.warpers.append(TopPLogitsWarper(self.top_p))
        self.generator = torch.Generator(self.device).manual_seed(self.seed)

    def _temperature(self, _ids, logits):
        return logits / self.temperature

    def __call__(self, logits) -> int:
        """The next token from one row of logits ([1, vocab], float32)."""
        import torch

        if self.greedy:
            return int(torch.argmax(logits, dim=-1))
        for warp in self.warpers:
            logits = warp(None, logits)
        probs = torch.nn.functional.softmax(logits, dim=-1)
        return int(torch.multinomial(probs, num_samples=1, generator=self.generator))


@dataclass
class Request:
    session: Session
    prompt: list[int]
    max_tokens: int
    sampler: Sampler
    reused: int = 0  # prompt tokens whose keys and values came from the cache
    continued: bool = False  # the session's whole previous context was a prefix of this prompt
    out: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None


def common_prefix(a: list[int], b: list[int]) -> int:
    import numpy as np

    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if len(diff) else n


class Batcher:
    """Runs the requests of every calling thread in shared steps, on one background thread.

    `batching=False` runs one request at a time (in arrival order); the results are the same.
    """

    def __init__(self, model, eos_token_id: int, batching: bool = True):
        """`model`: a Qwen3Step, or a transformers model to build one from (ValueError: not a model it runs)."""
        import torch

        self.torch = torch
        self.step_fn = model if isinstance(model, Qwen3Step) else Qwen3Step(model)
        self.pool, self.device = self.step_fn.pool, self.step_fn.pool.device
        self.per_kv = self.step_fn.heads // self.step_fn.kv
        self.eos, self.batching = eos_token_id, batching
        self.queue: queue.Queue[Request | None] = queue.Queue()
        self.active: list[Request] = []
        self.thread: threading.Thread | None = None
        self.failure: BaseException | None = None
        self.start_lock = threading.Lock()
        self.closed = False
        self.stats = {"steps": 0, "sampled": 0, "prompt_tokens": 0, "reused_tokens": 0, "requests": 0}
        if self.device.type == "cpu":
            self._check_invariance()

    def _check_invariance(self) -> None:
        """Check on this machine that a token decoded next to another conversation, after a cached prefix,
        gets the bits of a full re-encode; pad to more rows if not; raise if that does not help either.
        Then the same check with a decoding step's attention rows unpadded (it then does 2 rows' work
        instead of 16's for the demo's student), kept where it passes: the probes decode against
        prefill chunks of every padded size a prefill's attention takes.
        Two probes: 50 tokens decoded after 250 (three key blocks), and one after 99 (one key block, where a
        prefill's many query rows took another kernel than a decode's few on a CPU of 2026-12-03)."""
        torch, vocab, step = self.torch, self.step_fn.embed.shape[0], self.step_fn
        seq = torch.randint(0, vocab, (300,), generator=torch.Generator().manual_seed(0)).tolist()

        def invariant() -> bool:
            return self._decodes_as_encoded(seq, 250) and self._decodes_as_encoded(seq[:100], 99)

        for rows in (step.rows, 8, 16):
            assert QUERY_ROWS % rows == 0, (QUERY_ROWS, rows)  # attention chunks stay whole padded rows
            step.rows = step.decode_rows = rows
            if invariant():
                break
            log.warning("generation engine: %d-row matmuls are not row invariant on this machine", rows)
        else:
            raise ValueError("the generation engine's step is not batch invariant on this machine")
        step.decode_rows = 1
        if not invariant():
            step.decode_rows = rows
            log.info("generation engine: a decoding step's attention padded to %d rows on this machine", rows)

    def _decodes_as_encoded(self, seq: list[int], cached: int) -> bool:
        """Whether seq[cached:], decoded a token a step beside another conversation after seq[:cached] was
        encoded, ends on the logits of seq encoded whole."""
        want = self.run_step([(self.session(), seq)])[0]
        mine, other = self.session(), self.session()
        self.run_step([(mine, seq[:cached]), (other, seq[:40])])
        for tok, filler in zip(seq[cached:], seq[40:]):
            got = self.run_step([(mine, [tok]), (other, [filler])])[0]
        return self.torch.equal(got, want)

    # -- called from the attempts' threads

    def session(self) -> Session:
        return Session(self.pool)

    def run(self, req: Request) -> Request:
        """Queue a request and wait for it (a failed batcher raises here, in every waiting thread)."""
        with self.start_lock:
            if self.failure is not None:
                raise RuntimeError("the generation engine failed earlier") from self.failure
            if self.closed:
                raise RuntimeError("the generation engine is closed")
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="horizon-batcher", daemon=True)
                self.thread.start()
        self.queue.put(req)
        while not req.done.wait(1.0):  # the batcher may have stopped after this request was queued
            if not self.thread.is_alive():
                req.error = req.error or self.failure or RuntimeError("the engine's thread ended")
                break
        if req.error is not None:
            raise RuntimeError("the generation engine failed") from req.error
        return req

    def close(self) -> None:
        with self.start_lock:
            self.closed = True
        if self.thread is not None and self.thread.is_alive():
            self.queue.put(None)
            self.thread.join()
        st = self.stats
        if st["steps"]:
            log.info(
                "generation engine: %d requests, %d steps, %.2f tokens sampled per step, %d of %d prompt "
                "tokens reused from the cache, %.1f s CPU",
                st["requests"],
                st["steps"],
                st["sampled"] / st["steps"],
                st["reused_tokens"],
                st["prompt_tokens"],
                st.get("cpu_seconds", 0.0),
            )

    # -- the batcher's thread

    def _loop(self) -> None:
        try:
            while True:
                if not self._admit():
                    return
                self._step()
        except BaseException as e:  # noqa: BLE001 - handed to every waiting caller
            self._fail(e)
        finally:
            self.stats["cpu_seconds"] = time.thread_time()  # this thread's whole life

    def _fail(self, e: BaseException) -> None:
        """Hand the failure to every waiting caller (a bug of ours: the job stops loudly)."""
        self.failure = e
        log.exception("the generation engine failed")
        for req in self.active:
            req.error = e
            req.done.set()
        while not self.queue.empty():
            req = self.queue.get_nowait()
            if req is not None:
                req.error = e
                req.done.set()

    def _admit(self) -> bool:
        """Take queued requests (waiting when idle); False when closed."""
        limit = None if self.batching else 1
        while limit is None or len(self.active) < limit:
            try:
                req = self.queue.get(block=not self.active)
            except queue.Empty:
                break
            if req is None:
                return False
            self._prepare(req)
            self.active.append(req)
        return True

    def _prepare(self, req: Request) -> None:
        """Keep the longest cached prefix of the prompt (at least one token is left to run)."""
        sess = req.session
        sess.bind()
        keep = min(common_prefix(sess.ids, req.prompt), len(req.prompt) - 1)
        req.continued = len(sess.ids) > 0 and keep == len(sess.ids)
        req.reused = keep
        del sess.ids[keep:]
        req.pending = req.prompt[keep:]
        for key, n in (("requests", 1), ("prompt_tokens", len(req.prompt)), ("reused_tokens", keep)):
            self.stats[key] += n

    def _step(self) -> None:
        """One forward over every active request's next tokens, then one sampled token for each request
        whose prompt is now all in the cache."""
        segments = [(req, req.pending[:PREFILL_CHUNK]) for req in self.active]
        logits = self.run_step([(req.session, toks) for req, toks in segments])
        self.stats["steps"] += 1
        finished = []
        for i, (req, toks) in enumerate(segments):
            req.pending = req.pending[len(toks) :]
            if req.pending:
                continue  # more of the prompt to run
            tok = req.sampler(logits[i : i + 1])
            req.out.append(tok)
            self.stats["sampled"] += 1
            if tok == self.eos or len(req.out) >= req.max_tokens:
                finished.append(req)
            else:
                req.pending = [tok]
        for req in finished:
            self.active.remove(req)
            req.done.set()

    def run_step(self, segments: list[tuple[Session, list[int]]]):
        """Run each session's new tokens (appended to its cache) in one forward; the float32 logits after
        each segment's last token, [len(segments), vocab]. The batcher's thread only (or no thread)."""
        torch, pool = self.torch, self.pool
        for sess, _ in segments:
            sess.bind()
        # one-token segments first, by slot: their keys are then views of runs of consecutive slots
        order = sorted(range(len(segments)), key=lambda i: (len(segments[i][1]) > 1, segments[i][0].slot))
        ids, positions, slots, groups, decode = [], [], [], [], []
        for i in order:
            sess, toks = segments[i]
            start, row = len(sess.ids), len(ids)
            ids += toks
            positions += range(start, start + len(toks))
            slots += [sess.slot] * len(toks)
            if len(toks) == 1:
                decode.append((sess.slot, start))
            else:
                groups.append((row, len(toks), [sess.slot], [start]))
        pool.reserve(max(positions) + 1)
        if decode:
            groups.insert(0, (0, 1, [s for s, _ in decode], [p for _, p in decode]))
        step = self.step_fn
        groups = [  # a decode group's query rows padded to decode_rows, a prefill's to the layers' rows
            make_group(torch, *g, pool, self.per_kv, step.decode_rows if g[1] == 1 else step.rows)
            for g in groups
        ]
        last = list(itertools.accumulate(len(segments[i][1]) for i in order))
        plan = make_plan(torch, pool, slots, positions, groups, step.rows)
        logits = step(ids, plan, [r - 1 for r in last])
        for sess, toks in segments:
            sess.ids += toks
        back = [0] * len(order)
        for k, i in enumerate(order):
            back[i] = k
        return logits[back]
