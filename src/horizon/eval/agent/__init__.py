"""The agent: the Terminus-2 loop as it talks to a model and types into a terminal.

- `loop`: the agent loop, episode by episode (parse the answer, run its keystrokes, report back),
  its caps and its end states;
- `conversation`: the history the model sees, the model calls, context management (summaries);
- `terminal`: a tmux session inside a sandbox, driven as Terminus-2 drives its own;
- `prompts`: prompt templates: every user turn the loop can send, by kind (`format: 2` YAML);
- `extract`: a template recovered from a corpus (`eval.prompt_template: null`).

Imports: models (backends), sandbox (the protocol), reference (their parser's wording), terminus, io.
"""
