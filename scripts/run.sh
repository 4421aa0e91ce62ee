#!/usr/bin/env bash
# Starts a local name server, one three-node DLedger (Raft) broker group and a proxy (mqproxy) on
# loopback, broker-a with nodes n0/n1/n2 from config/dledger/broker-n{0,1,2}.properties (data
# under ./data/broker-a-nX, logs under ./data/logs); waits until the group has a master, prints
# where everything is, and supervises: a process that exits is reported with the command that
# restarts it, and Ctrl-C stops every process it started, by PID, and exits 0.
#
#   scripts/run.sh                  start and supervise (make run)
#   scripts/run.sh restart <name>   from another terminal: start <name> (n0, n1, n2, namesrv or
#                                   proxy) again after it died or was killed, under the running
#                                   script, so that its Ctrl-C stops it too
#
# The running script keeps its state under $DATA/run: supervisor.pid, <name>.pid and <name>.cmd
# (the command line). `restart` drops a request file there and waits for the script to act on it.
#
# Ports (env): NAMESRV_PORT (9876); BROKER_PORT (10911: the nodes listen on BROKER_PORT,
# BROKER_PORT+10, BROKER_PORT+20, each also using the next port for HA); RAFT_PORT (20911: the
# Raft transports on RAFT_PORT, +1, +2; RocketMQ's examples use 40911, but that lies in Linux's
# ephemeral port range (32768-60999), where a node's own outgoing connection to a peer that is not
# up yet can take the port the next node is about to listen on); PROXY_PORT (8081, the proxy's gRPC
# port); PROXY_REMOTING_PORT (8080, the proxy's port for RocketMQ 4.x clients, the address to give
# clients); HTTP_PORT (18080: the status pages and /metrics, on 127.0.0.1 only: the name server on
# HTTP_PORT, n0/n1/n2 on HTTP_PORT+1..+3, the proxy's /metrics on HTTP_PORT+4). DATA (./data)
# moves the data, logs and state.
set -euo pipefail
cd "$(dirname "$0")/.."
NAMESRV_PORT="${NAMESRV_PORT:-9876}"
BROKER_PORT="${BROKER_PORT:-10911}"
RAFT_PORT="${RAFT_PORT:-20911}"
PROXY_PORT="${PROXY_PORT:-8081}"
PROXY_REMOTING_PORT="${PROXY_REMOTING_PORT:-8080}"
HTTP_PORT="${HTTP_PORT:-18080}"
DATA="${DATA:-$PWD/data}"
RUN="$DATA/run"
NS="127.0.0.1:${NAMESRV_PORT}"
CLIENTS="127.0.0.1:${PROXY_REMOTING_PORT}"
NODES=(n0 n1 n2)
PEERS="n0-127.0.0.1:${RAFT_PORT};n1-127.0.0.1:$((RAFT_PORT + 1));n2-127.0.0.1:$((RAFT_PORT + 2))"

# alive tells whether PID $1 runs (a zombie, killed but not yet reaped, does not).
alive() {
	local st
	st="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	st="${st##*) }"
	[ "${st:0:1}" != Z ]
}

# restart_cmd is the command, runnable from this directory, that restarts $1.
restart_cmd() {
	printf 'DATA=%q scripts/run.sh restart %s' "$DATA" "$1"
}

if [ "${1:-}" = restart ]; then
	name="${2:-}"
	if [ -z "$name" ] || [ $# -ne 2 ]; then
		echo "usage: scripts/run.sh restart <n0|n1|n2|namesrv|proxy>" >&2
		exit 2
	fi
	sup="$(cat "$RUN/supervisor.pid" 2>/dev/null || true)"
	if [ -z "$sup" ] || ! alive "$sup"; then
		echo "no scripts/run.sh is running with DATA=$DATA; start everything with: make run" >&2
		exit 1
	fi
	if [ ! -f "$RUN/$name.cmd" ]; then
		echo "unknown process \"$name\"; known: $(cd "$RUN" && ls -- *.cmd | sed 's/\.cmd$//' | tr '\n' ' ')" >&2
		exit 2
	fi
	old="$(cat "$RUN/$name.pid" 2>/dev/null || true)"
	if [ -n "$old" ] && alive "$old"; then
		echo "$name is running (pid $old); stop it first (kill $old)" >&2
		exit 1
	fi
	rm -f "$RUN/$name.result"
	: >"$RUN/restart-$name.req"
	for _ in $(seq 100); do
		[ -e "$RUN/$name.result" ] && break
		sleep 0.1
	done
	if [ ! -e "$RUN/$name.result" ]; then
		rm -f "$RUN/restart-$name.req"
		echo "the running scripts/run.sh (pid $sup) did not act on the request within 10 s" >&2
		exit 1
	fi
	cat "$RUN/$name.result"
	grep -q '^restarted ' "$RUN/$name.result"
	exit
fi
if [ $# -gt 0 ]; then
	echo "usage: scripts/run.sh [restart <n0|n1|n2|namesrv|proxy>]" >&2
	exit 2
fi

mkdir -p "$DATA/logs" "$RUN"
old="$(cat "$RUN/supervisor.pid" 2>/dev/null || true)"
if [ -n "$old" ] && [ "$old" != $$ ] && alive "$old"; then
	echo "scripts/run.sh (pid $old) is already running with DATA=$DATA; stop it first (Ctrl-C in its terminal)" >&2
	exit 1
fi
rm -f "$RUN"/*.pid "$RUN"/*.cmd "$RUN"/*.req "$RUN"/*.result
echo $$ >"$RUN/supervisor.pid"

declare -A PID CMD LOG REPORTED
ORDER=() # start order; stopped in reverse

# launch starts process $1 (its log $2) from the command line in CMD[$1], in a session of its own
# (setsid), so that a Ctrl-C reaches only this script, which then stops everything in order.
launch() {
	local name="$1" log="${LOG[$1]}"
	# The whole line, "&" included, goes through eval, so that $! is the daemon's own PID.
	eval "setsid ${CMD[$name]} >>\"\$log\" 2>&1 &"
	PID[$name]=$!
	REPORTED[$name]=""
	echo "${PID[$name]}" >"$RUN/$name.pid"
}

# start registers and launches process $1 with log $2 and the command line that follows.
start() {
	local name="$1" log="$2"
	shift 2
	CMD[$name]="$(printf '%q ' "$@")"
	LOG[$name]="$log"
	ORDER+=("$name")
	printf '%s\n' "${CMD[$name]}" >"$RUN/$name.cmd"
	: >"$log"
	launch "$name"
}

cleanup() {
	trap - INT TERM EXIT
	echo
	echo "stopping (proxy, brokers, each leader handing leadership over, then the name server)..."
	for ((i = ${#ORDER[@]} - 1; i >= 0; i--)); do
		name="${ORDER[$i]}"
		p="${PID[$name]}"
		kill -TERM "$p" 2>/dev/null || true
		# A broker that led drains stale-route sends for up to 35 s (shutdownDrainMaxMillis).
		for _ in $(seq 400); do alive "$p" || break; sleep 0.1; done
		if alive "$p"; then
			echo "$name (pid $p) did not stop within 40 s; killing it" >&2
			kill -KILL "$p" 2>/dev/null || true
		fi
		wait "$p" 2>/dev/null || true
	done
	rm -f "$RUN/supervisor.pid"
	echo "stopped."
}
trap 'cleanup; exit 0' INT TERM
trap 'cleanup' EXIT
# A shell started in the background without job control ignores SIGINT, and a signal ignored on
# entry cannot be trapped: say so, and how to stop everything instead.
if [ -r "/proc/$$/status" ] && (( 16#$(awk '/^SigIgn:/ {print $2}' "/proc/$$/status") & 2 )); then
	echo "note: this shell ignores SIGINT (started in the background?), so Ctrl-C cannot stop it; use: kill $$" >&2
fi

start namesrv "$DATA/logs/namesrv.log" ./bin/mqnamesrv --listen "$NS" --kvConfigPath "$DATA/namesrv/kvConfig.json" \
	--httpPort "$HTTP_PORT"
for _ in $(seq 100); do
	if (echo >"/dev/tcp/127.0.0.1/$NAMESRV_PORT") 2>/dev/null; then break; fi
	sleep 0.1
done

declare -A ADDR HTTP
for i in 0 1 2; do
	n="${NODES[$i]}"
	port=$((BROKER_PORT + 10 * i))
	ADDR[$n]="127.0.0.1:$port"
	HTTP[$n]="http://127.0.0.1:$((HTTP_PORT + 1 + i))/"
	# The shipped file as is; flags override only what the environment may move, and the Raft log
	# store of a data directory an earlier version created on raft-wal (the files set commitlog now;
	# a node refuses to open another store than its directory holds).
	store=()
	if [ -d "$DATA/broker-a-$n/dledger-$n/raft/raft-wal" ]; then
		store=(--dLegerLogStore wal)
		[ "$i" = 0 ] && echo "note: $DATA holds a group created on raft-wal: it keeps that Raft log store (remove $DATA to start over on the commitlog store)"
	fi
	start "$n" "$DATA/logs/broker-a-$n.log" ./bin/mqbroker -c "config/dledger/broker-$n.properties" -n "$NS" \
		--listenPort "$port" --dLegerPeers "$PEERS" --httpPort "$((HTTP_PORT + 1 + i))" \
		--storePathRootDir "$DATA/broker-a-$n" ${store[@]+"${store[@]}"}
done

echo "waiting for broker-a to elect a leader and register it as master (brokerId 0)..."
master=""
for _ in $(seq 300); do
	for name in "${ORDER[@]}"; do
		if ! alive "${PID[$name]}"; then
			echo "$name exited early; see ${LOG[$name]}" >&2
			exit 1
		fi
	done
	route="$(./bin/mqadmin topicRoute -n "$NS" -t TBW102 -o json 2>/dev/null || true)"
	# The master is the address registered under brokerId 0.
	master="$(printf '%s' "$route" | tr -d ' \n' | grep -o '"0":"[^"]*"' | head -1 | cut -d'"' -f4 || true)"
	[ -n "$master" ] && break
	sleep 0.1
done
if [ -z "$master" ]; then
	echo "no master registered within 30 s; see $DATA/logs/" >&2
	# The usual cause: $DATA holds a group bootstrapped with other peer addresses.
	if grep -h "dLegerPeers differs" "$DATA"/logs/broker-a-n*.log 2>/dev/null | head -1 | grep . >&2; then
		echo "$DATA holds a group bootstrapped with other addresses: remove it (rm -rf $DATA) to start afresh" >&2
	fi
	exit 1
fi

start proxy "$DATA/logs/proxy.log" ./bin/mqproxy -n "$NS" --grpcServerPort "$PROXY_PORT" \
	--remotingListenPort "$PROXY_REMOTING_PORT" --listenHost 127.0.0.1 \
	--metricsExporterType PROM --metricsPromExporterHost 127.0.0.1 --metricsPromExporterPort "$((HTTP_PORT + 4))"
for _ in $(seq 100); do
	if (echo >"/dev/tcp/127.0.0.1/$PROXY_REMOTING_PORT") 2>/dev/null; then break; fi
	sleep 0.1
done

leader=""
echo
echo "clients     : $CLIENTS   give this address to RocketMQ 4.x clients as their name server (the proxy:"
echo "              a failover pauses their sends for a fraction of a second, they never see a dead broker)"
echo "proxy       : 127.0.0.1:$PROXY_PORT    RocketMQ 5 gRPC clients' endpoint (TLS or plaintext)  pid ${PID[proxy]}  log: $DATA/logs/proxy.log"
echo "name server : $NS   pid ${PID[namesrv]}  log: $DATA/logs/namesrv.log"
echo "broker-a    : three-node DLedger group, Raft peers $PEERS"
for n in "${NODES[@]}"; do
	role="follower (SLAVE)"
	if [ "${ADDR[$n]}" = "$master" ]; then
		role="LEADER (master, brokerId 0)"
		leader="$n"
	fi
	printf '  %s  %-16s %-28s pid %-8s data: %s  log: %s\n' "$n" "${ADDR[$n]}" "$role" "${PID[$n]}" "$DATA/broker-a-$n" "${LOG[$n]}"
done
[ -n "$leader" ] || leader=n0 # the master registered an address not listed (cannot happen with these files)
echo "status pages (127.0.0.1 only):"
echo "  name server  http://127.0.0.1:$HTTP_PORT/   (the whole cluster)"
for n in "${NODES[@]}"; do
	echo "  $n           ${HTTP[$n]}"
done
echo "  proxy        http://127.0.0.1:$((HTTP_PORT + 4))/metrics"
cat <<MSG

Try it (in another terminal), through the proxy:
  ./bin/mqbench produce -n $CLIENTS -t TopicTest -c 8 -d 60s
  kill -9 ${PID[$leader]}      # the leader, $leader: a follower takes over, the producer pauses well under a second
  $(restart_cmd "$leader")      # brings $leader back, under this script
  ./bin/mqadmin raftStatus -n $NS           # roles, terms, commit and applied indexes
  ./bin/mqbench consume -n $CLIENTS -t TopicTest -g demo --from first -d 20s
Applications: NAMESRV_ADDR=$CLIENTS (Go: producer.WithNameServer([]string{"$CLIENTS"})); RocketMQ 5
clients: endpoint 127.0.0.1:$PROXY_PORT. Connecting to the name server $NS directly works too, but
then a client keeps sending to a dead master until it refreshes its route (30 s in the official
clients) unless it re-fetches the route on "connection refused" as mqbench does.
A process that exits is reported here with the command that restarts it.
Press Ctrl-C to stop everything (or, from elsewhere: kill $$).
MSG

# Supervise: act on restart requests, report processes that exit.
while :; do
	for name in "${ORDER[@]}"; do
		p="${PID[$name]}"
		if [ -e "$RUN/restart-$name.req" ]; then
			rm -f "$RUN/restart-$name.req"
			if alive "$p"; then
				echo "$name is running (pid $p); stop it first (kill $p)" >"$RUN/$name.result"
			else
				wait "$p" 2>/dev/null || true
				launch "$name"
				echo "restarted $name: pid ${PID[$name]} (log: ${LOG[$name]})" | tee "$RUN/$name.result"
			fi
			continue
		fi
		if [ -z "${REPORTED[$name]}" ] && ! alive "$p"; then
			REPORTED[$name]=1
			rc=0
			wait "$p" 2>/dev/null || rc=$?
			how="exited with status $rc"
			[ "$rc" -gt 128 ] && how="was killed by signal $((rc - 128))"
			echo "$name (pid $p) $how; restart it with: $(restart_cmd "$name")"
		fi
	done
	sleep 0.2
done
