"""OpenVINO: the SavedModel read by OpenVINO itself (no ONNX export), an IR (`model.xml` +
`model.bin`) run by its CPU plugin; fp32, bf16 and fp16 inference precision where the CPU has
them, int8 by NNCF post-training quantisation."""
