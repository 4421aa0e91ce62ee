#!/usr/bin/env bash
# Starts a local name server and broker on loopback (data under ./data) and
# stops both on Ctrl-C. Ports can be changed with NAMESRV_PORT / BROKER_PORT.
set -euo pipefail
cd "$(dirname "$0")/.."
NAMESRV_PORT="${NAMESRV_PORT:-9876}"
BROKER_PORT="${BROKER_PORT:-10911}"
DATA="${DATA:-$PWD/data}"
NS="127.0.0.1:${NAMESRV_PORT}"
mkdir -p "$DATA/logs"

pids=()
cleanup() {
	trap - INT TERM EXIT
	echo
	echo "stopping..."
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	echo "stopped."
}
trap cleanup INT TERM EXIT

./bin/mqnamesrv --listen "$NS" --kvConfigPath "$DATA/namesrv/kvConfig.json" >"$DATA/logs/namesrv.log" 2>&1 &
pids+=($!)
./bin/mqbroker -n "$NS" \
	--brokerName broker-a --listenPort "$BROKER_PORT" --brokerIP1 127.0.0.1 \
	--storePathRootDir "$DATA/broker-a" >"$DATA/logs/broker-a.log" 2>&1 &
pids+=($!)

for _ in $(seq 100); do
	if (echo >"/dev/tcp/127.0.0.1/$BROKER_PORT") 2>/dev/null; then break; fi
	sleep 0.1
done

cat <<MSG
name server : $NS              (log: $DATA/logs/namesrv.log)
broker-a    : 127.0.0.1:$BROKER_PORT   (data: $DATA/broker-a, log: $DATA/logs/broker-a.log)

Try it (in another terminal):
  ./bin/mqbench produce -n $NS -t TopicTest --messages 10000
  ./bin/mqbench consume -n $NS -t TopicTest -g demo --expect 10000 --from first
  ./bin/mqadmin topicStatus -n $NS -t TopicTest
Clients: set NAMESRV_ADDR=$NS (Go: producer.WithNameServer([]string{"$NS"})).
Press Ctrl-C to stop.
MSG
wait
