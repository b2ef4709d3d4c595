"""INT8 for ONNX models: explicit Q/DQ calibrated on the user's data (ONNX Runtime's quantiser).

Kept free of heavy imports: the CLI and the release config read the choices below.
"""

CALIB_METHODS = ("entropy", "minmax", "percentile")
# minmax, as ONNX Runtime's own quantize_static: held-out top-1 agreement of full int8 measured
# 0.981 (minmax) vs 0.928 (entropy) on a MobileNetV2 with ReLU6, 1.000 vs 0.986 on a small ResNet,
# equal on the digits CNN and a text model. Entropy clips the ReLU6 cap; the ladder tries it.
DEFAULT_CALIB_METHOD = "minmax"
# The int8 precision ladder's default time limit (convert --fallback-time-limit).
DEFAULT_FALLBACK_TIME_LIMIT_S = 600.0
