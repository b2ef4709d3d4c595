"""trtconv: from a TensorFlow model to a validated, benchmarked inference artifact."""

__version__ = "0.1.0"
