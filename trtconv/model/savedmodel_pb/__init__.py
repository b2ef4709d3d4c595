"""A SavedModel's saved_model.pb read without TensorFlow (through trtconv.core.protowire): its
serving signature (`signature`) and the op that computes each output (`output_ops`)."""
