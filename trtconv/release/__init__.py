"""`trtconv release`: one TOML config runs train → convert → validate → bench → gates → verdict.

config.py reads and checks the TOML; steps.py runs or reuses each step (resume records in
store.py); gates.py and verdict.py judge the targets; rundir.py guards the release directory
(lock, log, SIGTERM); pipeline.py strings them together and writes release.json (schema in
release.schema.json) and release.md (markdown.py).
"""
