"""INT8 for ONNX models: explicit Q/DQ calibrated on the user's data (ONNX Runtime's quantiser),
the int8 precision ladder and the ISA rules for CPU int8 weights.

The calibration methods and the ladder's defaults are options: trtconv.options holds them.
"""
