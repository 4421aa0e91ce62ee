# Process helpers shared by bench.sh and cpubench.sh (sourced, not run): each script records the
# PIDs it starts in the array pids, stops exactly those, and waits for its servers' ports.

pids=()

# stop_all sends SIGTERM to every recorded process, waits up to 10 s for each, then SIGKILLs it.
stop_all() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	pids=()
}

# wait_port waits up to 10 s for a listener on 127.0.0.1:$1.
wait_port() {
	for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
	echo "port $1 did not open" >&2
	return 1
}
