"""What a bench measures: latency statistics and their intervals as pure functions (`stats`) and
the typed bench result document (`bench_result`)."""
