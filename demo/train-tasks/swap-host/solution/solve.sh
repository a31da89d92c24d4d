#!/bin/bash
set -e
cd /app
sed -i 's/localhost/db.internal/g' app.ini
