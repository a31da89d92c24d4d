"""horizon: how many tokens of a terminal-agent trajectory should a student imitate?

The importable package behind the Snakemake workflow; every stage's logic lives here (see
the docs site under docs/, docs/development/layout.md for the map, and the module docstrings). Importing it is cheap: modules import torch and
transformers only where they need them.
"""

__version__ = "0.1.0"
