"""Grading: the task's own tests, run after the agent as a clean grader, and the verdict they give.

- `grader`: settle, kill the agent's processes, fresh /tests, /logs and HOME, run the tests with the
  graders' toolchain, read the verdict;
- `verdict`: verdicts as the owning harnesses reach them (TB1's parsers, Harbor's reward files).

Imports: sandbox (the protocol, the toolchain), tasks, agent (the terminal's session name).
"""
