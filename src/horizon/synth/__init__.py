"""Task synthesis: seeds -> an LLM cascade -> a test review -> verification in a real sandbox -> Harbor tasks.

`seeds` reads the seeds (StackOverflow-style Q&A records or domains with counts), `files` parses a
stage's answer into files, `cascade` asks the model stage by stage, `verify` runs what it wrote in a
sandbox (build, reference solution, tests, lazy attacks), `run` drives every seed, resumably.
"""
