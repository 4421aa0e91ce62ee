#!/usr/bin/env bash
# A peer in the benchmark: NATS JetStream against this broker on the same machine in the same run,
# alternated A (NATS), B (ours), A, B, ... so that whatever else loads the machine falls on both.
#
# NATS: nats-server and the nats CLI (natscli) at pinned versions, built from the Go module proxy
# with `go install` into PEER_BIN (once; later runs reuse them); a three-node JetStream cluster on
# loopback, file storage with `sync_interval: always` (every write fsynced before the ack), one R3
# stream per run (created by nats bench, deleted after it), 1 KiB messages, published by
# `nats bench js pub async` with NATS_CLIENTS clients each keeping --batch acks outstanding
# (clients x batch = in flight), and a lone `nats bench js pub sync` client.
# Ours: scripts/cpubench.sh R3 (a fresh three-node DLedger group per run, the native client,
# MODE=async, CONC in flight over 4 producers; the ack after the quorum's fsync), and a lone sync
# sender (MODE=sync CONC=1 PRODUCERS=1).
# Every run prints one line (msg/s, latency where the tool gives it, load average) and each round
# the ratio ours / NATS; the NATS line also has the bytes its three servers wrote per message
# (write_bytes of /proc/PID/io, summed over the nodes, divided by the messages). Both lines have
# the CPU time per message of the three servers and of the bench client (NATS: the servers' ticks
# over the run, the nats CLI's user+system time; ours: scripts/cpubench.sh's figures), since the
# servers and the client share the machine's cores.
#
# Usage: scripts/peerbench.sh            (make bench-peer; make bench PEER=nats runs it after bench.sh)
# Env: ROUNDS (2), INFLIGHT ("256 2048"), DUR (20s, ours), WARMUP (5s, ours), NATS_RATE_GUESS
#      (8000: msg/s used to size the first NATS run at each in-flight count to about DUR: its bench stops
#      after a message count; later runs use the previous run's rate),
#      NATS_CLIENTS (4), SYNC_MSGS (5000, the lone sync runs of NATS; ours runs DUR), SYNC (1: the
#      lone sync producer runs), PEER_BIN (bin/peer), NATS_SERVER_VERSION (v2.15.2),
#      NATS_CLI_VERSION (v0.5.1), BASE_PORT (25400: NATS ports; ours BASE_PORT+1000), KEEP=1,
#      STORES (commitlog, the store make run and the deploy files ship; "wal commitlog": ours once
#      per Raft log store after each NATS run, alternated; "default": the broker's empty default,
#      or whatever BROKER_FLAGS selects), HEADERS (json: the request header encoding of our client, mqbench
#      --serialize; "json rocketmq" runs ours once with each, alternated, after each NATS run: JSON
#      is what every client sends by default and the Go client's only encoding, the ROCKETMQ
#      binary header a Java client's option)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-2}"
INFLIGHT="${INFLIGHT:-256 2048}"
DUR="${DUR:-20s}"
WARMUP="${WARMUP:-5s}"
RATE_GUESS="${NATS_RATE_GUESS:-8000}"
CLIENTS="${NATS_CLIENTS:-4}"
SYNC_MSGS="${SYNC_MSGS:-5000}"
SYNC="${SYNC:-1}"
HEADERS="${HEADERS:-json}"
PEER_BIN="${PEER_BIN:-$PWD/bin/peer}"
NATS_SERVER_VERSION="${NATS_SERVER_VERSION:-v2.15.2}"
NATS_CLI_VERSION="${NATS_CLI_VERSION:-v0.5.1}"
BP="${BASE_PORT:-25400}"
GO="${GO:-go}"
WORK="$(mktemp -d /tmp/rr-peerbench.XXXXXX)"

# shellcheck source=scripts/procs.sh
. scripts/procs.sh # the script has cd'd to the repository root
trap 'stop_all; [ -n "${KEEP:-}" ] && echo "kept $WORK" || rm -rf "$WORK"' EXIT INT TERM

# install BINARY MODULE/PATH VERSION: go install into PEER_BIN/VERSION unless already there.
install() {
	local dir="$PEER_BIN/$3"
	if [ ! -x "$dir/$1" ]; then
		echo "building $2@$3 into $dir"
		mkdir -p "$dir"
		GOBIN="$dir" GOFLAGS= "$GO" install "$2@$3"
	fi
}
install nats-server github.com/nats-io/nats-server/v2 "$NATS_SERVER_VERSION"
install nats github.com/nats-io/natscli/nats "$NATS_CLI_VERSION"
SERVER="$PEER_BIN/$NATS_SERVER_VERSION/nats-server"
NATS="$PEER_BIN/$NATS_CLI_VERSION/nats"
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "machine: $(nproc) cores, $(uname -sr), load $(load); $(date -u +%FT%TZ)"
echo "$("$SERVER" --version), nats CLI $("$NATS" --version 2>&1 | head -1); 1 KiB messages, R3, in flight: $INFLIGHT; $ROUNDS rounds A (NATS) / B (ours)"

# The NATS cluster: client ports BP+0..2, routes BP+10..12, monitoring BP+20..22.
routes=""
for i in 0 1 2; do routes+="nats-route://127.0.0.1:$((BP + 10 + i)),"; done
npids=()
for i in 0 1 2; do
	cat >"$WORK/p$i.conf" <<EOF
server_name: p$i
listen: 127.0.0.1:$((BP + i))
http: 127.0.0.1:$((BP + 20 + i))
jetstream {
  store_dir: "$WORK/store/p$i"
  sync_interval: always
}
cluster {
  name: peerbench
  listen: 127.0.0.1:$((BP + 10 + i))
  routes: [${routes%,}]
}
EOF
	"$SERVER" -c "$WORK/p$i.conf" >"$WORK/p$i.log" 2>&1 &
	pids+=($!)
	npids+=($!)
done
for i in 0 1 2; do wait_port $((BP + i)); done
URL="nats://127.0.0.1:$BP,nats://127.0.0.1:$((BP + 1)),nats://127.0.0.1:$((BP + 2))"
# JetStream is ready once the cluster has a meta leader.
for _ in $(seq 300); do
	curl -s "http://127.0.0.1:$((BP + 20))/jsz" | grep -q '"leader": *"p' && break
	sleep 0.1
done

wbytes() { local t=0 p; for p in "${npids[@]}"; do t=$((t + $(awk '/^write_bytes/{print $2}' "/proc/$p/io"))); done; echo "$t"; }
# CPU ticks (utime+stime) of the three NATS servers.
sticks() { local t=0 p; for p in "${npids[@]}"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
HZ=$(getconf CLK_TCK)
seq_no=0
# nats_run NAME ARGS...: one nats bench js pub run on a fresh R3 file stream; prints its line and
# leaves msg/s in $rate.
nats_run() {
	local name=$1 w0 w1 t0 t1 n out lat cpu
	shift
	seq_no=$((seq_no + 1))
	local stream="peerbench$seq_no" l
	l=$(load)
	w0=$(wbytes)
	t0=$(sticks)
	out=$(/usr/bin/time -f "client-cpu %U %S" -o "$WORK/client.time" "$NATS" -s "$URL" bench js pub "$@" "peer.$seq_no" --stream "$stream" --create --replicas 3 --storage file --maxbytes 8GB \
		--size 1024 --no-progress 2>&1) || { echo "== $name: nats bench failed"; echo "$out" | tail -5; rate=0; return 0; }
	w1=$(wbytes)
	t1=$(sticks)
	echo "$out" >"$WORK/$name.out"
	# The aggregated line of several clients, or the only client's: "... stats: 14,952 msgs/sec ~ ...".
	rate=$(echo "$out" | grep -oE 'stats: [0-9,]+ msgs/sec' | tail -1 | grep -oE '[0-9,]+' | tr -d ,)
	n=$(echo "$out" | grep -m1 -oE 'msgs=[0-9,]+' | grep -oE '[0-9,]+' | tr -d ,)
	# Latency per publish (to its ack), the last P50/P99 printed (the aggregate's), in ms.
	lat=$(echo "$out" | grep -oE 'P(50|99):? [0-9,.]+us' | tail -2 | tr -d ,: | awk '{printf "%s_ms:%.3f ", tolower($1), $2 / 1000}')
	"$NATS" -s "$URL" stream rm -f "$stream" >/dev/null 2>&1 || true
	# CPU per message: the servers' ticks over the run (stream creation included) and the bench
	# client's user+system time, in microseconds.
	cpu=$(awk -v t=$((t1 - t0)) -v hz="$HZ" -v n="${n:-0}" '/^client-cpu/ {c = $2 + $3}
		END {if (n > 0) printf "servers=%.1f client=%.1f", t / hz * 1e6 / n, c * 1e6 / n}' "$WORK/client.time")
	printf "== %-40s %8s msg/s  [%s]  disk %s B/msg (3 nodes)  CPU us/msg %s  load %s\n" "$name" "${rate:-?}" "$lat" \
		"$(awk -v w=$((w1 - w0)) -v n="${n:-0}" 'BEGIN {printf "%.0f", (n > 0 ? w / n : 0)}')" "${cpu:-?}" "$l"
	[ -n "$rate" ] || { echo "$out" | tail -5; rate=0; }
}

# ours_run NAME HEADERS ENV...: one scripts/cpubench.sh R3 run with the client's request headers
# in HEADERS (json or rocketmq); prints its line and leaves msg/s in $rate.
ours_run() {
	local name=$1 hdr=$2 l out
	shift 2
	l=$(load)
	local ser=()
	[ "$hdr" = json ] || ser=(--serialize "$hdr")
	out=$(env "$@" DUR="$DUR" WARMUP="$WARMUP" BASE_PORT=$((BP + 1000)) scripts/cpubench.sh R3 ${ser[@]+"${ser[@]}"} 2>&1) || true
	echo "$out" >"$WORK/$name.out"
	rate=$(echo "$out" | grep -oE '"msgs_per_sec": *[0-9.]+' | grep -oE '[0-9.]+$' | cut -d. -f1)
	printf "== %-40s %8s msg/s  [%s]  CPU us/msg %s  load %s\n" "$name" "${rate:-?}" \
		"$(echo "$out" | grep -oE '"p(50|99)_ms": *[0-9.]+|"total_errors": *[0-9]+' | tr -d '"' | tr '\n' ' ')" \
		"$(echo "$out" | grep -oE 'brokers=[0-9.]+ client=[0-9.]+' | sed 's/brokers/servers/')" "$l"
	[ -n "$rate" ] || { echo "$out" | tail -5; rate=0; }
}

# variants: each store of STORES with each header encoding of HEADERS, as "store/headers".
variants() {
	local st h
	for st in ${STORES:-commitlog}; do for h in $HEADERS; do echo "$st/$h"; done; done
}
# variant_label STORE/HEADERS: how a run of ours is named ("" for the default store, JSON headers).
variant_label() {
	local st=${1%/*} h=${1#*/} lbl=""
	[ "$st" = default ] || lbl=" $st"
	[ "$h" = json ] || lbl+=" $h-headers"
	echo "$lbl"
}
# store_flags STORE: the broker flags that run ours on Raft log store STORE ("default": as is).
store_flags() { if [ "$1" = default ]; then echo "${BROKER_FLAGS:-}"; else echo "${BROKER_FLAGS:-} --dLegerLogStore $1"; fi; }
ratio() { awk -v b="$2" -v a="$1" 'BEGIN {if (a > 0) printf "%.2fx", b / a; else print "n/a"}'; }
secs=${DUR%s}
summary=()
declare -A guess
for r in $(seq "$ROUNDS"); do
	for c in $INFLIGHT; do
		# nats bench stops after a message count: sized from this in-flight's previous NATS run.
		nats_run "A$r NATS async, $c in flight" async --clients "$CLIENTS" --batch $((c / CLIENTS)) --msgs $((${guess[$c]:-$RATE_GUESS} * secs))
		a=$rate
		[ "${rate:-0}" -gt 0 ] && guess[$c]=$rate
		for v in $(variants); do
			lbl=$(variant_label "$v")
			ours_run "B$r ours$lbl async, $c in flight" "${v#*/}" MODE=async CONC="$c" PRODUCERS=4 "BROKER_FLAGS=$(store_flags "${v%/*}")"
			summary+=("round $r, $c in flight: NATS $a, ours$lbl $rate msg/s: $(ratio "$a" "$rate")")
			echo "   ratio ours$lbl/NATS: $(ratio "$a" "$rate")"
		done
	done
	if [ "$SYNC" = 1 ]; then
		nats_run "A$r NATS lone sync producer" sync --clients 1 --msgs "$SYNC_MSGS"
		a=$rate
		for v in $(variants); do
			lbl=$(variant_label "$v")
			ours_run "B$r ours$lbl lone sync producer" "${v#*/}" MODE=sync CONC=1 PRODUCERS=1 "BROKER_FLAGS=$(store_flags "${v%/*}")"
			summary+=("round $r, lone sync producer: NATS $a, ours$lbl $rate msg/s: $(ratio "$a" "$rate")")
			echo "   ratio ours$lbl/NATS: $(ratio "$a" "$rate")"
		done
	fi
done
echo
echo "==== peer figures ($(date -u +%FT%TZ), load $(load)) ===="
printf '%s\n' "${summary[@]}"
