"""Each command's options as one frozen dataclass, one module per command (`convert`, `validate`,
`bench`, `train`, `release`, `deploy`, `serve`, `server_bench`), beside what several share
(`shared`: the checks of a value, the confidence level, the data splits; `serving`: what the
served commands share): the home of every default.

It sits at the bottom of the layers, beside trtconv.core, and imports only core: whatever an
options object holds is defined here (`PreprocessingOptions`) or in core (`Judging`, the output
roles and tolerances the user states), so every layer above can take an options object.

The typer commands build these from their flags, `trtconv.api` callers build them directly and
the release config builds them from TOML, so a default written here is the default everywhere.
Checks that need no model (choices, ranges) run in `__post_init__`: whoever builds an options
object gets the same one-sentence UsageError.
"""
