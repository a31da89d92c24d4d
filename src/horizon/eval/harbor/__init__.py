"""`eval.harness: harbor`: rollout jobs run by Harbor itself, with the published Terminus-2.

- `job`: one Harbor job as a subprocess of the reference environment, against the job's endpoint;
- `prebuilt`: docker: each task's image built once per job, Harbor's trials started from it;
- `results`: Harbor's job directory read back as our records (attempts.jsonl, transcripts).

Imports: settings, models (VLLMServer), reference (where Harbor lives), sandbox (the toolchain),
tasks, terminus, io.
"""
