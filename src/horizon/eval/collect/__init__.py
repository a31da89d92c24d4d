"""A corpus collected through the real harness: the demo's teacher corpus, or a real teacher's.

- `corpus`: each (task, variant) one attempt in a fresh sandbox, written as a row of the corpus schema
  (nvidia/Nemotron-Terminal-Corpus), resumably;
- `teacher`: the scripted teacher (a Backend that follows a task's solution/teacher.yaml).

Imports: attempt, agent, models, sandbox, tasks, terminus, io.
"""
