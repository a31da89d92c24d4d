"""The `horizon` command: the stage functions, for use outside Snakemake.

horizon collect          drive the scripted teacher through the harness; write a corpus (jsonl)
horizon extract-template recover the harness prompt template from a corpus
horizon check-tasks      load a benchmark directory and report malformed tasks (file, field)
horizon oracle           run every task's reference solution in a sandbox and grade it
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _manifest(tasks: str, fmt: str, tmp: Path) -> Path:
    from horizon.eval.tasks import write_manifest

    out = tmp / "tasks.json"
    write_manifest(tasks, fmt, out, name=Path(tasks).name)
    return out


def cmd_collect(a) -> int:
    import tempfile

    from horizon.eval.collect import collect
    from horizon.eval.sandbox import toolchain

    with tempfile.TemporaryDirectory() as d, toolchain.temporary() as tools:
        info = collect(
            _manifest(a.tasks, a.format, Path(d)),
            a.template,
            a.out,
            variants=a.variants,
            sandbox=a.sandbox,
            concurrency=a.concurrency,
            seed=a.seed,
            sandbox_options={"toolchain": tools},
            style=a.style,
        )
    print(json.dumps(info))
    return 0


def cmd_extract(a) -> int:
    from horizon.eval.prompts import extract, extract_from_parquet

    if a.corpus.endswith(".parquet"):
        t = extract_from_parquet(a.corpus, a.out, a.confirmation)
    else:
        convs = []
        with open(a.corpus) as fh:
            for line in fh:
                if line.strip():
                    convs.append(json.loads(line)["conversations"])
                if len(convs) >= 2000:
                    break
        t = extract(convs, a.confirmation)
        t.save(a.out)
    print(f"wrote {a.out} (initial prompt: {len(t.initial)} characters)")
    return 0


def cmd_check(a) -> int:
    from horizon.eval.tasks import load_benchmark

    tasks, errors = load_benchmark(a.tasks, a.format)
    for t in tasks:
        print(f"ok     {t.id}  (agent {t.agent_timeout:.0f} s, tests {t.test_timeout:.0f} s)")
    for e in errors:
        print(f"ERROR  {e['task']}: {e['file']}: {e['field']}: {e['message']}")
    return 1 if errors else 0


def cmd_oracle(a) -> int:
    from horizon.eval.sandbox import make_sandbox, toolchain
    from horizon.eval.tasks import grade, load_benchmark, sandbox_spec

    tasks, errors = load_benchmark(a.tasks, a.format)
    failed = len(errors)
    with toolchain.temporary() as tools:
        for t in tasks:
            spec = sandbox_spec(t, f"oracle-{t.id}")
            sol = Path(t.path) / ("solution/solve.sh" if t.format == "harbor" else "solution.sh")
            with make_sandbox(a.sandbox, spec, toolchain=tools) as sb:
                sb.put(sol, "/tmp/solve.sh")
                sb.exec(["bash", "/tmp/solve.sh"], timeout=t.agent_timeout)
                g = grade(t, sb)
            print(f"{'pass' if g.success else 'FAIL'}  {t.id}  reward {g.reward:.2f}")
            failed += not g.success
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    from horizon.io import setup_logging

    p = argparse.ArgumentParser(
        prog="horizon", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="scripted teacher -> corpus jsonl")
    c.add_argument("--tasks", required=True)
    c.add_argument("--format", default="harbor", choices=["harbor", "tb1"])
    c.add_argument("--template", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--variants", type=int, default=4)
    c.add_argument("--sandbox", default="local")
    c.add_argument("--concurrency", type=int, default=2)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--style", default="careful", choices=["careful", "blind"], help="inspect first, or act blind"
    )
    c.set_defaults(fn=cmd_collect)
    e = sub.add_parser("extract-template", help="corpus -> prompt template yaml")
    e.add_argument("--corpus", required=True, help="trajectories.parquet or a corpus .jsonl")
    e.add_argument("--out", required=True)
    e.add_argument("--confirmation", default="mark the task as complete")
    e.set_defaults(fn=cmd_extract)
    k = sub.add_parser("check-tasks", help="validate a benchmark directory")
    k.add_argument("tasks")
    k.add_argument("--format", default="harbor", choices=["harbor", "tb1"])
    k.set_defaults(fn=cmd_check)
    o = sub.add_parser("oracle", help="grade every task's reference solution")
    o.add_argument("tasks")
    o.add_argument("--format", default="harbor", choices=["harbor", "tb1"])
    o.add_argument("--sandbox", default="local")
    o.set_defaults(fn=cmd_oracle)
    a = p.parse_args(argv)
    setup_logging()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
