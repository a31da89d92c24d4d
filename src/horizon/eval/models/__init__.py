"""Model backends the agent loop calls, and in-process generation.

- `backends`: the Backend protocol; TransformersBackend (in process), CompletionsBackend (vLLM's
  completions route, our ChatML token ids), ChatBackend (any chat endpoint: teachers), VLLMServer;
- `batching`: in-process generation for a rollout job: a KV cache per attempt kept across episodes,
  continuous batching across attempts, per-request sampling generators;
- `kvstep`: one Qwen3 decoder step over several conversations' new tokens, batch invariant.

Imports: data (the ChatML writer, tokenizers).
"""
