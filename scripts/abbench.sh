#!/usr/bin/env bash
# Two builds alternated: A, B, A, B, ... under the same load, so a noisy machine (neighbours, a
# host changing speed within minutes) weighs on both alike. Builds each revision (git rev-parse
# names: a commit, a tag, HEAD; "." is the working tree) into a temporary directory, then runs
# scripts/cpubench.sh R3 for each load ROUNDS times, A then B, and prints one line per run: msg/s,
# p99, the CPU per message of the leader, each follower and the client, and the bytes written to
# the disk per message (all three nodes, journal included). Every run is printed, not the best one.
#
# Usage: scripts/abbench.sh REV_A REV_B
# Env:
#   ROUNDS (2), DUR (15s), LOADS ("async:2048:4 async:256:4 sync:1:1": mode:in flight:producers)
#   BROKER_FLAGS (default: the commitlog log store with the leader pinned on n0)
#   BIN_A, BIN_B: use these binary directories instead of building REV_A / REV_B
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 REV_A REV_B" >&2; exit 2; }
ROUNDS="${ROUNDS:-2}"
DUR="${DUR:-15s}"
LOADS="${LOADS:-async:2048:4 async:256:4 sync:1:1}"
FLAGS="${BROKER_FLAGS:---dLegerLogStore=commitlog --preferredLeaderId n0}"
WORK="$(mktemp -d /tmp/rr-abbench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT INT TERM

# build REV DIR: the binaries of REV in DIR/bin
build() {
	local rev=$1 dir=$2
	mkdir -p "$dir/src"
	if [ "$rev" = . ]; then
		git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$dir/src"
	else
		git archive "$(git rev-parse --verify "$rev^{commit}")" | tar -xf - -C "$dir/src"
	fi
	(cd "$dir/src" && go build -trimpath -o "$dir/bin/" ./cmd/mqnamesrv ./cmd/mqbroker ./cmd/mqadmin ./cmd/mqbench)
}

A="${BIN_A:-}"
B="${BIN_B:-}"
if [ -z "$A" ]; then build "$1" "$WORK/a" && A="$WORK/a/bin"; fi
if [ -z "$B" ]; then build "$2" "$WORK/b" && B="$WORK/b/bin"; fi
echo "A = $1 ($A), B = $2 ($B); broker flags: $FLAGS; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	for load in $LOADS; do
		IFS=: read -r mode conc producers <<<"$load"
		for side in A B; do
			bin=$A
			[ "$side" = B ] && bin=$B
			out=$(BIN="$bin" MODE="$mode" CONC="$conc" PRODUCERS="$producers" DUR="$DUR" WAIT_LEADER=0 \
				BROKER_FLAGS="$FLAGS" scripts/cpubench.sh R3 2>&1) || { echo "$out" | tail -20 >&2; exit 1; }
			rate=$(grep -o '"msgs_per_sec":[0-9]*' <<<"$out" | cut -d: -f2)
			p99=$(grep -o '"p99_ms":[0-9.]*' <<<"$out" | cut -d: -f2)
			cpu=$(grep '^CPU msgs' <<<"$out" | sed 's/^CPU msgs=[0-9]* //; s/ brokers=.*client=/ client=/; s/ all=.*//')
			disk=$(grep -o '^disk: [0-9]*' <<<"$out" | cut -d' ' -f2)
			printf '%s round %d  %-6s %5s in flight  %s  %6s msg/s  p99 %7s ms  us/msg: %s  disk %s B/msg\n' \
				"$(date -u +%H:%M:%S)" "$r" "$mode" "$conc" "$side" "$rate" "$p99" "$cpu" "${disk:--}"
		done
	done
done
