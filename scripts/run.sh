#!/usr/bin/env bash
# Starts a local name server, one three-node DLedger (Raft) broker group and a proxy for RocketMQ 5
# gRPC clients (mqproxy), broker-a with
# nodes n0/n1/n2 on loopback, from config/dledger/broker-n{0,1,2}.properties (data under
# ./data/broker-a-nX, logs under ./data/logs); waits until the group has a master and prints
# where everything is. Ctrl-C stops every process it started, by PID.
#
# Ports (env): NAMESRV_PORT (9876); BROKER_PORT (10911: the nodes listen on BROKER_PORT,
# BROKER_PORT+10, BROKER_PORT+20, each also using the next port for HA); RAFT_PORT (20911: the
# Raft transports on RAFT_PORT, +1, +2; RocketMQ's examples use 40911, but that lies in Linux's
# ephemeral port range (32768-60999), where a node's own outgoing connection to a peer that is not
# up yet can take the port the next node is about to listen on); PROXY_PORT (8081, the proxy's gRPC
# port); PROXY_REMOTING_PORT (8080, the proxy's port for RocketMQ 4.x clients). DATA (./data)
# moves the data and logs.
set -euo pipefail
cd "$(dirname "$0")/.."
NAMESRV_PORT="${NAMESRV_PORT:-9876}"
BROKER_PORT="${BROKER_PORT:-10911}"
RAFT_PORT="${RAFT_PORT:-20911}"
PROXY_PORT="${PROXY_PORT:-8081}"
PROXY_REMOTING_PORT="${PROXY_REMOTING_PORT:-8080}"
DATA="${DATA:-$PWD/data}"
NS="127.0.0.1:${NAMESRV_PORT}"
NODES=(n0 n1 n2)
PEERS="n0-127.0.0.1:${RAFT_PORT};n1-127.0.0.1:$((RAFT_PORT + 1));n2-127.0.0.1:$((RAFT_PORT + 2))"
mkdir -p "$DATA/logs"

pids=()
cleanup() {
	trap - INT TERM EXIT
	echo
	echo "stopping (brokers first, each hands leadership over)..."
	# Brokers first (in reverse start order), the name server last.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		p="${pids[$i]}"
		kill -TERM "$p" 2>/dev/null || true
		# A broker that led drains stale-route sends for up to 35 s (shutdownDrainMaxMillis).
		for _ in $(seq 400); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	echo "stopped."
}
trap cleanup INT TERM EXIT

# Each daemon runs in its own session (setsid), so a Ctrl-C reaches only this script, which then
# stops them in order: brokers first (the leader hands leadership over), the name server last.
setsid ./bin/mqnamesrv --listen "$NS" --kvConfigPath "$DATA/namesrv/kvConfig.json" >"$DATA/logs/namesrv.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	if (echo >"/dev/tcp/127.0.0.1/$NAMESRV_PORT") 2>/dev/null; then break; fi
	sleep 0.1
done

declare -A ADDR
for i in 0 1 2; do
	n="${NODES[$i]}"
	port=$((BROKER_PORT + 10 * i))
	ADDR[$n]="127.0.0.1:$port"
	# The shipped file as is; flags override only what the environment may move.
	setsid ./bin/mqbroker -c "config/dledger/broker-$n.properties" -n "$NS" \
		--listenPort "$port" --dLegerPeers "$PEERS" \
		--storePathRootDir "$DATA/broker-a-$n" >"$DATA/logs/broker-a-$n.log" 2>&1 &
	pids+=($!)
done

echo "waiting for broker-a to elect a leader and register it as master (brokerId 0)..."
master=""
for _ in $(seq 300); do
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			echo "a process exited early; see $DATA/logs/" >&2
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

setsid ./bin/mqproxy -n "$NS" --grpcServerPort "$PROXY_PORT" --remotingListenPort "$PROXY_REMOTING_PORT" --listenHost 127.0.0.1 >"$DATA/logs/proxy.log" 2>&1 &
pids+=($!)

echo
echo "name server : $NS   (log: $DATA/logs/namesrv.log)"
echo "proxy       : 127.0.0.1:$PROXY_PORT   RocketMQ 5 gRPC clients (TLS or plaintext), endpoint 127.0.0.1:$PROXY_PORT (log: $DATA/logs/proxy.log)"
echo "              127.0.0.1:$PROXY_REMOTING_PORT   RocketMQ 4.x clients, as their name server (failover unnoticed by them)"
echo "broker-a    : three-node DLedger group, Raft peers $PEERS"
for n in "${NODES[@]}"; do
	role="follower (SLAVE)"
	[ "${ADDR[$n]}" = "$master" ] && role="LEADER (master, brokerId 0)"
	printf '  %s  %-16s %-28s data: %s  log: %s\n' "$n" "${ADDR[$n]}" "$role" "$DATA/broker-a-$n" "$DATA/logs/broker-a-$n.log"
done
cat <<MSG

Try it (in another terminal):
  ./bin/mqbench produce -n $NS -t TopicTest --messages 10000
  ./bin/mqbench consume -n $NS -t TopicTest -g demo --expect 10000 --from first
  ./bin/mqadmin topicRoute -n $NS -t TopicTest      # who is master now
  ./bin/mqadmin clusterList -n $NS
  kill -9 <pid of the leader>                         # a follower takes over in a few hundred ms
Clients: set NAMESRV_ADDR=$NS (Go: producer.WithNameServer([]string{"$NS"})); they find the
master through the name server, or use the proxy as their name server (-n 127.0.0.1:$PROXY_REMOTING_PORT)
and never see a failover. RocketMQ 5 clients use the proxy's endpoint 127.0.0.1:$PROXY_PORT.
PIDs: name server ${pids[0]}, n0 ${pids[1]}, n1 ${pids[2]}, n2 ${pids[3]}, proxy ${pids[4]}.
Press Ctrl-C to stop.
MSG
wait
