"""Data sources for training, calibration and evaluation."""
