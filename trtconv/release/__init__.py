"""`trtconv release`: one TOML config runs train → convert → validate → bench → gates → verdict.

config.py reads and checks the TOML (its value checks in values.py) into the typed settings of
settings.py; command_options.py builds each command's options object from them; steps.py runs or
reuses each step (resume records in store.py) through the train, convert, validate and bench
pipelines; gates.py and verdict.py judge the targets; rundir.py guards the release directory
(lock, log, SIGTERM); pipeline.py strings them together and returns a ReleaseResult
(document.py), written as release.json (schema in release.schema.json) and release.md
(markdown.py).
"""
