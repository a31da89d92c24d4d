"""Decontamination: planted overlaps (exact, re-wrapped, other case and punctuation) are caught, near
misses (12 shared words for 13-grams) are not, and the hashed n-grams agree with plain word tuples."""

import json
import random
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from horizon.data.decontam import DecontamError, build_reference, decontaminate, match
from horizon.data.normalize import TRAJECTORY_SCHEMA
from tests.helpers import REPO

INSTRUCTION = (
    "Parse the nginx access log at /app/logs/access.log, count the requests per client address, and write "
    "the ten busiest addresses with their counts, one per line and sorted by count, to /app/report/top_clients.txt; "
    "ignore requests whose status code is 404 or 499 and treat IPv6 addresses like any other address."
)
WORDS = re.findall(r"\w+", INSTRUCTION.lower())
FILLER = "the quick brown fox jumps over the lazy dog while a cat sleeps on the warm mat by the door".split()


def first_turn(instruction):
    from horizon.eval.agent.prompts import Template

    return Template.load(REPO / "demo" / "prompt.yaml").first(instruction, "root@box:/app# ")


def conv(instruction, later=""):
    return [
        {"role": "user", "content": first_turn(instruction)},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "New Terminal Output:\n" + later},
        {"role": "assistant", "content": "done"},
    ]


def near_miss() -> str:
    """Every 12-word window of the instruction, but no 13 words of it in a row."""
    return " ".join(
        " ".join(WORDS[i : i + 12]) + f" {FILLER[i % len(FILLER)]}zz" for i in range(0, len(WORDS) - 11, 6)
    )


PLANTED = {
    "exact": INSTRUCTION,
    "rewrapped": "\n    ".join(" ".join(WORDS[i : i + 7]) for i in range(0, len(WORDS), 7)),
    "case_punct": INSTRUCTION.upper().replace(",", ";").replace(" the ", ' "the" ').replace("/", " / "),
    "embedded": " ".join(FILLER) + " — " + " ".join(WORDS[5:18]) + " — zz " + " ".join(FILLER),  # 13 words
    "near_miss": near_miss(),
    "every_12th_changed": " ".join(w if (i + 1) % 12 else "CHANGED" for i, w in enumerate(WORDS)),
    "clean": "Write a haiku about the sea to /app/poem.txt and make sure it has three lines.",
}
CAUGHT = {"exact", "rewrapped", "case_punct", "embedded"}


def corpus(tmp_path, convs: dict[str, list]) -> str:
    rows = [{"traj_id": k, "task": k, "source": "f", "source_row": i, "conversations": c, "n_turns": len(c)}
            for i, (k, c) in enumerate(convs.items())]  # fmt: skip
    path = tmp_path / "trajectories.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), path)
    return str(path)


def manifest(tmp_path, name, tasks):
    p = tmp_path / f"{name}.json"
    p.write_text(
        json.dumps({"tasks": [{"id": i, "path": str(tmp_path), "instruction": t} for i, t in tasks.items()]})
    )
    return str(p)


def run(tmp_path, convs, manifests, **kw):
    out, stats = tmp_path / "decontamination.parquet", tmp_path / "decontamination.json"
    s = decontaminate(corpus(tmp_path, convs), manifests, out, stats, **kw)
    return {r["traj_id"]: r for r in pq.read_table(out).to_pylist()}, s


def test_planted_overlaps_are_caught_and_near_misses_are_not(tmp_path):
    tb = manifest(tmp_path, "tb", {"log-report": INSTRUCTION, "other": " ".join(FILLER[::-1])})
    flagged, stats = run(tmp_path, {k: conv(v) for k, v in PLANTED.items()}, {"tb": tb},
                         template=REPO / "demo" / "prompt.yaml")  # fmt: skip
    assert set(flagged) == CAUGHT
    assert flagged["exact"]["shared_ngrams"] == len(WORDS) - 12 and flagged["embedded"]["shared_ngrams"] == 1
    assert flagged["exact"]["first_ngram"] == " ".join(WORDS[:13])
    assert flagged["embedded"]["first_ngram"] == " ".join(WORDS[5:18])
    assert {r["bench_task"] for r in flagged.values()} == {"log-report"} and flagged["exact"][
        "benchmark"
    ] == "tb"
    assert flagged["case_punct"]["detail"] == f"tb/log-report: {len(WORDS) - 12} shared 13-grams"
    assert stats["flagged"] == 4 and stats["benchmarks"]["tb"]["flagged"] == 4
    assert stats["task_statement"] == {"template": len(PLANTED)}  # the demo template's first-turn form
    _, stats = run(
        tmp_path, {"other_harness": [{"role": "user", "content": "Do this: " + INSTRUCTION}]}, {"tb": tb}
    )
    assert stats["task_statement"] == {"whole_first_turn": 1} and stats["flagged"] == 1


def test_only_the_task_statement_is_checked_unless_all_turns_are_asked_for(tmp_path):
    tb = manifest(tmp_path, "tb", {"log-report": INSTRUCTION})
    convs = {"in_observation": conv("Tidy the home directory.", later=INSTRUCTION)}
    flagged, _ = run(tmp_path, convs, {"tb": tb})
    assert flagged == {}
    flagged, stats = run(tmp_path, convs, {"tb": tb}, corpus_text="all")
    assert set(flagged) == {"in_observation"} and stats["corpus_text"] == "all"


def test_min_matches_and_several_benchmarks(tmp_path):
    a = manifest(tmp_path, "a", {"log-report": INSTRUCTION})
    b = manifest(tmp_path, "b", {"copy": INSTRUCTION, "x": "too short"})
    few = " ".join(WORDS[:15])  # 3 shared 13-grams
    flagged, stats = run(
        tmp_path, {"few": conv(few), "all": conv(INSTRUCTION)}, {"a": a, "b": b}, min_matches=4
    )
    assert set(flagged) == {"all"}  # one row per trajectory and benchmark: the parquet keeps both
    rows = pq.read_table(tmp_path / "decontamination.parquet").to_pylist()
    assert sorted((r["traj_id"], r["benchmark"], r["bench_task"]) for r in rows) == [("all", "a", "log-report"),
                                                                                     ("all", "b", "copy")]  # fmt: skip
    assert stats["flagged"] == 1 and stats["benchmarks"]["b"]["tasks_too_short"] == ["x"]


def test_a_benchmark_without_task_text_is_a_named_error(tmp_path):
    empty = manifest(tmp_path, "empty", {"t1": "", "t2": "too short to hold thirteen words"})
    with pytest.raises(DecontamError, match="benchmark 'empty' .* has no task text of 13 words or more"):
        run(tmp_path, {"x": conv(INSTRUCTION)}, {"empty": empty})


def plain_shared(ref_text: str, text: str, n: int) -> int:
    """The baseline: sets of word tuples."""

    def grams(t):
        w = re.findall(r"\w+", t.lower())
        return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}

    return len(grams(ref_text) & grams(text))


def test_hashed_ngrams_agree_with_word_tuples_on_random_text():
    rng = random.Random(0)
    vocab = [*FILLER, "naïve", "Café", "x_y", "42", "über"]
    refs = [" ".join(rng.choice(vocab) for _ in range(60)) for _ in range(5)]
    ref = build_reference([("b", f"t{i}", r) for i, r in enumerate(refs)], 5)
    texts = [
        " ".join(rng.choice(vocab) for _ in range(80)) + "; " + refs[i % 5][: rng.randint(0, 200)]
        for i in range(40)
    ]
    hits = {(h.traj, h.task): h.shared for h in match(ref, texts, np.arange(len(texts)))}
    expected = {(i, j): plain_shared(refs[j], t, 5) for i, t in enumerate(texts) for j in range(5)}
    assert hits == {k: v for k, v in expected.items() if v}
