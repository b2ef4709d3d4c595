"""INT8 for ONNX models: explicit Q/DQ calibrated on the user's data (ONNX Runtime's quantiser).

Kept free of heavy imports: the CLI and the release config read the choices below.
"""

CALIB_METHODS = ("entropy", "minmax", "percentile")
