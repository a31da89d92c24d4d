"""DMPO's data: training tasks kept apart from the benchmarks, pairs from attempts, reference log-probs."""

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

from horizon.data.chatml import ChatSerializer
from horizon.dmpo.pairs import NoPairs, assistant_turn_ids, build_pairs, draw_pairs
from horizon.eval.settings import Attempt
from horizon.eval.tasks.benchmark import write_manifest
from tests.helpers import REPO


def _conversation(task: str, attempt: int, turns: int) -> list[dict]:
    msgs = [{"role": "user", "content": f"Task Description:\nsolve {task}\nCurrent terminal state:\n$"}]
    for t in range(turns):
        msgs.append(
            {"role": "assistant", "content": f'<think>\nstep {t} of {attempt}\n</think>\n\n{{"plan": "ls"}}'}
        )
        msgs.append({"role": "user", "content": f"New Terminal Output:\nout {t}"})
    return msgs  # ends with a user turn, as an attempt that ran out of episodes does


def write_attempts(root, outcomes: dict[str, list]) -> str:
    """attempts.jsonl + transcripts/ as a rollout job writes them; outcome True/False/'infra'."""
    lines = []
    for task, results in outcomes.items():
        for a, ok in enumerate(results):
            infra = ok == "infra"
            rec = Attempt(task, a, 0, ok is True, float(ok is True), 0 if infra else 2 + a, 10, 10, 1.0,
                          "infra_error" if infra else ("none" if ok is True else "tests_failed"), "completed")  # fmt: skip
            lines.append(json.dumps(rec.to_dict()))
            if not infra:
                t = root / "transcripts" / task / f"attempt-{a}.json"
                t.parent.mkdir(parents=True, exist_ok=True)
                t.write_text(json.dumps({**rec.to_dict(), "messages": _conversation(task, a, 2 + a)}))
    (root / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    return str(root / "attempts.jsonl")


def test_pairs_are_a_success_and_a_failure_of_the_same_task_seeded_and_counted(tmp_path, tiny_corpus):
    shard0, shard1 = tmp_path / "s0", tmp_path / "s1"
    shard0.mkdir(), shard1.mkdir()
    files = [
        write_attempts(shard0, {"mixed": [True, False, True, False], "solved": [True, True, True, True]}),
        write_attempts(shard1, {"failed": [False, "infra", False, False]}),
    ]
    tok = str(tiny_corpus / "student")
    out = lambda name: (str(tmp_path / f"{name}.parquet"), str(tmp_path / f"{name}.json"))  # noqa: E731
    s = build_pairs(
        files, tok, *out("p"), policy="single-K8", task_set="train-tasks", pairs_per_task=3, seed=7
    )
    assert (s["tasks"], s["attempts"], s["successes"], s["failures"], s["infra_errors"]) == (3, 12, 6, 5, 1)
    assert (s["pairs"], s["tasks_with_pairs"], s["tasks_without_success"], s["tasks_without_failure"]) == (
        3,
        1,
        1,
        1,
    )
    table = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert {r["task"] for r in table} == {"mixed"} and len({r["pair_id"] for r in table}) == 3
    for r in table:
        assert r["chosen_attempt"] in (0, 2) and r["rejected_attempt"] in (1, 3)
    # the same seed draws the same pairs, byte for byte
    build_pairs(files, tok, *out("q"), policy="single-K8", task_set="train-tasks", pairs_per_task=3, seed=7)
    assert (tmp_path / "p.parquet").read_bytes() == (tmp_path / "q.parquet").read_bytes()
    # each trajectory is our ChatML serialization of the attempt up to its last assistant turn
    from horizon.data.tokenizer import load

    r = table[0]
    msgs = _conversation("mixed", r["chosen_attempt"], 2 + r["chosen_attempt"])[:-1]
    want = ChatSerializer(load(tok)).serialize(msgs)
    assert r["chosen_input_ids"] == want.input_ids.tolist() and r["chosen_roles"] == want.roles.tolist()
    assert (
        r["chosen_n_turns"] == 2 + r["chosen_attempt"] and r["rejected_n_turns"] == 2 + r["rejected_attempt"]
    )


def test_drawn_pairs_are_all_of_them_when_fewer_and_a_seeded_sample_otherwise():
    assert draw_pairs([1], [0, 2], 5, 0, "t") == [(1, 0), (1, 2)]
    a = draw_pairs(list(range(5)), list(range(5, 10)), 4, 0, "t")
    assert len(set(a)) == 4 and a == draw_pairs(list(range(5)), list(range(5, 10)), 4, 0, "t")
    assert any(draw_pairs(list(range(5)), list(range(5, 10)), 4, s, "t") != a for s in range(1, 5))


def test_no_pair_at_all_is_an_error_naming_the_policy_the_task_set_and_the_counts(tmp_path, tiny_corpus):
    f = write_attempts(tmp_path, {"a": [True, True], "b": [False, "infra"]})
    with pytest.raises(NoPairs) as e:
        build_pairs([f], str(tiny_corpus / "student"), str(tmp_path / "p.parquet"), str(tmp_path / "p.json"),
                    policy="single-K640", task_set="demo/train-tasks", pairs_per_task=2, seed=0)  # fmt: skip
    msg = str(e.value)
    assert "policy single-K640" in msg and "task set demo/train-tasks" in msg
    assert "2 tasks, 4 attempts (2 successes, 1 failures, 1 infrastructure errors" in msg
    assert "1 tasks without a success, 1 without a failure" in msg
    assert not (tmp_path / "p.parquet").exists()


def test_assistant_turn_ids_tag_content_and_im_end_of_each_assistant_turn(tiny_tokenizer):
    s = ChatSerializer(tiny_tokenizer).serialize(_conversation("x", 0, 2)[:-1])
    ids = assistant_turn_ids(s.roles, s.turns)
    assert set(np.unique(ids)) == {-1, 0, 1}
    assert np.array_equal(ids >= 0, s.roles == 1) and ids[0] == -1
    assert set(s.turns[ids == 0]) == {1} and set(s.turns[ids == 1]) == {
        3
    }  # messages 1 and 3 are the assistant's


# ---------------------------------------------------------------------------------------------
# training tasks


def test_training_tasks_that_are_benchmark_tasks_are_refused_by_id_and_by_instruction(tmp_path):
    from horizon.dmpo.training_tasks import training_manifest

    bench = tmp_path / "bench.json"
    write_manifest(REPO / "demo" / "tasks", "harbor", bench, name="demo")
    train = tmp_path / "train"
    shutil.copytree(REPO / "demo" / "train-tasks", train)
    # the bundled training tasks are apart from the bundled benchmark
    m = training_manifest(
        {"format": "harbor", "path": str(train)}, tmp_path, tmp_path / "ok.json", {"demo": bench}
    )
    assert len(m["tasks"]) == 6 and (tmp_path / "ok.json").exists()
    shutil.copytree(REPO / "demo" / "tasks" / "count-rows", train / "count-rows")  # the same task id
    shutil.copytree(REPO / "demo" / "tasks" / "word-count", train / "poem-words")  # the same instruction...
    ins = train / "poem-words" / "instruction.md"
    ins.write_text("  " + ins.read_text().replace(" ", "  \n ") + "\n\n")  # ...up to white space
    with pytest.raises(ValueError) as e:
        training_manifest(
            {"format": "harbor", "path": str(train)}, tmp_path, tmp_path / "bad.json", {"demo": bench}
        )
    msg = str(e.value)
    assert "2 training tasks are evaluated tasks, refused" in msg
    assert "task 'count-rows' is task 'count-rows' of benchmark 'demo' (same task id)" in msg
    assert "task 'poem-words' has the instruction of task 'word-count' of benchmark 'demo'" in msg
    assert not (tmp_path / "bad.json").exists()


# ---------------------------------------------------------------------------------------------
# reference log-probs


@pytest.fixture()
def pairs(tmp_path, tiny_corpus):
    f = write_attempts(tmp_path, {"mixed": [True, False, True], "other": [False, True]})
    build_pairs([f], str(tiny_corpus / "student"), str(tmp_path / "pairs.parquet"), str(tmp_path / "pairs.json"),
                policy="single-K8", task_set="t", pairs_per_task=4, seed=0)  # fmt: skip
    return tmp_path / "pairs.parquet"


def test_reference_logprobs_are_per_turn_sums_under_the_model_and_tied_to_it(tmp_path, tiny_corpus, pairs):
    import torch
    from transformers import AutoModelForCausalLM

    from horizon.dmpo.ref_logprobs import compute_reference, load_reference, trajectories

    model_dir = tiny_corpus / "student"
    out = tmp_path / "reference.parquet"
    info = compute_reference(pairs, model_dir, out, chunk=3)
    assert info["trajectories"] == 5  # 3 pairs over 5 distinct attempts, each scored once
    ref = load_reference(out, model_dir, pairs)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    for traj, r in trajectories(pairs).items():
        with torch.no_grad():
            ids = torch.tensor(np.asarray(r["input_ids"], np.int64))[None]
            logp = torch.log_softmax(model(ids).logits[0].double(), -1)
        tok = [logp[p - 1, r["input_ids"][p]].item() for p in range(1, len(r["input_ids"]))]
        want = [sum(v for v, t in zip(tok, r["turn_ids"][1:]) if t == k) for k in range(r["n_turns"])]
        assert ref[traj] == pytest.approx(want, abs=1e-4)
    # a file from another model is refused by its recorded hash
    other = tmp_path / "other-model"
    shutil.copytree(model_dir, other)
    m = AutoModelForCausalLM.from_pretrained(other)
    with torch.no_grad():
        next(m.parameters()).add_(0.01)
    m.save_pretrained(other)
    with pytest.raises(ValueError, match="reference log-probs of another model"):
        load_reference(out, other, pairs)


def test_reference_resumes_from_its_partial_file_and_drops_one_of_another_model(tmp_path, tiny_corpus, pairs):
    from horizon.dmpo.ref_logprobs import compute_reference, file_sha256, model_sha256, trajectories
    from horizon.io import Journal

    model_dir, out = tiny_corpus / "student", tmp_path / "reference.parquet"
    first = sorted(trajectories(pairs))[0]
    n = trajectories(pairs)[first]["n_turns"]
    head = {"model_sha256": model_sha256(model_dir), "pairs_sha256": file_sha256(pairs)}
    partial = Journal(tmp_path / ".reference.partial.jsonl")
    partial.append([head, {"traj": first, "logps": [-1.0] * n}])  # as a killed job left it
    partial.close()
    compute_reference(pairs, model_dir, out)
    got = dict(zip(*[pq.read_table(out).column(c).to_pylist() for c in ("traj", "logps")]))
    assert got[first] == [-1.0] * n  # kept, not recomputed
    assert not partial.path.exists()
    partial.append([{**head, "model_sha256": "another"}, {"traj": first, "logps": [-1.0] * n}])
    partial.close()
    compute_reference(pairs, model_dir, out)
    got = dict(zip(*[pq.read_table(out).column(c).to_pylist() for c in ("traj", "logps")]))
    assert got[first] != [-1.0] * n  # the other model's partial results were discarded


def test_pair_examples_are_rebuilt_when_the_pairs_or_reference_change(tmp_path, tiny_corpus, pairs):
    import pyarrow as pa

    from horizon.dmpo.launch import DMPOSpec, build_examples
    from horizon.dmpo.ref_logprobs import compute_reference, load_reference

    model_dir = tiny_corpus / "student"
    compute_reference(pairs, model_dir, tmp_path / "reference.parquet")
    spec = DMPOSpec("dmpo-x", str(model_dir), str(model_dir), str(pairs), str(tmp_path / "reference.parquet"),
                    str(tmp_path / "out"), str(tmp_path / "ck"), {}, 0, 0.1, 0.7)  # fmt: skip
    ref = load_reference(spec.reference, model_dir, pairs)
    meta = build_examples(spec, ref)
    assert meta["pairs"] == 3 and meta["supervised_tokens"] > 0
    table = pa.ipc.open_file(pa.memory_map(str(spec.examples_path))).read_all()
    assert (
        table.column("chosen_reference").to_pylist()[0]
        == ref[pq.read_table(pairs).column("chosen")[0].as_py()].tolist()
    )
    stale = tmp_path / "ck" / "checkpoint-2"
    stale.mkdir()
    assert build_examples(spec, ref) == meta and stale.exists()  # the same data: kept, resumable
    t = pq.read_table(spec.reference)
    pq.write_table(t.replace_schema_metadata({**t.schema.metadata, b"seconds": b"1.0"}), spec.reference)
    assert build_examples(spec, ref)["reference_sha256"] != meta["reference_sha256"]
    assert not stale.exists()  # checkpoints trained on the old data are not resumed
