"""The DMPO job's pair examples are rebuilt when the pairs or the reference log-probs change."""

import pyarrow.parquet as pq


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
