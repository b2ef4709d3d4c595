"""The `inspect` pipeline: what a SavedModel, an artifact or an ONNX file holds (`pipeline`)."""
