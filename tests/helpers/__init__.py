"""What the tests share: fixtures and models built once (model_cache, *_fixtures), the CLI run
in-process (cli_runner), the quick tier (tiers), a test-only backend (reference_backend), TensorRT
and CUDA stand-ins (standins). Tests import them as `from tests.helpers.NAME import ...`; no test
imports another test module."""
