#!/usr/bin/env bash
# The figures the product promises but no other benchmark measures, on one three-node DLedger
# group (R3) on loopback (data in a temporary directory, 1 KiB messages, the native client):
#
#  1. peak: async produce with PEAK_CONC in flight for DUR; msg/s, and meanwhile every broker's
#     memory (VmRSS and RssAnon of /proc/PID/status sampled every 0.5 s, their maxima, and VmHWM) and the
#     bytes it wrote (write_bytes of /proc/PID/io: what it sent to the page cache for the disk,
#     mmap writes included) per acknowledged message, and the commitlog record size (the leader's
#     commitlog growth per message).
#  2. end-to-end latency at half of the peak: a consumer pulling from the queues' end while a
#     producer sends at a fixed rate (mqbench --rate, half of phase 1's msg/s) with enough
#     blocking senders; the consumer's p50/p99 (receive time minus the born timestamp, which has
#     millisecond resolution: up to 1 ms too high) and the send latency.
#  3. consume throughput, reading everything the topic holds: from the leader and from a
#     follower (mqbench consume --read-addr), alternated, CONSUME_ROUNDS times.
#  4. catch-up: a follower stopped, CATCHUP_MB of commitlog written without it, then started
#     again: its commitlog max offset (GET_RAFT_STATUS via /status) sampled every 0.5 s until it
#     reaches the leader's; MB/s from its exec and from its first progress.
#  5. restart to serving, RESTARTS times each, with every node holding at least CATCHUP_MB:
#     a follower stopped (SIGTERM) and exec'd again, timed to its first pull of a stored message
#     (mqbench probe --op pull); then the whole group stopped and exec'd at once, timed to the
#     first SEND_OK from any node (mqbench probe --op send: needs an election and a leader ready).
#  6. the proxy's overhead: scripts/proxybench.sh (its own group and proxy) with CONSUME=0 and
#     PROXY_ROUNDS rounds, unless PROXY=0.
#
# Every figure line starts with "FIG" and ends with the load average when it was taken.
# Usage: scripts/figures.sh     (make bench-figures)
# Env: DUR (20s), WARMUP (5s), PEAK_CONC (2048), CATCHUP_MB (1024), CONSUME_ROUNDS (2),
#      RESTARTS (2), PROXY (1), PROXY_ROUNDS (2), BASE_PORT (26000), BIN (./bin), KEEP=1,
#      BROKER_FLAGS (extra broker flags, e.g. "--dLegerLogStore commitlog"),
#      STOP_AFTER=2 (only figures 1 and 2: peak, memory, disk bytes and end-to-end latency; 3:
#      and the consume figures; 4: and the catch-up),
#      HEADERS (json: the producers' request header encoding, mqbench --serialize json|rocketmq),
#      E2E_RATE=msg/s (skip figure 1 and send figure 2 at this rate instead of half the peak:
#      builds or settings compared at one rate; with STOP_AFTER=2, figure 2 alone)
set -euo pipefail
cd "$(dirname "$0")/.."
DUR="${DUR:-20s}"
WARMUP="${WARMUP:-5s}"
PEAK_CONC="${PEAK_CONC:-2048}"
CATCHUP_MB="${CATCHUP_MB:-1024}"
CONSUME_ROUNDS="${CONSUME_ROUNDS:-2}"
RESTARTS="${RESTARTS:-2}"
BP="${BASE_PORT:-26000}"
BIN="${BIN:-./bin}"
HEADERS="${HEADERS:-json}"
SER=() # flags for a header encoding other than the default (a BIN older than --serialize runs JSON)
[ "$HEADERS" = json ] || SER=(--serialize "$HEADERS")
WORK="$(mktemp -d /tmp/rr-figures.XXXXXX)"
NS="127.0.0.1:$((BP + 876))"
TOPIC=BenchFigures

# shellcheck source=scripts/procs.sh
. scripts/procs.sh # the script has cd'd to the repository root
trap 'stop_all; [ -n "${KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"' EXIT INT TERM

load() { cut -d' ' -f1-3 /proc/loadavg; }
# jf FIELD: the first numeric value of "FIELD" in the JSON on stdin.
jf() { grep -oE "\"$1\": *[0-9.]+" | head -1 | grep -oE '[0-9.]+$' || echo 0; }
# jr FIELD: the same rounded to an integer (rates).
jr() { printf "%.0f" "$(jf "$1")"; }
addr() { echo "127.0.0.1:$((BP + 100 + 3 * $1))"; }
status() { curl -s --max-time 2 "http://127.0.0.1:$((BP + 200 + $1))/status" || true; }
cloff() { status "$1" | grep -oE '"commitLogMaxOffset": *[0-9]+' | head -1 | grep -oE '[0-9]+$' || echo 0; }
now_ns() { date +%s%N; }
fig() { echo "FIG $*  (load $(load))"; }

echo "machine: $(nproc) cores, $(uname -sr), $(awk '/MemTotal/{printf "%.1f GiB", $2 / 1048576}' /proc/meminfo), load $(load); $(date -u +%FT%TZ)"
"$BIN"/mqnamesrv --listen "$NS" --kvConfigPath "$WORK/kv.json" >"$WORK/namesrv.log" 2>&1 &
pids+=($!)
wait_port $((BP + 876))
peers="n0-127.0.0.1:$((BP + 911));n1-127.0.0.1:$((BP + 912));n2-127.0.0.1:$((BP + 913))"
bpid=()
# start_node I: exec node I (its pid in bpid[I]).
start_node() {
	"$BIN"/mqbroker -n "$NS" --brokerName bench-broker --listenPort $((BP + 100 + 3 * $1)) --httpPort $((BP + 200 + $1)) \
		--storePathRootDir "$WORK/store/n$1" --enableDLegerCommitLog=true --dLegerGroup bench-broker \
		--dLegerPeers "$peers" --dLegerSelfId "n$1" --logLevel warn ${BROKER_FLAGS:-} >>"$WORK/broker-n$1.log" 2>&1 &
	pids+=($!)
	bpid[$1]=$!
}
# stop_node I: SIGTERM node I and wait for it to exit (SIGKILL after 30 s).
stop_node() {
	local p=${bpid[$1]}
	kill -TERM "$p" 2>/dev/null || true
	for _ in $(seq 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
}
# leader: the index of the node reporting SYNC_MASTER (waits up to 30 s).
leader() {
	for _ in $(seq 300); do
		for i in 0 1 2; do status "$i" | grep -q '"role":"SYNC_MASTER"' && { echo "$i"; return; }; done
		sleep 0.1
	done
	echo "no leader" >&2
	return 1
}
for i in 0 1 2; do start_node "$i"; done
for i in 0 1 2; do wait_port $((BP + 100 + 3 * i)); done
L=$(leader)
for _ in $(seq 50); do "$BIN"/mqadmin updateTopic -n "$NS" -c DefaultCluster -t "$TOPIC" -r 8 -w 8 >/dev/null 2>&1 && break; sleep 0.2; done
for _ in $(seq 150); do "$BIN"/mqadmin topicRoute -n "$NS" -t "$TOPIC" -o json 2>/dev/null | grep -q '"0"' && break; sleep 0.1; done
echo "group R3, leader n$L"

# ---- 1. peak: msg/s, memory and bytes written per message per node
if [ -z "${E2E_RATE:-}" ]; then
declare -A rssmax anonmax w0 w1
L=$(leader)
for i in 0 1 2; do rssmax[$i]=0; anonmax[$i]=0; w0[$i]=$(awk '/^write_bytes/{print $2}' "/proc/${bpid[$i]}/io"); done
c0=$(cloff "$L")
"$BIN"/mqbench produce --client native ${SER[@]+"${SER[@]}"} -n "$NS" -t "$TOPIC" --mode async -c "$PEAK_CONC" --producers 4 -s 1024 \
	-d "$DUR" --warmup "$WARMUP" -q --json >"$WORK/peak.json" 2>"$WORK/peak.err" &
mp=$!
while kill -0 "$mp" 2>/dev/null; do
	for i in 0 1 2; do
		r=$(awk '/^VmRSS/{print $2}' "/proc/${bpid[$i]}/status")
		[ "$r" -gt "${rssmax[$i]}" ] && rssmax[$i]=$r
		r=$(awk '/^RssAnon/{print $2}' "/proc/${bpid[$i]}/status")
		[ "$r" -gt "${anonmax[$i]}" ] && anonmax[$i]=$r
	done
	sleep 0.5
done
wait "$mp" || { echo "peak run failed"; tail -5 "$WORK/peak.err"; exit 1; }
for i in 0 1 2; do w1[$i]=$(awk '/^write_bytes/{print $2}' "/proc/${bpid[$i]}/io"); done
c1=$(cloff "$L")
PEAK=$(jr msgs_per_sec <"$WORK/peak.json" | cut -d. -f1)
total=$(jr total_msgs <"$WORK/peak.json")
[ "${total%.*}" -gt 0 ] || { echo "the peak run acknowledged nothing:"; tail -3 "$WORK/peak.err"; exit 1; }
REC=$(awk -v a="$c0" -v b="$c1" -v n="$total" 'BEGIN {r = (b - a) / n; printf "%.0f", (r > 0 ? r : 1100)}')
fig "peak: $PEAK msg/s async $PEAK_CONC in flight (p50 $(jf p50_ms <"$WORK/peak.json") ms, p99 $(jf p99_ms <"$WORK/peak.json") ms, $(jr total_errors <"$WORK/peak.json") errors, $total msgs in all); commitlog record $REC B per 1024 B body"
line="memory at peak, max VmRSS (VmHWM; max RssAnon, the process's own memory without the mapped files' pages):"
for i in 0 1 2; do
	role=F
	[ "$i" = "$L" ] && role=L
	line+=" n$i($role) $((rssmax[$i] / 1024)) MiB ($(($(awk '/^VmHWM/{print $2}' "/proc/${bpid[$i]}/status") / 1024)) MiB; $((anonmax[$i] / 1024)) MiB)"
done
fig "$line"
# Per acknowledged message (too high when sends timed out: stored, not counted) and per byte
# the commitlog grew (exact either way).
line="disk writes (write_bytes) per acknowledged msg and per commitlog byte:"
for i in 0 1 2; do
	role=F
	[ "$i" = "$L" ] && role=L
	line+=" n$i($role) $(awk -v w=$((w1[$i] - w0[$i])) -v n="$total" -v c=$((c1 - c0)) 'BEGIN {printf "%.0f B = %.2fx", w / n, (c > 0 ? w / c : 0)}')"
done
fig "$line"
fi

# ---- 2. end-to-end latency at half of the peak
half=${E2E_RATE:-$((PEAK / 2))}
"$BIN"/mqbench consume --client native -n "$NS" -t "$TOPIC" -g fig_e2e --from last -d $((${DUR%s} + 4))s --warmup "$WARMUP" -q --json \
	>"$WORK/e2e.json" 2>"$WORK/e2e.err" &
cp=$!
sleep 2
"$BIN"/mqbench produce --client native ${SER[@]+"${SER[@]}"} -n "$NS" -t "$TOPIC" --mode sync -c 512 --producers 4 -s 1024 --rate "$half" \
	-d "$DUR" --warmup "$WARMUP" -q --json >"$WORK/half.json" 2>"$WORK/half.err" || true
wait "$cp" || true
fig "end-to-end at half of the peak (--rate $half): sent $(jr msgs_per_sec <"$WORK/half.json") msg/s (send p50 $(jf p50_ms <"$WORK/half.json") ms, p99 $(jf p99_ms <"$WORK/half.json") ms); consumed $(jr msgs_per_sec <"$WORK/e2e.json") msg/s, end-to-end p50 $(jf p50_ms <"$WORK/e2e.json") ms, p99 $(jf p99_ms <"$WORK/e2e.json") ms, p999 $(jf p999_ms <"$WORK/e2e.json") ms"
[ "${STOP_AFTER:-}" = 2 ] && exit 0

# ---- 3. consume throughput: leader and a follower, alternated
L=$(leader)
F=$(((L + 1) % 3))
stored=$("$BIN"/mqadmin topicStatus -n "$NS" -t "$TOPIC" -o json | grep -oE '"maxOffset": *[0-9]+' | awk -F: '{s += $2} END {print s + 0}')
for r in $(seq "$CONSUME_ROUNDS"); do
	for who in "$L" "$F"; do
		role=follower
		[ "$who" = "$L" ] && role=leader
		"$BIN"/mqbench consume --client native -n "$NS" -t "$TOPIC" -g "fig_read_${r}_$who" --from first --pull-batch 32 \
			--read-addr "$(addr "$who")" --expect "$stored" -d 120s --warmup 0s -q --json >"$WORK/read.json" 2>"$WORK/read.err" || true
		fig "consume $stored stored msgs from the $role n$who, round $r: $(jr msgs_per_sec <"$WORK/read.json") msg/s ($(jr msgs <"$WORK/read.json") msgs, $(jr errors <"$WORK/read.json") errors)"
	done
done
[ "${STOP_AFTER:-}" = 3 ] && exit 0

# ---- 4. catch-up of a follower CATCHUP_MB behind
L=$(leader)
F=$(((L + 2) % 3))
stop_node "$F"
fb=$(cloff "$L")
# Written in parts until the follower is CATCHUP_MB behind (the record size measured at the peak
# is an estimate: sends that timed out there were stored but not counted).
sent=0 rate=""
for _ in 1 2 3 4 5; do
	L=$(leader)
	left=$((CATCHUP_MB * 1048576 - ($(cloff "$L") - fb)))
	[ "$left" -le 0 ] && break
	"$BIN"/mqbench produce --client native ${SER[@]+"${SER[@]}"} -n "$NS" -t "$TOPIC" --mode async -c "$PEAK_CONC" --producers 4 -s 1024 \
		--messages $((left / 1200 + 1000)) -d 0 --warmup 0s -q --json >"$WORK/fill.json" 2>"$WORK/fill.err" || true
	sent=$((sent + $(jr total_msgs <"$WORK/fill.json")))
	rate+="$(jr msgs_per_sec <"$WORK/fill.json") "
done
L=$(leader)
target=$(cloff "$L")
behind=$((target - fb))
fig "fill: $sent msgs at ${rate% } msg/s with n$F stopped: it is $((behind / 1048576)) MiB of commitlog behind"
t0=$(now_ns)
start_node "$F"
wait_port $((BP + 100 + 3 * F)) || true
# start: its commitlog's end when it first answers; first: when that end first moves.
start=-1 first="" last=0
for _ in $(seq 1200); do # up to 10 min
	o=$(cloff "$F")
	[ "$start" -lt 0 ] && [ "$o" -gt 0 ] && start=$o
	[ -z "$first" ] && [ "$start" -ge 0 ] && [ "$o" -gt "$start" ] && first=$(now_ns)
	[ "$o" -ge "$target" ] && { last=$(now_ns); break; }
	sleep 0.5
done
t_end=$((last > 0 ? last : $(now_ns)))
got=$(($(cloff "$F") - (start > 0 ? start : fb)))
fig "catch-up of n$F, $((behind / 1048576)) MiB behind: $(awk -v b="$got" -v t0="$t0" -v f="${first:-$t0}" -v e="$t_end" \
	'BEGIN {printf "%.0f MiB in %.1f s from exec = %.0f MB/s; %.1f s from its first progress = %.0f MB/s", b / 1048576, (e - t0) / 1e9, b / ((e - t0) / 1e3), (e - f) / 1e9, b / ((e - f) / 1e3)}')$([ "$last" = 0 ] && echo ' (NOT caught up within 10 min)')"
[ "${STOP_AFTER:-}" = 4 ] && exit 0

# ---- 5. restart to serving
for r in $(seq "$RESTARTS"); do
	L=$(leader)
	F=$(((L + 1) % 3))
	held=$(cloff "$F")
	stop_node "$F"
	t0=$(now_ns)
	start_node "$F"
	p=$("$BIN"/mqbench probe -a "$(addr "$F")" -t "$TOPIC" --op pull --since "$t0" --timeout 120s 2>&1 | tr -s " \n" " ")
	fig "restart of follower n$F holding $((held / 1048576)) MiB of commitlog, round $r: exec to first pull: $p"
	sleep 2
	for i in 0 1 2; do stop_node "$i"; done
	t0=$(now_ns)
	for i in 0 1 2; do start_node "$i"; done
	p=$("$BIN"/mqbench probe -a "$(addr 0);$(addr 1);$(addr 2)" -t "$TOPIC" --op send --since "$t0" --timeout 120s 2>&1 | tr -s " \n" " ")
	fig "restart of the whole group (each node >= $((held / 1048576)) MiB), round $r: exec to first SEND_OK: $p"
	sleep 2
done
du -sh "$WORK/store/n0" | sed 's/^/store of n0: /'
stop_all

# ---- 6. the proxy's overhead
if [ "${PROXY:-1}" = 1 ]; then
	echo "proxy overhead: scripts/proxybench.sh (ROUNDS=${PROXY_ROUNDS:-2} CONSUME=0), load $(load)"
	ROUNDS="${PROXY_ROUNDS:-2}" CONSUME=0 DUR="$DUR" WARMUP="$WARMUP" BASE_PORT=$((BP + 1000)) BIN="$BIN" scripts/proxybench.sh | sed 's/^==/FIG proxy/'
fi
