"""The shadow check of `trtconv serve --shadow RATE`: a sampled share of the served requests run
again by the native SavedModel, off the served path, and judged by the rules the artifact was
validated by, into a live verdict with its interval (docs/serving.md, "The shadow check").

- judge.py: the manifest's tolerance and roles; counts per output from trtconv's own judging;
- verdict.py: the live verdict (pure numpy): running counts, intervals, states, log lines;
- link.py: model instances offer samples over a socket; a bounded inbox drops and counts;
- check.py: the parent's worker: the native model, the verdict, the fallback, the capture;
- capture.py: the disagreeing samples kept in an .npz the data readers take;
- metrics.py: the Prometheus page (Triton's metrics and the shadow's).
"""
