"""INT8 for ONNX models: explicit Q/DQ calibrated on the user's data (ONNX Runtime's quantiser).

Kept free of heavy imports: the CLI and the release config read the choices below.
"""

CALIB_METHODS = ("entropy", "minmax", "percentile")
# The int8 precision ladder's default time limit (convert --fallback-time-limit).
DEFAULT_FALLBACK_TIME_LIMIT_S = 600.0
