"""The `horizon` command: the stage functions, for use outside Snakemake.

horizon collect          drive the scripted teacher through the harness; write a corpus (jsonl)
horizon extract-template recover the harness prompt template from a corpus
horizon terminus-template the published Terminus-2's prompt turns as a template (make refenv)
horizon check-tasks      load a benchmark directory and report malformed tasks (file, field)
horizon oracle           run every task's reference solution in a sandbox and grade it
horizon plan             GPU-hours per stage and in total of a grid, before (or while) it runs
horizon base-image       the docker sandbox's offline base image (debootstrap), for tasks whose FROM
                         image cannot be pulled here (eval.sandbox_options.image_map)
horizon init             a standalone, commented config for your corpus, tasks and student
horizon check-corpus     what a corpus makes of a config: counts, token lengths, impossible settings
horizon gpu-check        prove a GPU node (the package's CUDA tests, the workflow, training, scoring and
                         generation rates) in minutes, offline; the rates feed `horizon plan --rates`
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from horizon.config import schema_property

FORMAT_HELP = "the tasks' format (default: read from them: task.toml is harbor, task.yaml tb1)"


def _task_format(a) -> str:
    """--format, else the format the task directories' marker files say (an error names the folder)."""
    from horizon.eval.tasks.formats import FormatError, detect

    if a.format:
        return a.format
    try:
        fmt = detect(a.tasks)
    except FormatError as e:
        raise SystemExit(f"horizon {a.cmd}: {e}") from None
    print(f"{a.tasks}: {fmt} tasks (read from them; --format to say otherwise)", file=sys.stderr)
    return fmt


def _manifest(tasks: str, fmt: str, tmp: Path) -> Path:
    from horizon.eval.tasks.benchmark import write_manifest

    out = tmp / "tasks.json"
    write_manifest(tasks, fmt, out, name=Path(tasks).name)
    return out


def cmd_collect(a) -> int:
    import tempfile

    from horizon.eval.collect.corpus import collect
    from horizon.eval.sandbox import toolchain

    with tempfile.TemporaryDirectory() as d, toolchain.shared() as tools:
        info = collect(
            _manifest(a.tasks, _task_format(a), Path(d)),
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


def cmd_terminus_template(a) -> int:
    from horizon.eval.reference.environment import export_template

    t = export_template(a.source, a.out, a.reference_env)
    print(json.dumps({"template": a.out, "kinds": sorted(t.turns)}))
    return 0


def cmd_extract(a) -> int:
    from horizon.eval.agent.extract import extract, extract_from_parquet, fallback_template

    if a.corpus.endswith(".parquet"):
        t = extract_from_parquet(a.corpus, a.out, a.confirmation, env=a.reference_env)
    else:
        convs = []
        with open(a.corpus) as fh:
            for line in fh:
                if line.strip():
                    convs.append(json.loads(line)["conversations"])
                if len(convs) >= 2000:
                    break
        t = extract(convs, a.confirmation, fallback=fallback_template(convs, a.reference_env))
        t.save(a.out)
    print(f"wrote {a.out} (initial prompt: {len(t.initial)} characters)")
    return 0


def cmd_check(a) -> int:
    """Every task loaded, with its warnings; with --sandbox, what that sandbox cannot run (a named skip)."""
    from horizon.eval.oracle import describe, missing_solutions, static_unsupported
    from horizon.eval.tasks.benchmark import load_benchmark

    tasks, errors = load_benchmark(a.tasks, _task_format(a))
    skipped = 0
    for t in tasks:
        why = static_unsupported(t, a.sandbox) if a.sandbox else None
        if why:
            skipped += 1
            print(f"skip   {t.id}  unsupported by the {a.sandbox} sandbox: {why}")
        else:
            print(f"ok     {t.id}  {describe(t)}")
        for w in t.warnings:
            print(f"warn   {t.id}: {w['file']}: {w['field']}: {w['message']}")
        for path in missing_solutions(t):
            print(f"warn   {t.id}: {path}: -: no reference solution (horizon oracle cannot check the task)")
    for e in errors:
        print(f"ERROR  {e['task']}: {e['file']}: {e['field']}: {e['message']}")
    print(
        f"{len(tasks) + len(errors)} task directories: {len(tasks) - skipped} ok, {skipped} unsupported"
        f"{f' by the {a.sandbox} sandbox' if a.sandbox else ''}, {len(errors)} malformed"
    )
    return 1 if errors else 0


def cmd_oracle(a) -> int:
    """Every task's reference solution, graded in its own sandbox with the task's resources; one task
    failing in any way (its sandbox included) is reported with why and the end of the grader's
    output, a task the sandbox cannot run is a named skip, and the others still run."""
    from horizon.eval.oracle import run_one
    from horizon.eval.sandbox import sweep_run, toolchain
    from horizon.eval.tasks.benchmark import load_benchmark

    tasks, errors = load_benchmark(a.tasks, _task_format(a), a.only)
    if a.sandbox == "local":  # what killed runs left (by their dead pid: never another live job's)
        sweep_run(a.sandbox, "oracle")
    options = {"image_map": dict(m.split("=", 1) for m in a.map_image)} if a.map_image else {}
    counts = {"pass": 0, "FAIL": len(errors), "skip": 0}
    for e in errors:
        print(f"FAIL  {e['task']}  malformed: {e['file']}: {e['field']}: {e['message']}")
    with toolchain.shared() as tools:
        for t in tasks:
            r = run_one(a.sandbox, t, tools, a.network, options)
            counts[r.status] += 1
            line = f"{r.status:4}  {t.id}" + (f"  reward {r.reward:.2f}" if r.status != "skip" else "")
            print(line + (f"  ({r.why})" if r.why else ""), flush=True)
            if r.tail:
                print("\n".join(f"      | {x}" for x in r.tail.splitlines()), flush=True)
    print(
        f"oracle ({a.sandbox}): {counts['pass']} passed, {counts['FAIL']} failed, {counts['skip']} skipped "
        f"(unsupported) of {len(tasks) + len(errors)}"
    )
    return 1 if counts["FAIL"] else 0


def cmd_plan(a) -> int:
    import os

    from horizon.config import ConfigError, validate
    from horizon.configfiles import combine
    from horizon.report.plan import make_plan
    from horizon.resources import checkout

    combined = combine(a.configfile, workdir=a.directory)
    for note in combined.notes:
        print(note, file=sys.stderr)
    try:
        cfg = validate(combined.config)
    except ConfigError as e:
        print(f"horizon plan: {e}", file=sys.stderr)
        return 1
    results = Path(a.directory) / cfg["results"] if a.from_results else None
    profile, repo = Path(a.profile), checkout()
    if not (profile / "config.yaml").exists() and repo and (repo / a.profile / "config.yaml").exists():
        profile = repo / a.profile  # a profile name, as `snakemake --profile slurm` finds it
    try:
        text = make_plan(cfg, profile, results, title=" + ".join(a.configfile), rates_file=a.rates,
                         gpu_model=os.environ.get("HORIZON_GPU_MODEL"))  # fmt: skip
    except ValueError as e:
        print(f"horizon plan: {e}", file=sys.stderr)
        return 1
    print(text)
    return 0


def cmd_init(a) -> int:
    from horizon.study.init import InitError, Request, init

    mode = "cpu" if a.cpu else "cluster" if a.cluster else None
    req = Request(Path(a.directory), a.corpus, a.tasks, a.format, a.student, mode, a.sample, a.force)
    try:
        init(req)
    except (InitError, FileNotFoundError) as e:
        print(f"horizon init: {e}", file=sys.stderr)
        return 1
    return 0


def cmd_check_corpus(a) -> int:
    from horizon.study.check import check_corpus

    return check_corpus(a.configfile, Path(a.directory), a.sample, a.config)


def cmd_gpu_check(a) -> int:
    from horizon.gpucheck.runner import TITLES, Options, run
    from horizon.resources import checkout

    shape = a.shape or ("tiny" if a.cpu else "1.7b" if a.quick else "8b")
    boxes = {}
    for item in a.box:
        stage, _, seconds = item.partition("=")
        if stage not in TITLES or not seconds.replace(".", "", 1).isdigit():
            print(f"horizon gpu-check: --box {item!r}: give STAGE=SECONDS, STAGE one of {', '.join(TITLES)}",
                  file=sys.stderr)  # fmt: skip
            return 2
        boxes[stage] = float(seconds)
    opts = Options(shape=shape, cpu=a.cpu, quick=a.quick, out=Path(a.out),
                   workdir=Path(a.workdir) if a.workdir else None, disk_gib=a.disk_gib,
                   only=list(a.only or TITLES), boxes=boxes, argv=["horizon", *a.argv])  # fmt: skip
    if opts.workdir is not None:
        opts.workdir.mkdir(parents=True, exist_ok=True)
    return run(opts, checkout())


def cmd_base_image(a) -> int:
    """The base image in the Docker daemon (or Podman), made by debootstrap unless it is there; a named error
    otherwise."""
    import subprocess

    from horizon.eval.sandbox import SandboxError
    from horizon.eval.sandbox.docker.baseimage import build_base_image
    from horizon.eval.sandbox.docker.sandbox import BASE_IMAGE, client

    try:
        if a.engine == "podman":
            from horizon.eval.sandbox.podman import service

            c = client(service.ensure())
        else:
            c = None
        tag = build_base_image(a.tag or BASE_IMAGE, suite=a.suite, workdir=a.workdir, mirror=a.mirror, c=c)
    except SandboxError as e:
        print(f"horizon base-image: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        tail = (e.stderr or b"").decode(errors="replace").strip()[-1000:]
        print(f"horizon base-image: {e.cmd[0]} failed (exit {e.returncode}): {tail}", file=sys.stderr)
        return 1
    print(json.dumps({"image": tag}))
    return 0


def _config_default(*keys: str) -> dict:
    """argparse's default (and choices, for an enum) of an option that stands for a config key."""
    prop = schema_property(*keys)
    return {"default": prop["default"], **({"choices": prop["enum"]} if "enum" in prop else {})}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="horizon", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="scripted teacher -> corpus jsonl")
    c.add_argument("--tasks", required=True)
    c.add_argument("--format", default=None, choices=["harbor", "tb1"], help=FORMAT_HELP)
    c.add_argument("--template", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--variants", type=int, **_config_default("corpus", "collect", "variants"))
    c.add_argument("--sandbox", default="local")
    c.add_argument("--concurrency", type=int, **_config_default("corpus", "collect", "concurrency"))
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--style", **_config_default("corpus", "collect", "style"), help="inspect first, or act blind"
    )
    c.set_defaults(fn=cmd_collect)
    e = sub.add_parser("extract-template", help="corpus -> prompt template yaml")
    e.add_argument("--corpus", required=True, help="trajectories.parquet or a corpus .jsonl")
    e.add_argument("--out", required=True)
    e.add_argument("--confirmation", **_config_default("corpus", "confirmation_pattern"))
    e.add_argument("--reference-env", default=None, help="the reference Terminus-2 environment (make refenv)")
    e.set_defaults(fn=cmd_extract)
    t = sub.add_parser("terminus-template", help="the published Terminus-2's prompt turns -> template yaml")
    t.add_argument("source", choices=["terminus-2-harbor", "terminus-2-tb1"])
    t.add_argument("--out", required=True)
    t.add_argument("--reference-env", default=None, help="default .venv-harbor (make refenv)")
    t.set_defaults(fn=cmd_terminus_template)
    k = sub.add_parser("check-tasks", help="validate a benchmark directory")
    k.add_argument("tasks")
    k.add_argument("--format", default=None, choices=["harbor", "tb1"], help=FORMAT_HELP)
    k.add_argument(
        "--sandbox",
        default=None,
        choices=schema_property("eval", "sandbox")["enum"],
        help="also report what this sandbox cannot run (without running anything)",
    )
    k.set_defaults(fn=cmd_check)
    o = sub.add_parser("oracle", help="grade every task's reference solution")
    o.add_argument("tasks")
    o.add_argument("--format", default=None, choices=["harbor", "tb1"], help=FORMAT_HELP)
    o.add_argument("--sandbox", default="local")
    o.add_argument(
        "--network",
        **_config_default("eval", "network"),
        help="which tasks get the network (config eval.network)",
    )
    o.add_argument(
        "--map-image",
        action="append",
        default=[],
        metavar="FROM=LOCAL",
        help="docker: build FROM this local image instead (eval.sandbox_options.image_map)",
    )
    o.add_argument("--only", nargs="+", default=None, help="these task directories only")
    o.set_defaults(fn=cmd_oracle)
    n = sub.add_parser("plan", help="GPU-hours per stage and in total, at the profile's GPU counts")
    n.add_argument(
        "--configfile", nargs="+", default=["config.yaml"], help="config file(s), combined as snakemake does"
    )
    n.add_argument("--rates", default=None, metavar="GPU-CHECK.json",
                   help="rates measured by horizon gpu-check on a node replace the estimates")  # fmt: skip
    n.add_argument("--profile", default="slurm", help="profile directory whose GPU counts jobs get")
    n.add_argument("--from-results", action="store_true", help="use what finished jobs measured")
    n.add_argument("--directory", default=".", help="working directory of the run (for --from-results)")
    n.set_defaults(fn=cmd_plan)
    b = sub.add_parser("base-image", help="the docker sandbox's base image without a registry (debootstrap)")
    b.add_argument(
        "--tag",
        default=None,
        help="the image's name (default horizon-base:bookworm: eval.sandbox_options.base_image's)",
    )
    b.add_argument("--suite", default="bookworm", help="the Debian release debootstrap installs")
    b.add_argument("--mirror", default=None, help="the Debian mirror (default: debootstrap's)")
    b.add_argument(
        "--workdir", default=None, help="where the root file system is made (default: the temp dir)"
    )
    b.add_argument(
        "--engine",
        default="docker",
        choices=["docker", "podman"],
        help="the engine to import it into (podman: eval.sandbox_options.podman_socket's, else CONTAINER_HOST's)",
    )
    b.set_defaults(fn=cmd_base_image)
    i = sub.add_parser("init", help="write DIR/config.yaml for your corpus, tasks and student")
    i.add_argument("directory", help="the study's folder (config.yaml and, when run, results/)")
    i.add_argument(
        "--corpus", required=True, help="a .jsonl/.jsonl.gz/.parquet file or folder, or a hub dataset id"
    )
    i.add_argument("--tasks", default=None, help="a folder of task directories (default: the demo's tasks)")
    i.add_argument(
        "--format",
        default=None,
        choices=["harbor", "tb1"],
        help="the tasks' format (default: read from them)",
    )
    i.add_argument("--student", default="tiny", help="a hub model id or local directory, or `tiny` (built)")
    m = i.add_mutually_exclusive_group()
    m.add_argument("--cpu", action="store_true", help="the demo's settings (default with --student tiny)")
    m.add_argument("--cluster", action="store_true", help="the paper's settings (default otherwise)")
    i.add_argument(
        "--sample", type=int, default=2000, help="trajectories tokenized to measure lengths (0: all)"
    )
    i.add_argument("--force", action="store_true", help="replace an existing DIR/config.yaml")
    i.set_defaults(fn=cmd_init)
    c = sub.add_parser(
        "check-corpus", help="counts, token lengths and impossible settings of a config's corpus"
    )
    c.add_argument(
        "--configfile", nargs="+", required=True, help="config file(s), combined as snakemake does"
    )
    c.add_argument(
        "--config", nargs="*", default=[], metavar="KEY=VALUE", help="overrides, as snakemake --config"
    )
    c.add_argument(
        "--directory", default=".", help="the working directory of the run (paths are relative to it)"
    )
    c.add_argument("--sample", type=int, default=2000, help="trajectories per source tokenized (0: all)")
    c.set_defaults(fn=cmd_check_corpus)
    g = sub.add_parser("gpu-check", help="prove a GPU node and measure its rates (gpu-check.json)")
    g.add_argument("--quick", action="store_true", help="the 1.7b shape and shorter boxes (about 3 minutes)")
    g.add_argument("--shape", choices=["tiny", "1.7b", "8b"], default=None,
                   help="model shape (default 8b; 1.7b with --quick, tiny with --cpu)")  # fmt: skip
    g.add_argument(
        "--cpu", action="store_true", help="on the CPU even where CUDA is (a smoke run; no figures)"
    )
    g.add_argument("--out", default="gpu-check.json", help="the report (rewritten after every figure)")
    g.add_argument("--workdir", default=None, help="where scratch files go (default: the temp dir)")
    g.add_argument("--disk-gib", type=float, default=20.0, help="bound on the scratch directory's size")
    g.add_argument("--only", nargs="+", choices=["a", "b", "c", "d", "e"], default=None, help="these stages")
    g.add_argument("--box", action="append", default=[], metavar="STAGE=SECONDS", help="a stage's time box")
    g.set_defaults(fn=cmd_gpu_check)
    return p


def main(argv: list[str] | None = None) -> int:
    from horizon.io import setup_logging

    a = parser().parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    setup_logging()
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
