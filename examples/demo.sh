#!/usr/bin/env bash
# The main job on the built-in digits model. Run through `make demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
TRTCONV=.venv/bin/trtconv
OUT=models/demo
rm -rf "$OUT"
$TRTCONV train --model digits-cnn --output "$OUT/digits"
echo "SavedModel: $OUT/digits/saved_model"
