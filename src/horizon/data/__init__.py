"""The corpus, from raw rows to token shards: the stages before training.

- `sources`: download (or locate) the raw corpus files and stream their rows;
- `normalize`: completed trajectories once each, and a quarantine with reasons;
- `commands`: what a keystroke string runs (pipelines and their arguments);
- `quality`: the Targeted Observation Ratio and the corpus statistics;
- `decontam`: trajectories that share word n-grams with a benchmark's tasks;
- `judge`: the LLM-judge filter through any OpenAI-compatible endpoint;
- `filters`: the training corpus: what the filters remove, each removal counted;
- `chatml`: our ChatML writer (every `<think>` kept) with per-token role and turn tags;
- `tokenizer`: tokenizers built offline (a tiny BPE, Qwen's real vocabulary);
- `tokens`: the tokenize stage: token shards with role and turn tags;
- `horizons`: horizon views of the shards (what the first K tokens hold), the scoring pools;
- `student`: the student model, resolved to a local directory or built tiny offline.

Imports: io, progress, terminus.
"""
