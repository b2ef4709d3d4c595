"""One module per backend. `open_runner` picks the runner for a SavedModel or an artifact."""
