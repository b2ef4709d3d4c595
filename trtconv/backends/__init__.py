"""One package per backend (tf_native, tftrt, ort, trt), each declaring its record in `registry`:
support rules (`rules.py`), `convert(request)` and a runner factory. `onnx_export` is the ONNX
export step the backends that build from ONNX share; `runner` is the runner protocol."""
