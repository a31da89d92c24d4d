"""Preference refinement after SFT: DMPO on the policy's own successes and failures.

`tasks` (the training task set, kept apart from the benchmarks; the preference rollouts),
`pairs` (success/failure pairs of the same task, serialized by our ChatML writer), `reference`
(per-turn reference log-probs precomputed with the scorer's chunked path, tied to the reference
model by its hash), `loss` (the DMPO loss and the chunked per-turn log-probs it is computed on),
`launch` and `worker` (the training job: the SFT launcher, ZeRO-3 config, resume and records).
Imports: data, train, score and eval below it; report never imports it.
"""
