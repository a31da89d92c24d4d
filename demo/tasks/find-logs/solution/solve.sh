#!/bin/bash
set -e
cd /app
find logs -name '*.log' -size +1k | sort > large.txt
