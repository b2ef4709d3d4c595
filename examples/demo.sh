#!/usr/bin/env bash
# The main job on the built-in digits model. Run through `make demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
TRTCONV=.venv/bin/trtconv
OUT=models/demo
rm -rf "$OUT"
$TRTCONV train --model digits-cnn --output "$OUT/digits"
echo "SavedModel: $OUT/digits/saved_model"
# INT8 (explicit Q/DQ, calibrated on the digits train split) with ONNX Runtime on this CPU, then
# validated again against the native SavedModel on the held-out digits.
$TRTCONV convert "$OUT/digits/saved_model" --precision int8 --backend ort \
  --calib-data digits --calib-method entropy --output "$OUT/digits-ort-int8"
$TRTCONV validate "$OUT/digits-ort-int8"
# Native vs converted side by side: same inputs, each model in its own process (trtconv bench).
ARTIFACTS=()
for artifact in "$OUT/digits-ort-fp32" "$OUT/digits-ort-int8"; do
  if [[ -d "$artifact" ]]; then ARTIFACTS+=("$artifact"); fi
done
$TRTCONV bench "$OUT/digits/saved_model" "${ARTIFACTS[@]}" --batch-sizes 1,8 \
  --data digits --eval-data digits --duration 2 --report "$OUT/bench" --force
