"""Benchmarking: orchestration (`harness`), the per-model `worker`; the pure statistics and the
result types are `trtconv.measure`."""
