"""The published Terminus-2 (harbor 0.26.0, terminal-bench 0.2.18), read and run from its own environment.

- `environment`: where the reference environment is (`make refenv`, eval.reference_env), running its
  programs, `export_template` (their prompt turns as a horizon template), ReferenceParser (their
  parser's wording of errors and warnings);
- `programs/`: the scripts that run under the reference interpreter (the template export and the
  agent loop on scripted edges it shares with the conformance suite).

Imports: agent (the Template record).
"""
