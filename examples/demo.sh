#!/usr/bin/env bash
# The main job on the built-in digits model (run through `make demo`): train with AMP, convert to
# FP32 and calibrated INT8, validate against the native SavedModel, bench them side by side, then
# serve INT8 through Triton under load.
set -euo pipefail
cd "$(dirname "$0")/.."
TRTCONV=.venv/bin/trtconv
OUT=models/demo
rm -rf "$OUT"

step() { printf '\n== %s\n' "$*"; }

step "doctor: what this machine can convert"
$TRTCONV doctor --quick

step "train digits-cnn with automatic mixed precision"
$TRTCONV train --model digits-cnn --output "$OUT/digits"

# `--backend auto` picks TF-TRT or TensorRT where a GPU has them; ONNX Runtime on this CPU.
step "convert to FP32 (ONNX Runtime, graph optimisations applied)"
$TRTCONV convert "$OUT/digits/saved_model" --precision fp32 --output "$OUT/digits-fp32"

step "convert to INT8 (explicit Q/DQ, calibrated on the digits train split)"
$TRTCONV convert "$OUT/digits/saved_model" --precision int8 --calib-data digits \
  --calib-method entropy --output "$OUT/digits-int8"

step "validate INT8 against the native SavedModel on held-out digits"
$TRTCONV validate "$OUT/digits-int8"

step "bench native vs FP32 vs INT8: same inputs, each model in its own process"
$TRTCONV bench "$OUT/digits/saved_model" "$OUT/digits-fp32" "$OUT/digits-int8" \
  --batch-sizes 1,8 --data digits --eval-data digits --duration 3 --report "$OUT/bench"

# Triton serves the INT8 artifact (trtconv serve); LoadGen's Poisson arrivals search for the
# highest rate whose p99 meets 20 ms.
step "serve INT8 through Triton under load"
$TRTCONV bench "$OUT/digits-int8" --scenario server --latency-budget-ms 20 --search-runs 3 \
  --duration 2
echo
echo "SavedModel: $OUT/digits/saved_model   artifacts: $OUT/digits-fp32, $OUT/digits-int8"
echo "report: $OUT/bench/report.md"
