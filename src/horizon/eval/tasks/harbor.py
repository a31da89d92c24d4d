"""Harbor's task.toml as harbor 0.26.0 reads it: the fields it knows, its defaults, its migrations.

Harbor ignores keys it does not know; so do we, but each is named (a warning check-tasks prints).
Fields Harbor knows that no sandbox here applies (an agent or verifier `user`, GPUs, MCP servers,
healthchecks, a separate verifier environment, artifacts) are warnings too, never silent.

Defaults when a field is absent (Harbor's): no agent timeout, a 600 s verifier timeout, a
600 s build timeout, the public network (`network_mode = "public"`; the deprecated
`allow_internet = false` means no network). Whether a task without a network field gets the network
here is a safety switch, `eval.network` (horizon.eval.tasks.benchmark.network_allowed).
"""

from __future__ import annotations

import re

# the names harbor 0.26.0's task models define (harbor/models/task/config.py), by table
TOP = set(
    (
        "schema_version version task metadata verifier agent environment solution source"
        " multi_step_reward_strategy steps artifacts"
    ).split()
)
AGENT = {"timeout_sec", "user", "network_mode", "allowed_hosts"}
VERIFIER = {
    "timeout_sec",
    "env",
    "user",
    "environment_mode",
    "environment",
    "collect",
    "network_mode",
    "allowed_hosts",
}
ENVIRONMENT = set(
    (
        "build_timeout_sec docker_image os cpus memory_mb storage_mb gpus gpu_types tpu mcp_servers env"
        " skills_dir healthcheck workdir network_mode allowed_hosts allow_internet memory storage"
    ).split()
)
SOLUTION = {"env"}
STEP = {"name", "agent", "verifier", "min_reward", "healthcheck", "artifacts"}
TABLES = {"agent": AGENT, "verifier": VERIFIER, "environment": ENVIRONMENT, "solution": SOLUTION}
# known, but nothing here applies them: (table, key) -> why it matters
NOT_APPLIED = {
    ("agent", "user"): "the agent runs as the image's user",
    ("verifier", "user"): "the tests run as the image's user",
    ("verifier", "environment"): "the tests run in the agent's sandbox",
    ("verifier", "collect"): "nothing is collected after the tests",
    ("environment", "healthcheck"): "no healthcheck runs before the agent",
    ("environment", "mcp_servers"): "no MCP server is started",
    ("environment", "skills_dir"): "no skills are uploaded",
    ("agent", "network_mode"): "one network policy per task, not per phase",
    ("verifier", "network_mode"): "one network policy per task, not per phase",
    ("", "artifacts"): "no artifacts are collected",
}
NETWORK_MODES = ("public", "no-network", "allowlist")
_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.I)


def strip_canary(text: str) -> str:
    """Leading canary comment lines (HTML or `#` comments naming a canary) and the blank lines after them."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and _CANARY.match(lines[i].strip()):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])


def unknown_fields(meta: dict) -> list[tuple[str, str]]:
    """(field, what we do) for every key Harbor does not know, and every known one we do not apply."""
    out = [(k, "unknown field (Harbor ignores it; so does horizon)") for k in meta if k not in TOP]
    for table, known in TABLES.items():
        section = meta.get(table)
        if isinstance(section, dict):
            out += [
                (f"{table}.{k}", "unknown field (Harbor ignores it; so does horizon)")
                for k in section
                if k not in known
            ]
    for (table, key), why in NOT_APPLIED.items():
        section = meta if not table else meta.get(table)
        if isinstance(section, dict) and section.get(key) not in (None, [], {}, ""):
            out.append((f"{table}.{key}" if table else key, f"not applied here: {why}"))
    env = meta.get("environment") if isinstance(meta.get("environment"), dict) else {}
    if env.get("gpus"):
        out.append(("environment.gpus", "not applied here: sandboxes get no GPU"))
    if env.get("os") not in (None, "linux"):
        out.append(("environment.os", f"{env['os']!r}: only linux tasks run here"))
    for i, step in enumerate(meta.get("steps") or []):
        if isinstance(step, dict):
            out += [
                (f"steps[{i}].{k}", "unknown field (Harbor ignores it; so does horizon)")
                for k in step
                if k not in STEP
            ]
    return out


def declared_network(env: dict) -> str | None:
    """The network the task asks for (public | none | allowlist), None when it says nothing
    (Harbor: public). The deprecated allow_internet is migrated as Harbor migrates it."""
    mode = env.get("network_mode")
    if mode is not None:
        return {"no-network": "none"}.get(str(mode), str(mode))
    if env.get("allowed_hosts"):
        return "allowlist"
    if "allow_internet" in env and env["allow_internet"] is not None:
        return "public" if env["allow_internet"] else "none"
    return None
