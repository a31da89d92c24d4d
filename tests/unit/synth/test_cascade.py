"""The cascade's task.toml is a Harbor task."""

from horizon.eval.tasks.benchmark import load_harbor
from horizon.synth.cascade import task_toml
from horizon.synth.seeds import Seed
from tests.helpers import synth_settings


def test_task_toml_is_a_harbor_task(tmp_path):
    seed = Seed("so-1", "qa", tags=("bash", 'bad"tag'))
    s = synth_settings(
        model="a", review_model="r", resources={"cpus": 2, "memory_mb": 512, "agent_timeout_sec": 90}
    )
    (tmp_path / "so-1" / "environment").mkdir(parents=True)
    (tmp_path / "so-1" / "environment" / "Dockerfile").write_text("FROM x\nWORKDIR /app\n")
    (tmp_path / "so-1" / "tests").mkdir()
    (tmp_path / "so-1" / "tests" / "test.sh").write_text("exit 0\n")
    (tmp_path / "so-1" / "instruction.md").write_text("Write /app/out.txt.\n")
    (tmp_path / "so-1" / "task.toml").write_text(task_toml(seed, s))
    t = load_harbor(tmp_path / "so-1")
    assert (t.cpus, t.memory_mb, t.agent_timeout, t.allow_internet) == (2, 512, 90.0, False)
    assert t.extra["tags"] == ["synthesized", "qa", "bash"] and not t.warnings
