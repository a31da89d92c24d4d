"""Dockerfiles replayed as Docker builds them: each form of ENV, ARG and WORKDIR, built by the tests'
Docker daemon and replayed by the local sandbox, gives the same environment, working directory and
files (what a command in the sandbox prints), at build time (RUN) and at run time."""

import pytest

from horizon.eval.sandbox import make_sandbox
from horizon.eval.sandbox.local import syslayer
from horizon.eval.tasks.benchmark import load_harbor, sandbox_spec

pytestmark = [pytest.mark.engine, pytest.mark.slow]
HEAD = "ARG BASE_IMAGE=horizon-base:bookworm\nFROM ${BASE_IMAGE}\n"
# form -> (the Dockerfile's lines after FROM, the variables to print)
FORMS = {
    "venv first on PATH": ("ENV PATH=/opt/venv/bin:$PATH\nRUN mkdir -p /opt/venv/bin\n", "PATH"),
    "quoted ${PATH}": ('ENV PATH="/root/.local/bin:${PATH}"\n', "PATH"),
    "ARG default": ('ARG VERSION=1.2\nENV V=$VERSION\nRUN echo "run $VERSION" > /app/arg.txt\n', "V VERSION"),
    "chained ENV": ("ENV A=1\nENV B=$A/x\nENV C=${B}/y\n", "A B C"),
    "two pairs, one line": ("ENV P=/p Q=${P}/q\n", "P Q"),
    "legacy ENV key value": ("ENV LEGACY some value with spaces\n", "LEGACY"),
    "${VAR:-word} ${VAR:+word}": ("ENV A=set\nENV D=${UNSET:-dflt} E=${A:+alt} F=${UNSET:+no}\n", "A D E F"),
    "relative WORKDIR": ("WORKDIR /app\nWORKDIR sub\nRUN pwd > /app/pwd.txt\n", ""),
    "writes into the system directories": (  # the build's own layer over the host's (syslayer.py)
        "RUN ln -sf /usr/bin/python3 /usr/bin/python && echo 'x=1' > /etc/horizon-form.conf"
        " && mkdir -p /usr/local/share/hz && echo usr > /usr/local/share/hz/f && useradd -M hzform\n"
        "RUN readlink /usr/bin/python > /app/link.txt && cat /etc/horizon-form.conf > /app/conf.txt"
        " && cat /usr/local/share/hz/f > /app/usr.txt && getent passwd hzform | cut -d: -f1,6 > /app/user.txt\n",
        "",
    ),
    "ENV after RUN": (
        'RUN echo "$PATH" > /app/build-path.txt\nENV LATE=$PATH:/late\nRUN echo "$LATE" > /app/late.txt\n',
        "LATE",
    ),
}
PROBE = 'pwd; for k in PATH {keys}; do printf "%s=%s\\n" "$k" "$(printenv "$k" || echo UNSET)"; done; cd /app && for f in $(ls *.txt 2>/dev/null); do echo "$f: $(cat "$f")"; done'


def task_dir(tmp_path, name: str, body: str):
    d = tmp_path / name.replace(" ", "-").replace("$", "").replace("{", "").replace("}", "").replace(":", "")
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "tests" / "test.sh").write_text("#!/bin/bash\ntrue\n")
    (d / "task.toml").write_text("[verifier]\ntimeout_sec = 60.0\n")
    (d / "instruction.md").write_text("nothing")
    (d / "environment" / "Dockerfile").write_text(HEAD + "RUN mkdir -p /app\n" + body)
    return load_harbor(d)


def observe(kind: str, task, keys: str, tools) -> str:
    with make_sandbox(kind, sandbox_spec(task, f"replay-{kind}"), toolchain=tools) as sb:
        r = sb.exec(["sh", "-c", PROBE.format(keys=keys)], timeout=60)
        assert r.rc == 0, r
        return r.stdout


@pytest.mark.parametrize("form", list(FORMS))
def test_docker_and_local_see_the_same_image(dockerd, tools, tmp_path, form):
    if form == "writes into the system directories" and not syslayer.available():
        pytest.skip("the build's layer needs root and a kernel that idmaps mounts (Linux >= 5.19)")
    body, keys = FORMS[form]
    task = task_dir(tmp_path, form, body)
    built, replayed = observe("docker", task, keys, tools), observe("local", task, keys, tools)
    print(f"\n{form}:\n{built}")
    assert replayed == built
    assert (
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in built
    )  # Docker's default PATH kept
