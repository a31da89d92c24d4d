"""Scoring the pool under a model, and what the scores select.

- `scorer`: teacher-forced log-probabilities, never a [T, vocab] logits tensor;
- `select`: Top / Bottom / Random subsets of the scored (H1, H2) pool;
- `diagnostics`: per-step log-likelihood curves, the bias proxy and local difficulty.

Imports: data (token shards, horizons), grid, lmhead, io, progress.
"""
