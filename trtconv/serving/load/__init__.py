"""Load on a served model (`trtconv bench --scenario server|single-stream|offline`): the LoadGen
driver, the rate search at a latency budget, the open-loop overload runs, and how sure a run's
p99 is."""
