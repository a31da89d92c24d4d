"""Model backends for the agent loop.

Every backend sees the conversation serialized exactly as in training (our ChatML writer, every
past `<think>` kept): the stock Qwen3 chat template drops past thinking, so evaluation must not go
through it. The in-process backend generates from our serializer's token ids; the HTTP backend
sends those same token ids to an OpenAI-compatible *completions* endpoint (vLLM accepts a list of
token ids as the prompt), so no server-side template is involved at all.

- TransformersBackend: in-process generation on CPU or GPU (tests, the demo). On CPU by default
  through horizon.eval.models.batching: each calling thread (one attempt at a time) keeps its conversation's
  KV cache between episodes, and the threads of a job are batched together; `kv_cache=False,
  batching=False` (and a GPU) is one plain `generate` call per episode.
- CompletionsBackend: an OpenAI-compatible server (vLLM) at a base URL.
- ChatBackend: any OpenAI-compatible *chat* endpoint (a hosted teacher, or vLLM's chat route): the
  conversation goes as role/content messages and the server applies its own template, so it is for
  teachers collecting a corpus, not for evaluating our students.
- VLLMServer: starts `vllm serve <model dir>` on this job's GPU, waits for /health, and stops it
  (process group: SIGTERM, then SIGKILL) even when the job fails.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("horizon.eval.models.backends")


class BackendError(RuntimeError):
    """The model backend failed (an infrastructure error, not the model's answer)."""


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    cached_tokens: int | None = None  # prompt tokens served from a cache (None: the backend cannot tell)
    continued: bool | None = None  # the cache held this caller's whole previous context (in-process only)


class Backend:
    def prompt_tokens(self, messages: Sequence[dict]) -> int:
        raise NotImplementedError

    def complete(
        self, messages: Sequence[dict], seed: int, max_tokens: int, timeout: float | None = None
    ) -> Completion:
        raise NotImplementedError

    def close(self) -> None:
        pass


class _Serialized(Backend):
    def __init__(self, tokenizer_dir: str | Path):
        from horizon.data.chatml import ChatSerializer
        from horizon.data.tokenizer import load_serializing

        self.tokenizer_dir = tokenizer_dir
        self.tokenizer = load_serializing(tokenizer_dir)  # ids in and out only
        self.serializer = ChatSerializer(self.tokenizer)
        self.im_end = self.serializer.im_end

    def prompt_ids(self, messages: Sequence[dict]) -> list[int]:
        return self.serializer.prompt_ids(messages)

    def prompt_tokens(self, messages: Sequence[dict]) -> int:
        return len(self.prompt_ids(messages))


class TransformersBackend(_Serialized):
    """In-process generation (CPU or one GPU).

    On CPU, kv_cache: each calling thread keeps its conversation's keys and values between calls and
    runs only the tokens after the longest common prefix of its cache and the new prompt (an attempt
    runs in one thread, so its episodes extend each other; a changed history falls back to the common
    prefix). batching: the calls of all threads run in shared steps. Neither changes an output bit
    (batching.py, kvstep.py). With both off, on a GPU, or for a model the batcher cannot run, every call is
    one plain `generate` under a lock, as before they existed.
    """

    def __init__(
        self,
        model_dir: str | Path,
        tokenizer_dir: str | Path,
        temperature: float = 0.0,
        top_p: float = 1.0,
        device: str | None = None,
        kv_cache: bool = True,
        batching: bool = True,
    ):
        import torch

        super().__init__(tokenizer_dir)
        self.torch, self.model_dir = torch, str(model_dir)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.temperature, self.top_p = temperature, top_p
        self.kv_cache = kv_cache
        self.lock = threading.Lock()
        self.batcher = None
        self.generate_stats = {"calls": 0, "cpu_seconds": 0.0}
        engine = kv_cache or batching
        if engine and self.device != "cpu":
            log.warning(
                "eval.kv_cache/eval.batching apply to CPU runs (on a GPU use eval.backend: vllm); "
                "one generate() per episode"
            )
            engine = False
        # the engine's weights read from the checkpoint where the reader covers it (a plain Qwen3: no
        # import of transformers' modeling code), else the model loaded through transformers
        decoder = None
        if engine:
            from horizon.eval.models.kvstep import decoder_of_checkpoint

            decoder = decoder_of_checkpoint(self.model_dir, self.dtype)
        self.model = self._load_model() if decoder is None else None
        if engine:
            self.batcher = self._make_batcher(decoder if decoder is not None else self.model, batching)
        if self.batcher is None and self.model is None:  # read, but this machine cannot run the engine
            self.model = self._load_model()
        self.sessions = threading.local()

    def _load_model(self):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=self.dtype).to(self.device).eval()

    def _make_batcher(self, weights, batching: bool):
        """The generation engine over a Decoder or a transformers model; None (one generate() per
        episode) where it cannot run the model or this machine."""
        from horizon.eval.models.batching import Batcher
        from horizon.eval.models.kvstep import Qwen3Step

        try:
            return Batcher(Qwen3Step(weights), self.im_end, batching=batching)
        except ValueError as e:  # the same outputs, only slower: say so and go on
            log.warning("%s: eval.kv_cache/eval.batching ignored, one generate() per episode", e)
            return None

    def complete(self, messages, seed, max_tokens, timeout=None) -> Completion:
        """`timeout` is not applied in process: cutting a generation by the clock would make it irreproducible."""
        ids = self.prompt_ids(messages)
        if self.batcher is None:
            new = self._generate(ids, seed, max_tokens)
            reused, continued = None, None
        else:
            new, reused, continued = self._batched_generate(ids, seed, max_tokens)
        finish = "length"
        if self.im_end in new:
            new = new[: new.index(self.im_end)]
            finish = "stop"
        text = self.tokenizer.decode(new, skip_special_tokens=False)
        return Completion(text, len(ids), len(new) + (finish == "stop"), finish, reused, continued)

    def _batched_generate(self, ids: list[int], seed: int, max_tokens: int) -> tuple[list[int], int, bool]:
        from horizon.eval.models.batching import Request, Sampler

        session = getattr(self.sessions, "session", None)
        if session is None or not self.kv_cache:
            session = self.sessions.session = self.batcher.session()
        sampler = Sampler(self.temperature, self.top_p, seed, self.device)
        req = self.batcher.run(Request(session, ids, max_tokens, sampler))
        return req.out, req.reused, req.continued

    def _generate(self, ids: list[int], seed: int, max_tokens: int) -> list[int]:
        """One `generate` call (both switches off)."""
        torch = self.torch
        with self.lock:
            cpu = time.thread_time()
            torch.manual_seed(seed)
            x = torch.tensor([ids], device=self.device)
            kw = (
                {"do_sample": False}
                if self.temperature <= 0
                else {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}
            )
            with torch.inference_mode():
                out = self.model.generate(
                    x,
                    attention_mask=torch.ones_like(x),
                    max_new_tokens=max_tokens,
                    eos_token_id=self.im_end,
                    pad_token_id=self.pad_token_id(),
                    top_k=None,
                    **kw,
                )
            self.generate_stats["calls"] += 1
            self.generate_stats["cpu_seconds"] += time.thread_time() - cpu
        return out[0, len(ids) :].tolist()

    def pad_token_id(self) -> int | None:
        """generate()'s pad id, from the tokenizer as transformers loads it (that path imports it anyway)."""
        if not hasattr(self, "_pad_id"):
            from horizon.data.tokenizer import load

            self._pad_id = load(self.tokenizer_dir).pad_token_id
        return self._pad_id

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()
        elif self.generate_stats["calls"]:
            log.info(
                "generate(): %d calls, %.1f s CPU",
                self.generate_stats["calls"],
                self.generate_stats["cpu_seconds"],
            )


class CompletionsBackend(_Serialized):
    """An OpenAI-compatible /v1/completions endpoint, prompted with our serializer's token ids.

    The `openai` client does the HTTP: retries with backoff on connection errors, 408/409/429 and
    5xx (`retries`), timeouts per call. A prompt longer than the server's context is not an error
    of the infrastructure: it ends the attempt (finish_reason context_length).
    """

    def __init__(
        self,
        base_url: str,
        tokenizer_dir: str | Path,
        model: str = "horizon",
        temperature: float = 0.6,
        top_p: float = 0.95,
        api_key: str | None = None,
        retries: int = 3,
    ):
        import openai

        super().__init__(tokenizer_dir)
        root = base_url.rstrip("/")
        self.url = root if root.endswith("/v1") else root + "/v1"
        self.model, self.temperature, self.top_p = model, temperature, top_p
        self.client = openai.OpenAI(
            base_url=self.url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
            max_retries=retries,
        )

    def complete(self, messages, seed, max_tokens, timeout=None) -> Completion:
        import openai

        ids = self.prompt_ids(messages)
        try:
            out = self.client.completions.create(
                model=self.model,
                prompt=ids,
                max_tokens=max_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                seed=seed,
                timeout=timeout or 3600,
                extra_body={"stop_token_ids": [self.im_end], "skip_special_tokens": False},
            )
        except openai.BadRequestError as e:
            if "maximum context length" in str(e):
                return Completion("", len(ids), 0, "context_length")
            raise BackendError(f"{self.url}: {e}") from None
        except openai.OpenAIError as e:
            raise BackendError(f"{self.url}: {type(e).__name__}: {e}") from None
        if not out.choices:
            raise BackendError(f"{self.url}: the answer has no choices")
        usage = out.usage
        details = getattr(usage, "prompt_tokens_details", None)  # vLLM with --enable-prompt-tokens-details
        return Completion(
            out.choices[0].text,
            usage.prompt_tokens if usage else len(ids),
            usage.completion_tokens if usage else 0,
            out.choices[0].finish_reason or "stop",
            cached_tokens=getattr(details, "cached_tokens", None),
        )

    def close(self) -> None:
        self.client.close()


class ChatBackend(Backend):
    """An OpenAI-compatible /v1/chat/completions endpoint (a hosted teacher; `vllm serve` of a local model).

    The server's chat template renders the messages. A reasoning model's separate reasoning
    (`reasoning_content`, or `reasoning`) comes back as `<think>...</think>` before the answer, as the
    corpus writes it. The context the loop budgets against is counted with `tokenizer_dir` when given,
    else estimated at 3 characters a token (a hosted model's tokenizer is not at hand; this errs on the
    side of summarising early). Usage (prompt, completion, cached tokens) is the server's.
    """

    CHARS_PER_TOKEN = 3

    def __init__(
        self,
        base_url: str,
        model: str,
        temperature: float = 0.7,
        top_p: float = 1.0,
        api_key: str | None = None,
        retries: int = 3,
        tokenizer_dir: str | Path | None = None,
        timeout: float = 600.0,
    ):
        import openai

        root = base_url.rstrip("/")
        self.url = root if root.endswith("/v1") else root + "/v1"
        self.model, self.temperature, self.top_p, self.timeout = model, temperature, top_p, timeout
        self.serializer = None
        if tokenizer_dir:
            from horizon.data.chatml import ChatSerializer
            from horizon.data.tokenizer import load

            self.serializer = ChatSerializer(load(tokenizer_dir))
        self.client = openai.OpenAI(
            base_url=self.url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
            max_retries=retries,
        )

    def prompt_tokens(self, messages) -> int:
        if self.serializer is not None:
            return len(self.serializer.prompt_ids(messages))
        return sum(len(m["content"]) // self.CHARS_PER_TOKEN + 4 for m in messages)

    def complete(self, messages, seed, max_tokens, timeout=None) -> Completion:
        import openai

        try:
            out = self.client.chat.completions.create(
                model=self.model,
                messages=[{"role": m["role"], "content": m["content"]} for m in messages],
                max_tokens=max_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                seed=seed,
                timeout=min(timeout or self.timeout, self.timeout),
            )
        except openai.BadRequestError as e:
            if "context length" in str(e) or "context_length" in str(e):
                return Completion("", self.prompt_tokens(messages), 0, "context_length")
            raise BackendError(f"{self.url}: {e}") from None
        except openai.OpenAIError as e:
            raise BackendError(f"{self.url}: {type(e).__name__}: {e}") from None
        if not out.choices:
            raise BackendError(f"{self.url}: the answer has no choices")
        msg = out.choices[0].message
        text = msg.content or ""
        thinking = getattr(msg, "reasoning_content", None) or getattr(msg, "reasoning", None)
        if thinking and "<think>" not in text:
            text = f"<think>\n{thinking.strip()}\n</think>\n\n{text}"
        usage = out.usage
        details = getattr(usage, "prompt_tokens_details", None)
        return Completion(
            text,
            usage.prompt_tokens if usage else self.prompt_tokens(messages),
            usage.completion_tokens if usage else len(text) // self.CHARS_PER_TOKEN,
            out.choices[0].finish_reason or "stop",
            cached_tokens=getattr(details, "cached_tokens", None),
        )

    def close(self) -> None:
        self.client.close()


def _healthy(url: str) -> bool:
    """One probe of a server's health endpoint (the start-up poll, not an API call)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """`vllm serve` for one rollout job, on its GPU; always stopped, also when the job fails.

    Prefix caching is on by default (`prefix_caching`): an episode's token-id prompt extends the previous
    episode's prompt and answer token for token (our serializer encodes turn by turn), so the server reuses
    the KV blocks of the whole history instead of recomputing it; `--enable-prompt-tokens-details` makes it
    report how many prompt tokens it served from the cache (the attempt records sum them).
    """

    def __init__(
        self,
        model_dir: str | Path,
        context_length: int,
        seed: int,
        extra_args: Sequence[str] = (),
        command: Sequence[str] = ("vllm", "serve"),
        log_path: str | Path | None = None,
        startup_timeout: float = 1800,
        name: str = "horizon",
        prefix_caching: bool = True,
    ):
        self.model_dir, self.context_length, self.seed = str(model_dir), context_length, seed
        self.prefix_caching = prefix_caching
        self.extra, self.command, self.name = list(extra_args), list(command), name
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen | None = None
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        caching = (
            ["--enable-prefix-caching", "--enable-prompt-tokens-details"]
            if self.prefix_caching
            else ["--no-enable-prefix-caching"]
        )
        return [
            *self.command,
            self.model_dir,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            self.name,
            "--max-model-len",
            str(self.context_length),
            "--seed",
            str(self.seed),
            "--disable-log-requests",
            *caching,
            *self.extra,
        ]

    def start(self) -> VLLMServer:
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        log.info("starting %s", " ".join(self.argv()))
        try:
            self.proc = subprocess.Popen(
                self.argv(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        except FileNotFoundError:
            raise BackendError(
                f"{self.command[0]} not found: install vLLM where rollouts run (the GPU image: envs/Dockerfile.gpu)"
            ) from None
        finally:
            if out is not subprocess.DEVNULL:
                out.close()  # the server holds its own descriptor
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BackendError(
                    f"vllm exited with {self.proc.returncode} before it was healthy (see {self.log_path})"
                )
            if _healthy(self.base_url + "/health"):
                log.info("vllm healthy at %s", self.base_url)
                return self
            time.sleep(1 + random.random())
        self.stop()
        raise BackendError(f"vllm was not healthy within {self.startup_timeout:.0f} s")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
