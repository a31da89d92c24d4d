#!/bin/bash
set -e
cd /app
sort -u names.txt > sorted.txt
