"""Benchmarking: pure statistics (`stats`), orchestration (`harness`), the per-model `worker`."""
