"""The chunked scorer against the naive full-logits computation."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from horizon.data.horizons import pool_table, write_horizon
from horizon.score.scorer import Scorer, score_shard, window_targets


def naive_window_mean(model_dir, ids, roles, h1, h2):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    with torch.no_grad():
        lp = model(torch.tensor(ids[None, :h2], dtype=torch.long)).logits.log_softmax(-1)[0]
    pos = [t for t in range(h1, h2) if roles[t] == 1]
    if not pos:
        return None, 0
    return float(np.mean([lp[t - 1, ids[t]].item() for t in pos])), len(pos)


@pytest.fixture(scope="module")
def toks(tiny_corpus):
    t = pq.read_table(tiny_corpus / "tokens.parquet").to_pylist()
    return {
        r["traj_id"]: (
            np.array(r["input_ids"]),
            np.array(r["roles"], dtype=np.int8),
            np.array(r["turns"], dtype=np.int16),
        )
        for r in t
    }


def test_logprobs_match_naive_with_small_chunks(tiny_corpus, toks):
    tid, (ids, roles, _) = next(iter(toks.items()))
    h1, h2 = 200, 700
    targets = window_targets(roles, h1, h2)
    ours = Scorer(tiny_corpus / "student", chunk=7).logprobs(ids[None, :h2], targets[None, :])[0]
    ref, n = naive_window_mean(tiny_corpus / "student", ids, roles, h1, h2)
    assert len(ours) == n > 0 and ours.mean() == pytest.approx(ref, abs=1e-4)


def test_score_shard_cases(tiny_corpus, toks, tmp_path):
    """Mid-turn window, a window without assistant tokens, a trajectory exactly H2 long, one shorter."""
    shard = tiny_corpus / "tokens.parquet"
    (a, (ids_a, roles_a, _)), (b, (ids_b, roles_b, _)) = sorted(toks.items(), key=lambda kv: -len(kv[1][0]))
    n_b = len(ids_b)  # H2 = the shorter trajectory's length: it is exactly H2 long
    # H1 inside an assistant turn of trajectory a (a window that starts mid-turn)
    sup = np.flatnonzero(roles_a == 1)
    h1 = int(sup[len(sup) // 3]) + 1
    assert roles_a[h1 - 1] == 1 and roles_a[h1] == 1
    k1 = write_horizon([shard], h1, tmp_path / "k1.parquet")
    k2 = write_horizon([shard], n_b, tmp_path / "k2.parquet")
    pool = pool_table(k1, k2, n_b, exclude=set())
    assert sorted(pool.column("traj_id").to_pylist()) == sorted([a, b])
    pq.write_table(pool, tmp_path / "pool.parquet")
    out = tmp_path / "shard-000.parquet"
    score_shard(tmp_path / "pool.parquet", [shard], tiny_corpus / "student", out, h1, n_b, 0, 1, chunk=5)
    got = {r["traj_id"]: r for r in pq.read_table(out).to_pylist()}
    for tid, ids, roles in ((a, ids_a, roles_a), (b, ids_b, roles_b)):
        ref, n = naive_window_mean(tiny_corpus / "student", ids, roles, h1, n_b)
        assert got[tid]["n_window_tokens"] == n and got[tid]["score"] == pytest.approx(ref, abs=1e-4)
    # shorter than H2: not in the pool at all
    k3 = write_horizon([shard], n_b + 1, tmp_path / "k3.parquet")
    assert pool_table(k1, k3, n_b + 1, exclude=set()).column("traj_id").to_pylist() == [a]
    # a window inside the first user turn has no assistant token: recorded, unscored
    first_sup = min(int(np.flatnonzero(roles_a == 1)[0]), int(np.flatnonzero(roles_b == 1)[0]))
    k4 = write_horizon([shard], 5, tmp_path / "k4.parquet")
    k5 = write_horizon([shard], first_sup, tmp_path / "k5.parquet")
    pq.write_table(pool_table(k4, k5, first_sup, exclude=set()), tmp_path / "pool0.parquet")
    score_shard(
        tmp_path / "pool0.parquet",
        [shard],
        tiny_corpus / "student",
        tmp_path / "s0.parquet",
        5,
        first_sup,
        0,
        1,
    )
    rows = pq.read_table(tmp_path / "s0.parquet").to_pylist()
    assert rows and all(r["n_window_tokens"] == 0 and r["score"] is None for r in rows)


def test_nan_score_stops_with_the_traj_id(tiny_corpus, toks, tmp_path, monkeypatch):
    import horizon.score.scorer as hs

    tid, (ids, roles, _) = next(iter(toks.items()))
    pq.write_table(
        pa.table(
            {
                "traj_id": [tid],
                "n_tokens": pa.array([len(ids)], pa.int32()),
                "n_window_tokens": pa.array([5], pa.int32()),
            }
        ),
        tmp_path / "pool.parquet",
    )
    monkeypatch.setattr(hs.Scorer, "logprobs", lambda self, i, t: [np.array([np.nan])])
    with pytest.raises(FloatingPointError, match=tid):
        score_shard(
            tmp_path / "pool.parquet",
            [tiny_corpus / "tokens.parquet"],
            tiny_corpus / "student",
            tmp_path / "s.parquet",
            100,
            300,
            0,
            1,
        )
    assert not (tmp_path / "s.parquet").exists()


def test_a_shard_resumes_only_a_journal_of_the_same_model_and_horizons(tiny_corpus, toks, tmp_path, caplog):
    """A rerun after the model was retrained (or H1 changed) must not keep the old scores."""
    from horizon.io import Journal
    from horizon.score.scorer import shard_inputs

    shard = tiny_corpus / "tokens.parquet"
    h2 = min(len(ids) for ids, _, _ in toks.values())
    h1 = h2 // 2
    k1 = write_horizon([shard], h1, tmp_path / "k1.parquet")
    k2 = write_horizon([shard], h2, tmp_path / "k2.parquet")
    pq.write_table(pool_table(k1, k2, h2, exclude=set()), tmp_path / "pool.parquet")
    out = tmp_path / "shard-000.parquet"
    args = (tmp_path / "pool.parquet", [shard], tiny_corpus / "student", out, h1, h2, 0, 1)
    score_shard(*args)
    honest = {r["traj_id"]: r["score"] for r in pq.read_table(out).to_pylist()}
    journal = out.with_name(".shard-000.partial.jsonl")

    def rescored(made_from: dict | None) -> dict:
        """The scores of a rerun after a killed run of `made_from` had journaled a score for every row."""
        j = Journal(journal, made_from)
        j.remove()
        j.append([{"traj_id": t, "score": 123.0, "n_window_tokens": 1} for t in honest])
        j.close()
        score_shard(*args)
        return {r["traj_id"]: r["score"] for r in pq.read_table(out).to_pylist()}

    same = shard_inputs(*args[:3], h1, h2)
    assert set(rescored(same).values()) == {123.0}  # the positive control: the same inputs resume
    other_runs = {  # a journal of each other input; the log names the one that changed
        "h1": shard_inputs(*args[:3], h1 - 1, h2),
        "h2": shard_inputs(*args[:3], h1, h2 + 1),
        "tokens": shard_inputs(args[0], [shard, shard], args[2], h1, h2),
        "pool": shard_inputs(tmp_path / "k1.parquet", *args[1:3], h1, h2),
        "model": shard_inputs(*args[:2], tmp_path / "endpoint", h1, h2),
    }
    for key, inputs in other_runs.items():
        caplog.clear()
        assert rescored(inputs) == honest, key
        assert f"changed: {key}" in caplog.text, caplog.text
    assert rescored(None) == honest  # a journal from before made_from: its inputs unknown


def test_merge_sorts_every_shard_by_traj_id_and_logs_the_unscored(tmp_path, caplog):
    import logging

    from horizon.score.scorer import SCORES_SCHEMA, merge

    shards = []
    for i, rows in enumerate([[("c", -1.0, 3), ("a", None, 0)], [("b", -2.5, 4), ("d", -0.5, 2)]]):
        p = tmp_path / f"shard-{i}.parquet"
        pq.write_table(
            pa.Table.from_pylist([dict(zip(SCORES_SCHEMA.names, r)) for r in rows], SCORES_SCHEMA), p
        )
        shards.append(p)
    with caplog.at_level(logging.INFO, logger="horizon.score.scorer"):
        table = merge(shards, tmp_path / "scores.parquet")
    assert pq.read_table(tmp_path / "scores.parquet").equals(table)
    assert table.column("traj_id").to_pylist() == ["a", "b", "c", "d"] and table.schema == SCORES_SCHEMA
    assert table.column("score").to_pylist() == [None, -2.5, -1.0, -0.5]
    assert caplog.messages == ["scores: 4 trajectories (1 without window tokens, excluded from selection)"]


def test_a_scorer_of_a_model_in_memory_scores_as_the_saved_one(tiny_corpus, toks):
    from transformers import AutoModelForCausalLM

    tid, (ids, roles, _) = next(iter(toks.items()))
    targets = window_targets(roles, 50, 300)[None, :]
    from_disk = Scorer(tiny_corpus / "student", chunk=16)
    model = AutoModelForCausalLM.from_pretrained(tiny_corpus / "student")
    model.train()  # of_model puts it in eval mode, as the scorer does
    in_memory = Scorer.of_model(model, chunk=16)
    assert in_memory.device == "cpu" and in_memory.chunk == 16 and not model.training
    assert in_memory.model_dir == "<Qwen3ForCausalLM in memory>"
    np.testing.assert_array_equal(
        in_memory.logprobs(ids[None, :300], targets)[0], from_disk.logprobs(ids[None, :300], targets)[0]
    )
    with pytest.raises(ValueError, match="^position 0 has no context and cannot be a target$"):
        in_memory.logprobs(ids[None, :3], np.array([[True, False, False]]))
    # three rows of int32 ids (as the shards store them): one array of log-probs per row, its targets' count
    rows = np.stack([ids[:300], ids[:300], ids[:300]]).astype(np.int32)
    windows = np.stack([window_targets(roles, a, b) for a, b in ((50, 300), (250, 300), (290, 300))])
    got = in_memory.logprobs(rows, windows)
    assert [len(x) for x in got] == windows.sum(axis=1).tolist()
    np.testing.assert_allclose(got[2], got[0][-len(got[2]) :], atol=1e-6)


def test_the_scorer_takes_the_gpu_in_bf16_when_there_is_one_and_fp32_on_the_cpu(tiny_corpus, monkeypatch):
    """What the scorer asks of transformers: the GPU itself is faked (no CUDA here), so the model is
    loaded on the CPU and its move is recorded."""
    import torch
    import transformers

    real, asked = transformers.AutoModelForCausalLM, []

    class Recorded:
        @staticmethod
        def from_pretrained(path, **kw):
            model = real.from_pretrained(path)
            model.to = lambda device: (asked.append((path, kw, device)), model)[1]
            return model

    monkeypatch.setattr(transformers, "AutoModelForCausalLM", Recorded)
    student = tiny_corpus / "student"
    assert Scorer(student).device == "cpu" and Scorer(student).model_dir == str(student)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert Scorer(student).device == "cuda"
    cpu = {"dtype": torch.float32, "attn_implementation": "sdpa"}
    assert asked == [(str(student), cpu, "cpu")] * 2 + [
        (str(student), {**cpu, "dtype": torch.bfloat16}, "cuda")
    ]


POOL_SCHEMA = pa.schema([("traj_id", pa.string()), ("n_tokens", pa.int32()), ("n_window_tokens", pa.int32())])


def _pool(path, toks, tids, h1, h2, extra=()):
    rows = [{"traj_id": t, "n_tokens": len(toks[t][0]), "n_window_tokens": int(window_targets(toks[t][1], h1, h2).sum())}
            for t in tids]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows + list(extra), schema=POOL_SCHEMA), path)
    return path


def test_shards_split_the_pool_and_say_what_they_left_unscored(tiny_corpus, toks, tmp_path, caplog):
    """Every n-th pool row per shard; a row without window tokens is recorded unscored and counted;
    the progress line names the shard; the scores keep their schema."""
    import logging

    from horizon.score.scorer import SCORES_SCHEMA

    tids = sorted(toks, key=lambda t: -len(toks[t][0]))  # the fixture's two trajectories, longest first
    h1, h2 = 240, 600
    silent = {"traj_id": "silent", "n_tokens": 10, "n_window_tokens": 0}  # not even in the token shards
    pool = _pool(tmp_path / "pool.parquet", toks, tids, h1, h2, [silent])
    shard, student = [tiny_corpus / "tokens.parquet"], tiny_corpus / "student"
    assert score_shard(pool, shard, student, tmp_path / "s1.parquet", h1, h2, 1, 2) == {
        "scored": 1,
        "no_window": 0,
    }
    assert pq.read_table(tmp_path / "s1.parquet").column("traj_id").to_pylist() == [tids[1]]
    with caplog.at_level(logging.INFO, logger="horizon.score.scorer"):
        got = score_shard(pool, shard, student, tmp_path / "s0.parquet", h1, h2, 0, 2)
    assert got == {"scored": 1, "no_window": 1}
    assert (
        "shard 0: 1 trajectories have no assistant token in (H1, H2], excluded from selection"
        in caplog.messages
    )
    assert any(m.startswith("score H240-600 shard 0/2: 2/2 trajectories (100%)") and " tokens/s" in m
               for m in caplog.messages)  # fmt: skip
    table = pq.read_table(tmp_path / "s0.parquet")
    assert table.schema == SCORES_SCHEMA and table.to_pylist()[1] == {
        "traj_id": "silent",
        "score": None,
        "n_window_tokens": 0,
    }
    # one trajectory a batch (batch_tokens below H2): every batch's rows reach the file
    both = score_shard(pool, shard, student, tmp_path / "all.parquet", h1, h2, 0, 1, batch_tokens=1)
    assert both == {"scored": 2, "no_window": 1}
    flushed = score_shard(
        pool, shard, student, tmp_path / "f.parquet", h1, h2, 0, 1, batch_tokens=1, write_every=1
    )
    assert flushed == both  # every batch journaled as it comes
    with caplog.at_level(logging.INFO, logger="horizon.score.scorer"):
        score_shard(pool, shard, student, tmp_path / "one-batch.parquet", h1, h2, 0, 1)  # both in one batch
    assert any(m.startswith("score H240-600 shard 0/1: 3/3 trajectories (100%)") for m in caplog.messages)
    sup0 = int(np.flatnonzero(toks[tids[0]][1] == 1)[0])  # a window of one supervised token is scored
    one = _pool(tmp_path / "one.parquet", toks, tids[:1], sup0, sup0 + 1)
    assert score_shard(one, shard, student, tmp_path / "one-s.parquet", sup0, sup0 + 1, 0, 1)["scored"] == 1
    ghosts = [{"traj_id": f"ghost{i}", "n_tokens": 700, "n_window_tokens": 3} for i in range(6)]
    with pytest.raises(
        KeyError, match=r"not in the token shards: \['ghost0', 'ghost1', 'ghost2', 'ghost3', 'ghost4'\]"
    ):
        score_shard(_pool(tmp_path / "g.parquet", toks, [], h1, h2, ghosts), shard, student, tmp_path / "g-s.parquet",
                    h1, h2, 0, 1)  # fmt: skip


def test_a_killed_shard_resumes_from_its_journal(tiny_corpus, toks, tmp_path, monkeypatch, caplog):
    """Rows are journaled as they are scored (write_every); a killed shard keeps them, and its rerun
    scores only the rest (on the device it is given), then removes the journal."""
    import logging

    import horizon.score.scorer as hs

    tids = sorted(toks, key=lambda t: -len(toks[t][0]))
    h1, h2 = 240, 600
    pool = _pool(tmp_path / "pool.parquet", toks, tids, h1, h2)
    shard, student, out = [tiny_corpus / "tokens.parquet"], tiny_corpus / "student", tmp_path / "s.parquet"
    real, calls = hs.Scorer.logprobs, []

    def killed_at_the_second_batch(self, ids, targets):
        calls.append(len(ids))
        if len(calls) == 2:
            raise RuntimeError("killed")
        return real(self, ids, targets)

    monkeypatch.setattr(hs.Scorer, "logprobs", killed_at_the_second_batch)
    with pytest.raises(RuntimeError, match="killed"):
        score_shard(pool, shard, student, out, h1, h2, 0, 1, batch_tokens=1, write_every=1)
    journal = tmp_path / ".s.partial.jsonl"
    kept = [json.loads(x) for x in journal.read_text().splitlines()]
    assert [r["traj_id"] for r in kept] == tids[:1] and not out.exists()
    monkeypatch.setattr(
        hs.Scorer,
        "logprobs",
        lambda self, ids, targets: (calls.append(len(ids)), real(self, ids, targets))[1],
    )
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)  # the device given is the one used
    with caplog.at_level(logging.INFO, logger="horizon.score.scorer"):
        score_shard(pool, shard, student, out, h1, h2, 0, 1, batch_tokens=1, device="cpu")
    assert "shard 0: resuming, 1 of 2 trajectories already scored" in caplog.messages and len(calls) == 3
    got = pq.read_table(out).to_pylist()
    assert [r["traj_id"] for r in got] == tids and got[0] == kept[0] and not journal.exists()
    ref, n = naive_window_mean(student, *toks[tids[1]][:2], h1, h2)
    assert got[1]["n_window_tokens"] == n and got[1]["score"] == pytest.approx(ref, abs=1e-4)
