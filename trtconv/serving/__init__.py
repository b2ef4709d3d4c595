"""Serving, in three packages, each importing only those before it: `repository` (a Triton model
repository written from artifacts: `deploy`), `server` (a live Triton server and its shadow
check: `serve`) and `load` (load generation and the rate search: `bench --scenario server`)."""
