"""A live Triton server (`trtconv serve`): Triton found and started, the model its Python backend
runs, the warm-up and start-up check, the plan and the lines that say it, the stop, and the
shadow check (`shadow/`)."""
