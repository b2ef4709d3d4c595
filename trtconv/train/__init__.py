"""Training with automatic mixed precision, and float32 SavedModel export."""
