"""The model a command is given: what a path names (`paths`), SavedModels loaded with their
serving signature (`savedmodel`), those TensorFlow cannot revive loaded from their signature
graphs (`signature_graph`), and saved_model.pb read without TensorFlow (`savedmodel_pb`)."""
