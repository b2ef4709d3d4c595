#!/usr/bin/env bash
# `make bench`'s text model (BENCHMARKS.md), also run alone: `bash examples/bench_bert.sh`.
#
#   BERT-base (keras-hub 0.32's 12-layer configuration built from it with random weights, no
#   downloads; examples/bert_model.py) at 128 tokens, inputs token_ids, segment_ids and
#   padding_mask (int32), on padded sequences of random length:
#   1. calibration memory: `convert --backend ort --precision int8` calibrated on 64 and on 512
#      sequences, the ladder off; each manifest records the calibration's peak RSS and growth;
#   2. `convert --backend best` calibrated on 512 sequences, as a user runs it: its outputs are
#      inferred to be embeddings and judged by cosine similarity (per sample; per valid token
#      for sequence_output, the verdict that means something on random weights: the pooler's
#      vectors of any two sequences are within cosine 0.99 of each other);
#   3. `convert --backend best --precision int8` ranked at batch 1 (a latency artifact; the one
#      ranked at batch 8 may keep OpenVINO's throughput mode, which splits no single sample);
#   4. OpenVINO's own int8 (NNCF's transformer mode, examples/openvino_own.py) against each,
#      interleaved rounds at its batch size, OpenVINO's own timed in its latency mode (one
#      synchronous request) and in its throughput mode (benchmark_app's async pipeline of whole
#      batches) (goal: best >= 0.95x the faster of the two).
#
# Environment: BENCH_QUICK=1 (a 2-layer BERT, few samples: checks the pipeline, not the
# figures), BENCH_OUT=DIR (default bench-results; this writes DIR/bert), BENCH_THREADS=N,
# BENCH_STEPS (default "calib best race": any of them, in that order; "best race" leaves the
# calibration memory out; "race" alone times the artifacts an earlier run left in DIR/bert, so
# the conversions and the timed race can run apart, the race on a quiet machine).
# Needs keras-hub (`pip install 'keras-hub>=0.32'`: TensorFlow 2.20+). BERT-base's ONNX export
# peaks near 14 GB (tf2onnx's process); run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}
TRTCONV=.venv/bin/trtconv
PYTHON=.venv/bin/python
OUT=${BENCH_OUT:-bench-results}/bert
THREADS=${BENCH_THREADS:-$(nproc)}

if [[ "${BENCH_QUICK:-0}" == "1" ]]; then
  # 256 held-out sequences even here: fewer cannot show an embedding's cosine rate at int8's or
  # fp16's bound, and every candidate would be inconclusive.
  SIZE=tiny CALIB=64 SMALL_CALIB=16 HELD_OUT=256 RANK=0.5
  RACE=(--rounds 1 --seconds 0.5)
else
  SIZE=base CALIB=512 SMALL_CALIB=64 HELD_OUT=256 RANK=5
  RACE=(--rounds 5 --seconds 10)
fi

STEPS=" ${BENCH_STEPS:-calib best race} "
step() { [[ "$STEPS" == *" $1 "* ]]; }

echo "== BERT ($SIZE): threads=$THREADS, steps:$STEPS-> $OUT"
if step calib || step best; then
  rm -rf "$OUT"
  mkdir -p "$OUT"
  $PYTHON examples/bert_model.py "$OUT/model" --size "$SIZE" --calib "$CALIB" --held-out "$HELD_OUT"
fi
BERT="$OUT/model/saved_model"
DATA=(--calib-data "$OUT/model/calib.npz" --validate-data "$OUT/model/held_out.npz")

# 1. Calibration memory at two data sizes (the ladder off: one calibration each).
step calib && for samples in "$SMALL_CALIB" "$CALIB"; do
  code=0
  $TRTCONV convert "$BERT" --backend ort --precision int8 "${DATA[@]}" \
    --calib-samples "$samples" --no-fallback --output "$OUT/ort-int8-$samples" --force \
    --json > "$OUT/ort-int8-$samples.json" || code=$?
  [[ $code -eq 0 || $code -eq 4 ]] || { echo "convert ort int8 ($samples) failed: $code" >&2; exit "$code"; }
done

# 2. Every backend and precision that runs here; the fastest validated at batch 8 is kept.
# 3. int8 only, ranked at batch 1.
best() {
  local output=$1
  shift
  local code=0
  $TRTCONV convert "$BERT" --backend best "${DATA[@]}" --calib-samples "$CALIB" \
    --rank-duration "$RANK" --threads "$THREADS" --output "$OUT/$output" --force "$@" \
    --json > "$OUT/$output.json" || code=$?
  [[ $code -eq 0 ]] || { echo "convert --backend best ($output) failed: $code" >&2; exit "$code"; }
}
if step best; then
  best best-b8 --rank-batch-size 8
  best best-int8-b1 --rank-batch-size 1 --precision int8
  # 4a. OpenVINO's own int8 (a conversion: made with the others, timed in the race).
  $PYTHON examples/openvino_own.py build "$BERT" "$OUT/model/calib.npz" "$OUT/openvino-own" \
    --model-type transformer
fi

# 4b. OpenVINO's own int8 against them, interleaved.
step race && for batch in 8 1; do
  artifact=best-b8
  [[ $batch -eq 1 ]] && artifact=best-int8-b1
  $PYTHON examples/openvino_own.py race "$OUT/$artifact" "$OUT/openvino-own/model.xml" \
    "$OUT/model/held_out.npz" --batch-size "$batch" --threads "$THREADS" --goal 0.95 \
    "${RACE[@]}" --own-throughput --json "$OUT/race-b$batch.json" | tee "$OUT/race-b$batch.txt"
done

$PYTHON - "$OUT" "$SMALL_CALIB" "$CALIB" <<'EOF' | tee "$OUT/goals.md"
import json
import sys
from pathlib import Path

out, small, large = Path(sys.argv[1]), sys.argv[2], sys.argv[3]


def quantization(samples: str) -> dict:
    manifest = json.loads((out / f"ort-int8-{samples}" / "manifest.json").read_text())
    return manifest["conversion_summary"]["quantization"]


print("# BERT goals (BENCHMARKS.md)\n")
if all((out / f"ort-int8-{n}" / "manifest.json").is_file() for n in (small, large)):
    # The growth moves with what the allocator kept from the steps before; the peak is the
    # calibration's own figure.
    growth = {n: quantization(n)["calibration_rss_growth_mb"] for n in (small, large)}
    peak = {n: quantization(n)["calibration_peak_rss_mb"] for n in (small, large)}
    same = abs(peak[large] - peak[small]) <= 256
    verdict = "met" if max(growth.values()) < 2048 and same else "MISSED"
    print(f"- calibration: RSS growth {growth[small]:.0f} MB on {small} sequences, "
          f"{growth[large]:.0f} MB on {large}; peak {peak[small]:.0f} and {peak[large]:.0f} MB "
          f"(goal: growth < 2048 MB, peaks the same within 256 MB): {verdict}")
else:
    print("- calibration: not run here (BENCH_STEPS)")
for name in ("best-b8", "best-int8-b1"):
    best = json.loads((out / f"{name}.json").read_text())
    manifest = json.loads((out / name / "manifest.json").read_text())
    checks = [c for c in manifest["validation"]["checks"] if c.get("gating")]
    print(f"- {name}: {best['tournament']['winner']}, validation "
          f"{manifest['validation']['verdict']}; " + "; ".join(c["detail"] for c in checks))
for batch in (1, 8):
    if not (out / f"race-b{batch}.json").is_file():
        print(f"- batch {batch}: not raced (BENCH_STEPS)")
        continue
    race = json.loads((out / f"race-b{batch}.json").read_text())
    print(f"- batch {batch}: {race['artifact']} {race['trtconv_best']['throughput_per_s_median']:.1f}/s vs "
          f"OpenVINO's own int8 (transformer mode) "
          f"{race['openvino_own_int8']['throughput_per_s_median']:.1f}/s, in its throughput mode "
          f"{race['openvino_own_int8_throughput_mode']['throughput_per_s_median']:.1f}/s; "
          f"ratio to the faster {race['ratio']:.3f} "
          f"(goal >= {race['goal']}): {'met' if race['goal_met'] else 'MISSED'}")
EOF
