#!/bin/bash
set -e
cd /app
tail -n +2 data.csv | wc -l > count.txt
