"""A Triton model repository (`trtconv deploy`): each model's config.pbtxt, its batching and
admission settings, and the inputs fixed at the values its manifest records."""
