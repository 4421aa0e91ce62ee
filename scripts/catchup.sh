#!/usr/bin/env bash
# Catch-up of one follower, alone (the catch-up figure of scripts/figures.sh without the rest): a
# three-node DLedger group on loopback (n0 preferred as leader), n2 stopped (SIGTERM), MB MiB of
# commitlog written without it (async, 2048 in flight, 1 KiB messages), n2 started again and its
# commitlog max offset (/status) sampled every 0.2 s until it reaches the leader's. Prints how long
# after n2's exec its commitlog first grew (the leader's first AppendEntries to it) and the MB/s
# from its exec and from that first progress.
#
# Usage: scripts/catchup.sh
# Env: MB (700), BROKER_FLAGS (e.g. "--dLegerLogStore=commitlog"), BIN (./bin), BASE_PORT (27000),
#      PROF=1 (CPU profiles of the leader and n2 over PSEC (5) seconds from PDELAY (2) seconds after
#      n2's exec, into OUT), OUT (result directory, default a temp directory)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-./bin}"
MB="${MB:-700}"
BP="${BASE_PORT:-27000}"
WORK="$(mktemp -d /tmp/rr-catchup.XXXXXX)"
OUT="${OUT:-$WORK/out}"
mkdir -p "$OUT"
NS="127.0.0.1:$((BP + 876))"

# shellcheck source=scripts/procs.sh
. scripts/procs.sh # the script has cd'd to the repository root
trap 'stop_all; rm -rf "$WORK/store"' EXIT INT TERM

status() { curl -s --max-time 2 "http://127.0.0.1:$((BP + 200 + $1))/status" || true; }
cloff() { status "$1" | grep -oE '"commitLogMaxOffset": *[0-9]+' | head -1 | grep -oE '[0-9]+$' || echo 0; }
now_ns() { date +%s%N; }

"$BIN"/mqnamesrv --listen "$NS" --kvConfigPath "$WORK/kv.json" >"$WORK/namesrv.log" 2>&1 &
pids+=($!)
wait_port $((BP + 876))
peers="n0-127.0.0.1:$((BP + 911));n1-127.0.0.1:$((BP + 912));n2-127.0.0.1:$((BP + 913))"
declare -A bpid
start_node() {
	# shellcheck disable=SC2086
	"$BIN"/mqbroker -n "$NS" --brokerName catchup --listenPort $((BP + 100 + 3 * $1)) --httpPort $((BP + 200 + $1)) \
		--enablePprof=true --storePathRootDir "$WORK/store/n$1" --enableDLegerCommitLog=true --dLegerGroup catchup \
		--preferredLeaderId n0 --dLegerPeers "$peers" --dLegerSelfId "n$1" --logLevel warn ${BROKER_FLAGS:-} \
		>>"$OUT/broker-n$1.log" 2>&1 &
	pids+=($!)
	bpid[$1]=$!
}
for i in 0 1 2; do start_node "$i"; done
for i in 0 1 2; do wait_port $((BP + 100 + 3 * i)); done
for _ in $(seq 300); do status 0 | grep -q '"role":"SYNC_MASTER"' && break; sleep 0.1; done
status 0 | grep -q '"role":"SYNC_MASTER"' || { echo "n0 did not become the leader"; exit 1; }
for _ in $(seq 50); do "$BIN"/mqadmin updateTopic -n "$NS" -c DefaultCluster -t CatchUp -r 8 -w 8 >/dev/null 2>&1 && break; sleep 0.2; done
sleep 1
kill -TERM "${bpid[2]}"
wait "${bpid[2]}" 2>/dev/null || true
from=$(cloff 0)
"$BIN"/mqbench produce --client native -n "$NS" -t CatchUp --mode async -c 2048 --producers 4 -s 1024 \
	--messages $((MB * 1048576 / 1200)) -d 0 --warmup 0s -q --json >"$OUT/fill.json" 2>"$OUT/fill.err" || true
target=$(cloff 0)
echo "n2 is $(((target - from) / 1048576)) MiB of commitlog behind"
t0=$(now_ns)
start_node 2
wait_port $((BP + 106))
profs=()
if [ "${PROF:-0}" = 1 ]; then
	for i in 0 2; do
		(sleep "${PDELAY:-2}"; curl -s -o "$OUT/cpu-n$i.pprof" "http://127.0.0.1:$((BP + 200 + i))/debug/pprof/profile?seconds=${PSEC:-5}") &
		profs+=($!)
	done
fi
start=-1 first="" last=""
for _ in $(seq 3000); do # up to 10 min
	o=$(cloff 2)
	[ "$start" -lt 0 ] && [ "$o" -gt 0 ] && start=$o
	[ -z "$first" ] && [ "$start" -ge 0 ] && [ "$o" -gt "$start" ] && first=$(now_ns)
	[ "$o" -ge "$target" ] && { last=$(now_ns); break; }
	sleep 0.2
done
[ "${#profs[@]}" -gt 0 ] && wait "${profs[@]}"
[ -n "$last" ] || { echo "n2 did not catch up within 10 minutes"; exit 1; }
got=$(($(cloff 2) - (start > 0 ? start : from)))
awk -v b="$got" -v t0="$t0" -v f="${first:-$t0}" -v e="$last" 'BEGIN {
	printf "first entry %.2f s after exec; caught up %.0f MiB in %.1f s from exec = %.0f MB/s, %.1f s from the first entry = %.0f MB/s\n",
		(f - t0) / 1e9, b / 1048576, (e - t0) / 1e9, b / ((e - t0) / 1e3), (e - f) / 1e9, b / ((e - f) / 1e3) }'
echo "load $(cut -d' ' -f1-3 /proc/loadavg); logs and profiles in $OUT"
