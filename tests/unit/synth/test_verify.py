"""Verification's view of a task: the output paths an instruction names."""

from horizon.synth.verify import output_paths


def test_output_paths_of_an_instruction():
    text = "Read /app/in.txt and write /app/out/result.json. Then /app/out/result.json again, see /etc/x."
    assert output_paths(text) == ["/app/in.txt", "/app/out/result.json"]
