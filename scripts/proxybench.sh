#!/usr/bin/env bash
# The gRPC proxy against direct remoting, on one three-node DLedger group (loopback, data in a
# temporary directory, 1 KiB messages): a name server, the group and one mqproxy; then producer
# runs alternating A (direct: the official 4.x Go client, remoting to the brokers), B (the
# official 5.x Go client through the proxy: mqbench5) and C (this repository's lean gRPC
# producer through the proxy: mqbench --client grpc, once per value of GRPC_CONNS, the HTTP/2
# connections it spreads its calls over) and D (the 4.x client of A given the proxy's remoting
# listener as its name server), ROUNDS times (A,B,C,D,A,B,C,D,...), each with CONC sends in
# flight. C shows the proxy's own cost without the 5.x client's (which costs more CPU per
# message than the proxy, and every process shares the machine's cores). For every run: msg/s,
# p99, and the CPU time (utime+stime from /proc/<pid>/stat) of the proxy, of the three brokers
# and of the client (its last reading, up to 0.2 s before it exits) during the run divided by
# the messages acknowledged (warm-up included on both sides). Then, if CONSUME=1, one consumer
# run each way (direct: the native client pulling; proxy: a 5.x SimpleConsumer, mqbench5, and
# this project's simple consumer, mqbench, acking each receive's messages in one call).
#
# Usage: scripts/proxybench.sh
# Env: DUR (20s), WARMUP (5s), CONC (256), MODE (sync), PRODUCERS (4), ROUNDS (2), CONSUME (1),
#      GRPC_CONNS ("1"; e.g. "1 4" runs C twice a round), BASE_PORT (24000), BIN (./bin),
#      PROXY_ENV (environment of the proxy, e.g. GOMAXPROCS=1), PROXY_PERF=secs (perf record -g
#      of the proxy during the first C run, after the warm-up; the report's top symbols are
#      printed), KEEP=1 (keep the work directory: logs, perf.data)
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${DUR:-20s}"
WARMUP="${WARMUP:-5s}"
CONC="${CONC:-256}"
MODE="${MODE:-sync}"
PRODUCERS="${PRODUCERS:-4}"
GRPC_CONNS="${GRPC_CONNS:-1}"
ROUNDS="${ROUNDS:-2}"
CONSUME="${CONSUME:-1}"
BP="${BASE_PORT:-24000}"
BIN="${BIN:-./bin}"
WORK="$(mktemp -d /tmp/rr-proxybench.XXXXXX)"
NS="127.0.0.1:$((BP + 876))"
PX="127.0.0.1:$((BP + 81))"
PXR="127.0.0.1:$((BP + 80))" # the proxy's remoting listener (4.x clients)
HZ=$(getconf CLK_TCK)

# shellcheck source=scripts/procs.sh
. scripts/procs.sh # the script has cd'd to the repository root
trap 'stop_all; [ -n "${KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"' EXIT INT TERM

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "machine: $(nproc) cores, $(uname -sr), load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
echo "producers: $MODE, $CONC in flight, $PRODUCERS client instances, 1024 B, $DUR (warm-up $WARMUP), $ROUNDS rounds A/B/C/D (C with $GRPC_CONNS connections)"
"$BIN"/mqnamesrv --listen "$NS" --kvConfigPath "$WORK/kv.json" >"$WORK/namesrv.log" 2>&1 &
pids+=($!)
peers="n0-127.0.0.1:$((BP + 911));n1-127.0.0.1:$((BP + 912));n2-127.0.0.1:$((BP + 913))"
bpids=()
for i in 0 1 2; do
	"$BIN"/mqbroker -n "$NS" --brokerName bench-broker --listenPort $((BP + 100 + 3 * i)) \
		--storePathRootDir "$WORK/store/n$i" --enableDLegerCommitLog=true --dLegerGroup bench-broker \
		--dLegerPeers "$peers" --dLegerSelfId "n$i" --logLevel warn >"$WORK/broker-n$i.log" 2>&1 &
	pids+=($!)
	bpids+=($!)
done
wait_port $((BP + 876))
for i in 0 1 2; do wait_port $((BP + 100 + 3 * i)); done
for _ in $(seq 150); do "$BIN"/mqadmin topicRoute -n "$NS" -t TBW102 -o json 2>/dev/null | grep -q '"0"' && break; sleep 0.1; done
# shellcheck disable=SC2086
env ${PROXY_ENV:-} "$BIN"/mqproxy -n "$NS" --grpcServerPort $((BP + 81)) --remotingListenPort $((BP + 80)) --listenHost 127.0.0.1 >"$WORK/proxy.log" 2>&1 &
pids+=($!)
ppid=$!
wait_port $((BP + 81))
# One topic, created with 8 queues on the group before the runs (both paths send to it).
for _ in $(seq 50); do "$BIN"/mqadmin updateTopic -n "$NS" -c DefaultCluster -t BenchProxy -r 8 -w 8 >/dev/null 2>&1 && break; sleep 0.2; done
sleep 1

brokers_ticks() { local t=0 p; for p in "${bpids[@]}"; do t=$((t + $(ticks "$p"))); done; echo "$t"; }
# run NAME BINARY ARGS...: one produce run; prints its summary line and CPU per message.
run() {
	local name=$1 bin=$2
	shift 2
	local p0 b0 p1 b1 out perfpid=""
	if [ -n "${PROXY_PERF:-}" ] && [ "${name:0:1}" = C ] && [ ! -e "$WORK/perf.data" ]; then
		(sleep "${WARMUP%s}" && perf record -q -F 499 -g -p "$ppid" -o "$WORK/perf.data" -- sleep "$PROXY_PERF" >/dev/null 2>&1) &
		perfpid=$!
	fi
	p0=$(ticks "$ppid")
	b0=$(brokers_ticks)
	"$BIN/$bin" produce "$@" -t BenchProxy --mode "$MODE" -c "$CONC" --producers "$PRODUCERS" -s 1024 \
		-d "$DUR" --warmup "$WARMUP" -q --json >"$WORK/mqbench.out" 2>"$WORK/mqbench.err" &
	local mpid=$! m1=0
	# The client's CPU: its last reading before it exits.
	while kill -0 "$mpid" 2>/dev/null; do m1=$(ticks "$mpid" 2>/dev/null || echo "$m1"); sleep 0.2; done
	wait "$mpid" || { echo "== $name: mqbench failed"; tail -5 "$WORK/mqbench.err"; return 0; }
	out=$(cat "$WORK/mqbench.out")
	p1=$(ticks "$ppid")
	b1=$(brokers_ticks)
	echo "$out" | awk -v name="$name" -v pt=$((p1 - p0)) -v bt=$((b1 - b0)) -v mt="$m1" -v hz="$HZ" '
		{ match($0, /"msgs_per_sec":[0-9.]+/); r = substr($0, RSTART + 15, RLENGTH - 15)
		  match($0, /"p99_ms":[0-9.]+/); p = substr($0, RSTART + 9, RLENGTH - 9)
		  match($0, /"total_msgs":[0-9]+/); n = substr($0, RSTART + 13, RLENGTH - 13)
		  match($0, /"errors":[0-9]+/); e = substr($0, RSTART + 9, RLENGTH - 9)
		  us = n > 0 ? 1e6 / hz / n : 0
		  printf "== %-34s %7.0f msg/s  p99 %6.1f ms  errors %s  CPU us/msg: proxy %5.1f  brokers %5.1f  client >= %5.1f  (%d msgs)\n",
		    name, r, p, e, pt * us, bt * us, mt * us, n }'
	grep -E '^  error' "$WORK/mqbench.err" | head -3 || true
	if [ -n "$perfpid" ]; then
		wait "$perfpid" || true
		# (head closes the pipe early: not a failure of the run)
		perf report -i "$WORK/perf.data" --no-children --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' | head -40 || true
	fi
}

for r in $(seq "$ROUNDS"); do
	run "A$r direct (4.x client)" mqbench -n "$NS"
	run "B$r proxy (5.x client, gRPC)" mqbench5 --client grpc --endpoint "$PX"
	for c in $GRPC_CONNS; do
		run "C$r proxy (native gRPC, $c conns)" mqbench --client grpc --endpoint "$PX" --connections "$c"
	done
	run "D$r proxy (4.x client, remoting)" mqbench -n "$PXR"
done

if [ "$CONSUME" = 1 ]; then
	# Consumers start at the queues' end and read what a producer run writes meanwhile.
	stored() { "$BIN"/mqadmin topicStatus -n "$NS" -t BenchProxy -o json | grep -o '"maxOffset": *[0-9]*' | awk -F: '{s+=$2} END {print s+0}'; }
	for side in direct proxy-5.x proxy-native; do
		cbin=mqbench
		case $side in
		direct) cargs=(--client native -n "$NS") ;;
		proxy-5.x) cbin=mqbench5 cargs=(--client grpc --endpoint "$PX" --pollers 8) ;;
		*) cargs=(--client grpc --endpoint "$PX" --pollers 8 --connections 1) ;;
		esac
		p0=$(ticks "$ppid")
		"$BIN/$cbin" consume "${cargs[@]}" -t BenchProxy -g "bench_$side" -d "$DUR" --warmup "$WARMUP" -q >"$WORK/consume-$side.out" 2>&1 &
		cpid=$!
		sleep 4
		"$BIN"/mqbench produce --client native -n "$NS" -t BenchProxy --mode async -c 64 -s 1024 -d "$DUR" -q >/dev/null 2>&1 || true
		wait "$cpid" || true
		p1=$(ticks "$ppid")
		echo "== consume via $side (proxy CPU $(((p1 - p0) * 1000 / HZ)) ms in all): $(grep -E '^SUMMARY' "$WORK/consume-$side.out" || tail -2 "$WORK/consume-$side.out")"
	done
fi
