#!/bin/bash
set -e
cd /app
wc -w < poem.txt > words.txt
