"""Serving: Triton model repositories (`deploy`) and a live Triton server (`serve`)."""
