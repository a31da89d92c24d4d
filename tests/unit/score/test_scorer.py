"""The chunked scorer against the naive full-logits computation."""

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


def test_a_shard_resumes_only_a_journal_of_the_same_model_and_horizons(tiny_corpus, toks, tmp_path):
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
    assert rescored({**same, "h1": h1 - 1}) == honest
    assert rescored(shard_inputs(*args[:2], tmp_path / "endpoint", h1, h2)) == honest  # another model
    assert rescored(None) == honest  # a journal from before made_from: its inputs unknown
