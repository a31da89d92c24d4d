#!/bin/bash
# Verifier: pytest (provided offline by the sandbox) on test_outputs.py; reward 1 if every test passes.
mkdir -p /logs/verifier
if pytest -q -rA /tests/test_outputs.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
