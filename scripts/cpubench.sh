#!/usr/bin/env bash
# CPU cost per message of a DLedger group: starts a name server and an R1 (one node) or R3 (three
# nodes) DLedger group on loopback, runs one mqbench produce (native client by default), and prints
# the CPU time (utime+stime from /proc) of every broker and of the client divided by the messages
# acknowledged, the brokers' system time, kernel threads and whole-machine CPU per message (the
# machine figure shows how much other work shared the CPUs), software event counts per message
# (page faults, context switches, syscalls: fsync, msync, nanosleep, futex, write, pwrite64) and
# the leader's batcher figures, and the bytes written to the stores' disk per message. CPU per
# message falls as throughput rises (fixed per-second costs such as the Go runtime's sysmon spread
# over more messages), so compare runs of similar msg/s.
#
# Usage: scripts/cpubench.sh [R1|R3] [extra mqbench produce flags...]
# Env:
#   DUR (20s), WARMUP (5s), MODE (async), CONC (256), PRODUCERS (4)
#   PROFILE=secs     pprof CPU profiles of every broker (httpPort), taken after the warm-up
#   PERF=secs        perf record -g of the brokers (kernel time included, which pprof under-counts
#                    on this VM); PERF_EVENT=sched:sched_switch records context switches instead
#   TRACE=1          brokers run with sendTraceEnable: after the run the script prints where a
#                    send's time went on the leader and where an AppendEntries' went on each
#                    follower (/debug/sendtrace, traces from the end of the warm-up on)
#   OUT (result dir, default a temp dir), BASE_PORT (23000), BIN (binaries, ./bin)
#   BROKER_FLAGS (extra broker flags), BROKER_ENV (environment for the brokers, e.g. GOGC=200),
#   BROKER_ENV_N0..N2 (environment for one node only), BROKER_FLAGS_N0..N2 (flags for one node
#   only, after BROKER_FLAGS), WAIT_LEADER=i (wait up to 30 s for node i
#   to lead before starting, e.g. with BROKER_FLAGS="--preferredLeaderId n0")
set -euo pipefail
cd "$(dirname "$0")/.."
GROUP="${1:-R3}"
shift || true
DUR="${DUR:-20s}"
WARMUP="${WARMUP:-5s}"
PROFILE="${PROFILE:-0}"
MODE="${MODE:-async}"
CONC="${CONC:-256}"
PRODUCERS="${PRODUCERS:-4}"
BP="${BASE_PORT:-23000}"
BIN="${BIN:-./bin}"
WORK="$(mktemp -d /tmp/rr-cpubench.XXXXXX)"
OUT="${OUT:-$WORK/out}"
mkdir -p "$OUT"
NS="127.0.0.1:$((BP + 876))"
nodes=3
[ "$GROUP" = R1 ] && nodes=1

# shellcheck source=scripts/procs.sh
. scripts/procs.sh # the script has cd'd to the repository root
trap 'stop_all; rm -rf "$WORK/store"' EXIT INT TERM

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sticks() { awk '{print $15}' "/proc/$1/stat"; }
# CPU ticks of kernel threads (writeback, journal, softirq): the disk and loopback work the
# processes cause but are not charged for (other work on the machine lands here too).
kticks() { local t=0 p; for p in /proc/[0-9]*; do [ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = 2 ] && t=$((t + $(awk '{print $14 + $15}' "$p/stat" 2>/dev/null || echo 0))); done; echo "$t"; }
# whole machine busy ticks (user+nice+system+irq+softirq)
mticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# bytes written to the disk holding the stores (/proc/diskstats: data, file-system journal and
# metadata of every process on it), or nothing when the stores are not on a block device
DISK="$(basename "$(readlink -f "$(df --output=source "$WORK" | tail -1)")")"
dbytes() { awk -v d="$DISK" '$3 == d {printf "%.0f\n", $10 * 512; f = 1} END {if (!f) print ""}' /proc/diskstats; }

"$BIN"/mqnamesrv --listen "$NS" --kvConfigPath "$WORK/kv.json" >"$WORK/namesrv.log" 2>&1 &
pids+=($!)
peers=""
for i in $(seq 0 $((nodes - 1))); do peers+="n$i-127.0.0.1:$((BP + 911 + i));"; done
bpids=()
for i in $(seq 0 $((nodes - 1))); do
	nodeenv="BROKER_ENV_N$i" # e.g. BROKER_ENV_N0=GOMAXPROCS=2 (with --preferredLeaderId=n0: the leader)
	nodeflags="BROKER_FLAGS_N$i"
	# shellcheck disable=SC2086
	env ${BROKER_ENV:-} ${!nodeenv:-} "$BIN"/mqbroker -n "$NS" --brokerName bench-broker --listenPort $((BP + 100 + 3 * i)) --httpPort $((BP + 200 + i)) --enablePprof=true \
		--storePathRootDir "$WORK/store/n$i" --enableDLegerCommitLog=true --dLegerGroup bench-broker \
		--dLegerPeers "$peers" --dLegerSelfId "n$i" --logLevel warn ${BROKER_FLAGS:-} ${!nodeflags:-} \
		$([ "${TRACE:-0}" != 0 ] && echo --sendTraceEnable=true) >"$OUT/broker-n$i.log" 2>&1 &
	pids+=($!)
	bpids+=($!)
done
wait_port $((BP + 876))
for i in $(seq 0 $((nodes - 1))); do wait_port $((BP + 100 + 3 * i)); done
for _ in $(seq 150); do "$BIN"/mqadmin topicRoute -n "$NS" -t TBW102 -o json 2>/dev/null | grep -q '"0"' && break; sleep 0.1; done
if [ -n "${WAIT_LEADER:-}" ]; then # e.g. with BROKER_FLAGS="--preferredLeaderId n0": wait for the transfer
	for _ in $(seq 300); do
		curl -s "http://127.0.0.1:$((BP + 200 + WAIT_LEADER))/status" | grep -q '"role":"SYNC_MASTER"' && break
		sleep 0.1
	done
fi
leader=-1
for i in $(seq 0 $((nodes - 1))); do
	curl -s "http://127.0.0.1:$((BP + 200 + i))/status" | grep -q '"role":"SYNC_MASTER"' && leader=$i
done
echo "group $GROUP, leader n$leader; mqbench produce --mode $MODE -c $CONC --producers $PRODUCERS -d $DUR --warmup $WARMUP $*"

declare -A before sbefore after safter
for i in "${!bpids[@]}"; do before[$i]=$(ticks "${bpids[$i]}"); sbefore[$i]=$(sticks "${bpids[$i]}"); done
k0=$(kticks)
m0=$(mticks)
d0=$(dbytes)
if [ "${TRACE:-0}" != 0 ]; then
	(
		sleep "${WARMUP%s}"
		for i in $(seq 0 $((nodes - 1))); do curl -s -o /dev/null "http://127.0.0.1:$((BP + 200 + i))/debug/sendtrace?reset=1"; done
	) &
fi
if [ "$PROFILE" != 0 ]; then
	(
		sleep "${WARMUP%s}"
		for i in $(seq 0 $((nodes - 1))); do
			curl -s -o "$OUT/cpu-n$i.pprof" "http://127.0.0.1:$((BP + 200 + i))/debug/pprof/profile?seconds=$PROFILE" &
		done
		wait
	) &
	profpid=$!
fi
# Software event counts of the brokers over the whole run (page faults and context switches
# are what costs most in the kernel on a VM), printed per message below.
perf stat -x, -e page-faults,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_fsync,syscalls:sys_enter_msync,syscalls:sys_enter_nanosleep,syscalls:sys_enter_futex,syscalls:sys_enter_write,syscalls:sys_enter_pwrite64 -o "$OUT/perfstat.csv" -p "$(IFS=,; echo "${bpids[*]}")" >/dev/null 2>&1 &
statpid=$!
if [ "${PERF:-0}" != 0 ]; then
	(
		sleep "${WARMUP%s}"
		perf record -q -e "${PERF_EVENT:-cpu-clock}" $([ -n "${PERF_EVENT:-}" ] && echo "-c 1" || echo "-F 499") -g -o "$OUT/perf.data" -p "$(IFS=,; echo "${bpids[*]}")" -- sleep "$PERF" >/dev/null 2>&1
	) &
fi
/usr/bin/time -f '%U %S' -o "$OUT/client.time" "$BIN"/mqbench produce --client native -n "$NS" -t BenchCPU --mode "$MODE" \
	-c "$CONC" --producers "$PRODUCERS" -s 1024 -d "$DUR" --warmup "$WARMUP" -q --json "$@" >"$OUT/summary.json" 2>"$OUT/mqbench.err" || true
for i in "${!bpids[@]}"; do after[$i]=$(ticks "${bpids[$i]}"); safter[$i]=$(sticks "${bpids[$i]}"); done
k1=$(kticks)
kill -INT "$statpid" 2>/dev/null || true
wait "$statpid" 2>/dev/null || true
m1=$(mticks)
d1=$(dbytes)
[ "$PROFILE" != 0 ] && wait "$profpid"
curl -s "http://127.0.0.1:$((BP + 200 + leader))/status" >"$OUT/leader-status.json" || true
total=$(grep -o '"total_msgs": *[0-9]*' "$OUT/summary.json" | cut -d: -f2 | tr -d " ")
hz=$(getconf CLK_TCK)
read -r cu cs <"$OUT/client.time"
client_us=$(awk -v u="$cu" -v s="$cs" 'BEGIN {print (u + s) * 1e6}')
line="msgs=$total"
sum=0
ssum=0
for i in "${!bpids[@]}"; do
	us=$(( (after[$i] - before[$i]) * 1000000 / hz ))
	sum=$((sum + us))
	ssum=$((ssum + (safter[$i] - sbefore[$i]) * 1000000 / hz))
	role=F
	[ "$i" = "$leader" ] && role=L
	line+=" n$i($role)=$(awk -v a="$us" -v n="$total" 'BEGIN {printf "%.1f", a / n}')"
done
line+=" brokers=$(awk -v a="$sum" -v n="$total" 'BEGIN {printf "%.1f", a / n}')"
line+=" client=$(awk -v a="$client_us" -v n="$total" 'BEGIN {printf "%.1f", a / n}')"
line+=" all=$(awk -v a="$sum" -v c="$client_us" -v n="$total" 'BEGIN {printf "%.1f", (a + c) / n}') us/msg"
echo "CPU $line"
echo "CPU detail: brokers sys=$(awk -v a="$ssum" -v n="$total" 'BEGIN {printf "%.1f", a / n}') client user=$(awk -v a="$cu" -v n="$total" 'BEGIN {printf "%.1f", a * 1e6 / n}') sys=$(awk -v a="$cs" -v n="$total" 'BEGIN {printf "%.1f", a * 1e6 / n}') kernel-threads=$(awk -v a="$((k1 - k0))" -v h="$hz" -v n="$total" 'BEGIN {printf "%.1f", a * 1e6 / h / n}') machine=$(awk -v a="$((m1 - m0))" -v h="$hz" -v n="$total" 'BEGIN {printf "%.1f", a * 1e6 / h / n}') us/msg"
grep -o '"msgs_per_sec": *[0-9.]*\|"p50_ms": *[0-9.]*\|"p99_ms": *[0-9.]*\|"total_errors": *[0-9]*' "$OUT/summary.json" | tr '\n' ' '
echo
if [ -n "$d0" ] && [ -n "$d1" ]; then
	echo "disk: $(awk -v a="$((d1 - d0))" -v n="$total" 'BEGIN {printf "%.0f", a / n}') bytes written to $DISK per message (every process on it, journal included)"
fi
grep -o '"batcher":{[^}]*}' "$OUT/leader-status.json" || true
awk -F, -v n="$total" '$1 ~ /^[0-9]/ {e = $3; sub(/.*sys_enter_?/, "", e); if (e == "") e = "syscalls"; printf "%s=%.3f ", e, $1 / n} END {print "/msg (brokers)"}' "$OUT/perfstat.csv" || true
if [ "${TRACE:-0}" != 0 ]; then
	for i in $(seq 0 $((nodes - 1))); do
		curl -s "http://127.0.0.1:$((BP + 200 + i))/debug/sendtrace?format=text" | tee "$OUT/sendtrace-n$i.txt" |
			awk -v leader=$([ "$i" = "$leader" ] && echo 1 || echo 0) '/^sends led/ {show = leader} /^AppendEntries/ {show = !leader} show'
	done
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT"
