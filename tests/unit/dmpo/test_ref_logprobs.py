"""Reference log-probs: per-turn sums under the model, tied to it, resumed from their partial file."""

import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest


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
