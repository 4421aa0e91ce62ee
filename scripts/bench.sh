#!/usr/bin/env bash
# Standard benchmark: one name server and one broker on loopback (data in a
# temporary directory), 1 KiB messages, the bench client on the same machine.
# For each flushDiskType, for a three-node DLedger (Raft) group on the same
# machine (DLEDGER) and for a one-node DLedger group (DLEDGER1, the R1 that the
# three-node figures are compared with): producers with 256 sends in flight (Raft groups also
# 1024 and 2048) through the
# project's native client (the broker's capacity) and through the official Go
# client (what applications see), then consumers reading everything back.
# Tunables: BENCH_DURATION (default 20s), BENCH_WARMUP (5s), BENCH_MODES.
# CPU cost per message and profiles of a DLedger group: scripts/cpubench.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${BENCH_DURATION:-20s}"
WARMUP="${BENCH_WARMUP:-5s}"
MODES="${BENCH_MODES:-ASYNC_FLUSH SYNC_FLUSH DLEDGER DLEDGER1}"
WORK="$(mktemp -d /tmp/rocketraft-bench.XXXXXX)"
NS_PORT="${BENCH_NAMESRV_PORT:-29876}"
BR_PORT="${BENCH_BROKER_PORT:-30911}"
NS="127.0.0.1:$NS_PORT"

# shellcheck source=scripts/procs.sh
. scripts/procs.sh # the script has cd'd to the repository root
trap 'stop_all; [ -n "${BENCH_KEEP:-}" ] || rm -rf "$WORK"' EXIT INT TERM

echo "machine: $(nproc) cores, $(uname -sr); messages 1024 B; duration $DURATION (warm-up $WARMUP)"
round=0
for mode in $MODES; do
	# Fresh ports each round: the previous round's sockets may linger.
	NS_PORT=$((${BENCH_NAMESRV_PORT:-29876} + round)); BR_PORT=$((${BENCH_BROKER_PORT:-30911} + 10 * round)); round=$((round + 1))
	NS="127.0.0.1:$NS_PORT"
	rm -rf "$WORK/store"
	./bin/mqnamesrv --listen "$NS" --kvConfigPath "$WORK/kv.json" >"$WORK/namesrv.log" 2>&1 &
	pids+=($!)
	if [ "$mode" = DLEDGER ] || [ "$mode" = DLEDGER1 ]; then
		# A three-node Raft group (ASYNC_FLUSH on each node; durability comes from the quorum's
		# fsynced Raft log), or a one-node group (DLEDGER1). Raft ports below the ephemeral range.
		RP=$((${BENCH_RAFT_PORT:-21911} + 10 * round))
		nodes="0 1 2"
		peers="n0-127.0.0.1:$RP;n1-127.0.0.1:$((RP + 1));n2-127.0.0.1:$((RP + 2))"
		if [ "$mode" = DLEDGER1 ]; then
			nodes="0"
			peers="n0-127.0.0.1:$RP"
		fi
		for i in $nodes; do
			./bin/mqbroker -n "$NS" --brokerName bench-broker --listenPort $((BR_PORT + 3 * i)) \
				--storePathRootDir "$WORK/store/n$i" --enableDLegerCommitLog=true --dLegerGroup bench-broker \
				--dLegerPeers "$peers" --dLegerSelfId "n$i" --logLevel warn >"$WORK/broker-$mode-n$i.log" 2>&1 &
			pids+=($!)
		done
	else
		./bin/mqbroker -n "$NS" --brokerName bench-broker --listenPort "$BR_PORT" \
			--storePathRootDir "$WORK/store" --flushDiskType "$mode" --logLevel warn >"$WORK/broker-$mode.log" 2>&1 &
		pids+=($!)
	fi
	wait_port "$NS_PORT"
	wait_port "$BR_PORT"
	# Wait until the route of TBW102 names a master (brokerId 0).
	for _ in $(seq 150); do ./bin/mqadmin topicRoute -n "$NS" -t TBW102 -o json 2>/dev/null | grep -q '"0"' && break; sleep 0.1; done
	run() { echo "== $mode: $1"; shift; ./bin/mqbench "$@" -n "$NS" -d "$DURATION" --warmup "$WARMUP" -q 2>&1 | grep -E '^(SUMMARY|  error)' || true; }
	echo
	run "produce, native client, async, 256 in flight" produce --client native -t BenchNative --mode async -c 256 -s 1024
	if [ "$mode" = DLEDGER ] || [ "$mode" = DLEDGER1 ]; then
		# A Raft group's entries fill with what is in flight; more in flight, larger entries,
		# less work per message (the target is stated for >= 256 in flight).
		run "produce, native client, async, 1024 in flight" produce --client native -t BenchNative1024 --mode async -c 1024 -s 1024
		# Where this machine tops out (entries of ~500 sends; latency is the price).
		run "produce, native client, async, 2048 in flight" produce --client native -t BenchNative2048 --mode async -c 2048 -s 1024
	fi
	run "produce, native client, sync, 256 senders" produce --client native -t BenchNativeSync --mode sync -c 256 -s 1024
	run "produce, official Go client, async, 256 in flight" produce -t BenchOfficial --mode async -c 256 -s 1024
	run "produce, official Go client, async batches of 16, 256 in flight" produce -t BenchOfficialBatch --mode async -c 256 -s 1024 --batch 16
	# Consumers stop once they have read everything stored, so the rate covers only reading.
	stored=$(./bin/mqadmin topicStatus -n "$NS" -t BenchNative -o json | grep -o '"maxOffset": *[0-9]*' | awk -F: '{s+=$2} END {print s+0}')
	run "consume $stored messages, native client" consume --client native -t BenchNative -g bench_native --from first --pull-batch 32 --expect "$stored"
	run "consume $stored messages, official Go pull consumer" consume -t BenchNative -g bench_official --type pull --from first --pull-batch 32 --expect "$stored"
	stop_all
done
