"""What the ONNX-based backends share, below them: the ONNX export of a SavedModel checked against
TensorFlow (`export`) and a plain ONNX Runtime session runner (`session`) that the export check,
the int8 ladder and the `ort` backend run ONNX models with. The int8 Q/DQ machinery is
`trtconv.quantize`, in the same layer.
"""
