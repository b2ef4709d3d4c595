#!/usr/bin/env bash
# The GPU checks of ONNX Runtime artifacts made on a CPU, run where onnxruntime-gpu is installed
# and TensorFlow need not be: each artifact validated on the GPU against the fp32 artifact (run on
# the CPU provider), the TensorRT provider tried, then fp32 / fp16 / int8 benched side by side.
#
#   examples/gpu_checks.sh ART OUT [MODEL...]
#
# ART holds MODEL-fp32, MODEL-fp16 and MODEL-int8 artifacts for each MODEL (default: digits);
# the first MODEL's are validated on its data contract. DEVICE (default cuda) and DURATION
# (seconds per batch size, default 2) come from the environment. Every command's JSON and stderr
# land in OUT; a failing step is reported and the next one runs.
set -u
ART=${1:?artifact folder}; OUT=${2:?output folder}; shift 2
MODELS=("${@:-digits}")
DEVICE=${DEVICE:-cuda}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
step() { printf '\n== %s\n' "$*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null
$PY -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())"

step "doctor"
$PY -m trtconv doctor > "$OUT/doctor.txt" 2>&1; echo "rc=$?"

first=${MODELS[0]}
for precision in fp32 fp16 int8; do
  step "validate $first-$precision on $DEVICE against $first-fp32 (its own device)"
  $PY -m trtconv validate "$ART/$first-$precision" --reference "$ART/$first-fp32" \
    --device "$DEVICE" --json > "$OUT/validate-$precision.json" 2> "$OUT/validate-$precision.err"
  echo "rc=$?"; tail -n 2 "$OUT/validate-$precision.err"
done

step "the TensorRT provider: validate $first-fp32 --device tensorrt"
$PY -m trtconv validate "$ART/$first-fp32" --reference "$ART/$first-fp32" --device tensorrt \
  > "$OUT/validate-tensorrt.txt" 2>&1
echo "rc=$?"; tail -n 1 "$OUT/validate-tensorrt.txt"

for model in "${MODELS[@]}"; do
  step "bench $model fp32 / fp16 / int8 on $DEVICE at batch 1, 8, 64"
  $PY -m trtconv bench "$ART/$model-fp32" "$ART/$model-fp16" "$ART/$model-int8" \
    --device "$DEVICE" --batch-sizes 1,8,64 --duration "${DURATION:-2}" --data random --json \
    > "$OUT/bench-$model.json" 2> "$OUT/bench-$model.err"
  echo "rc=$?"; grep -E '^warning' "$OUT/bench-$model.err" | head -n 5
done
