#!/bin/bash
set -e
cd /app
mkdir -p dist && python3 build.py
