"""Test doubles: FAKE models and SCRIPTED servers, for the tests and bench/ (never imported by src/).

- `backends`: ScriptedBackend, a FAKE model behind the real Backend protocol (answers from a list);
- `servers`: starting the scripted servers below, and the FAKE vLLM's script;
- `judge`: the SCRIPTED judge server, and corpora whose texts carry its markers;
- `fake_vllm.py`: a FAKE `vllm serve` (same command line, the completions and chat routes);
- `scripted_judge.py`: a FAKE LLM judge (OpenAI-compatible chat), driven by markers in the text;
- `scripted_synth.py`: a FAKE task author, reviewer and teacher for task synthesis.
The three servers are scripts, run as processes; their data lives in tests/fixtures/.
"""

from pathlib import Path

DIR = Path(__file__).resolve().parent
