"""The `doctor` pipeline: what this machine has and which conversions it can run (`pipeline`)."""
