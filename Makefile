# rocketraft: RocketMQ-compatible broker whose commitlog is replicated by Raft.
GO        ?= go
BIN       := bin
BINARIES  := mqnamesrv mqbroker mqadmin mqbench mqbench5 mqproxy
UNIT_PKGS := $(shell $(GO) list ./... | grep -v /integration)

.PHONY: all build static dist test unit integration vet fmt-check run bench bench-peer bench-figures chaos faults proto clean

all: build

# The version stamped into every binary (internal/version; --version, banners, /status,
# brokerStatus): a VERSION file's content if there is one, else git describe; the commit and
# the build time (UTC). Unstamped builds (go build, go test) fall back to the Go toolchain's
# VCS information.
VERSION  ?= $(shell cat VERSION 2>/dev/null || git describe --tags --always --dirty 2>/dev/null || echo unknown)
COMMIT   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DATE     ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := rocketraft/internal/version
LDFLAGS  := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).Date=$(DATE)

# -trimpath: the binaries name source files by module path, not by the directory they were built
# in, and a copy of the tree elsewhere builds from the same cache entries (integration's
# quick-start test builds one).
build:
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

# static builds the release binaries: CGO off (no libc needed at run time), paths trimmed,
# symbols stripped, version stamped as above, for linux/ARCH (default: this machine's) into
# STATIC_BIN. make dist and the Containerfile both build through it.
ARCH       ?= $(shell $(GO) env GOARCH)
STATIC_BIN ?= $(BIN)/linux-$(ARCH)
static:
	@mkdir -p $(STATIC_BIN)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $(STATIC_BIN)/ $(addprefix ./cmd/,$(BINARIES))

# dist packs a release tarball per DIST_ARCHS: the static binaries, the default configs, LICENSE
# and a README (deploy/dist/README.md) in DIST_DIR/rocketraft-<version>-linux-<arch>.tar.gz, and
# their SHA-256 sums in DIST_DIR/SHA256SUMS (scripts/dist.sh; docs/operations.md "Deploying").
DIST_ARCHS ?= amd64 arm64
DIST_DIR   ?= dist
dist:
	MAKE='$(MAKE)' GO='$(GO)' VERSION='$(VERSION)' COMMIT='$(COMMIT)' DATE='$(DATE)' \
	  DIST_ARCHS='$(DIST_ARCHS)' DIST_DIR='$(DIST_DIR)' ./scripts/dist.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 5m $(UNIT_PKGS)

# LOG_STORE (wal, bolt or commitlog) runs the integration, chaos and fault suites with every
# DLedger node on that Raft log store (tests that choose their own keep theirs); unset, the nodes
# run the commitlog store, as the shipped configurations set it.
LOG_STORE ?=
integration: build
	RR_BIN_DIR=$(CURDIR)/$(BIN) RR_LOG_STORE=$(LOG_STORE) $(GO) test -count=1 -timeout 12m ./integration/

# test is what CI runs: build everything, vet, gofmt, race-enabled unit tests
# (fuzz targets run over their seed corpus), then the real-process integration
# tests with the official Go client.
test: build fmt-check vet unit integration

# run starts a name server, a three-node DLedger group (broker-a: n0/n1/n2 from config/dledger/)
# and a proxy on loopback with data under ./data, prints where everything is and supervises them
# (scripts/run.sh; `scripts/run.sh restart n0` restarts a killed node under it). The script runs
# as a job of a shell with job control (bash -m), in a process group of its own that gets the
# terminal: Ctrl-C reaches only the script, which stops everything and exits 0, so make reports
# no error (make itself, sent SIGINT, would end by the signal whatever its child did). Without a
# terminal there is no Ctrl-C, and the script runs directly.
run: build
	@if [ -t 0 ]; then bash -mc './scripts/run.sh; exit $$?'; else ./scripts/run.sh; fi

# bench starts its own name server and broker in a temporary directory and
# prints producer and consumer figures for ASYNC_FLUSH and SYNC_FLUSH.
# PEER=nats adds the peer phase (bench-peer) after it.
bench: build
	./scripts/bench.sh
	@if [ "$(PEER)" = nats ]; then ./scripts/peerbench.sh; fi

# bench-peer builds NATS JetStream (nats-server and the nats CLI at pinned versions, from the Go
# module proxy, into bin/peer/) and runs a three-node JetStream cluster on loopback (file storage,
# sync_interval: always, R3, 1 KiB messages) against scripts/cpubench.sh R3, alternated, at 256
# and 2048 in flight and with a lone sync producer (ours on the commitlog Raft log store, as
# shipped), printing every run, its CPU time per message (servers, bench client) and the ratios
# (scripts/peerbench.sh: ROUNDS, INFLIGHT, DUR...).
bench-peer: build
	GO=$(GO) ./scripts/peerbench.sh

# bench-figures measures on a three-node group: peak msg/s with memory per node and disk bytes
# written per message per node, end-to-end latency at half of the peak, consume throughput from
# the leader and a follower, catch-up of a follower 1 GiB behind, restart to serving with 1 GiB
# of commitlog, and the proxy's overhead (scripts/figures.sh: DUR, CATCHUP_MB, RESTARTS...).
bench-figures: build
	./scripts/figures.sh

# chaos runs the long chaos suite against three-node DLedger groups (integration/chaos_test.go,
# partition_test.go): the leader killed with SIGKILL every CHAOS_INTERVAL and restarted
# CHAOS_RESTART_DELAY later, CHAOS_KILLS times, under CHAOS_PRODUCERS producers; a follower kill;
# both followers killed; the leader cut off from its peers by a proxy (the kill loop with a writer
# keeping the disk busy unless CHAOS_DISK_BUSY=0); a fresh fourth node added to a group holding
# NEWNODE_MB MiB, then removed (integration/newnode_test.go); delayed messages sent across
# CHAOS_DELAY_KILLS leader kills (integration/delay_chaos_test.go); and CHAOS_TXN_ROUNDS leader
# kills with transactions left unknown (integration/transaction_test.go); CHAOS_PAUSES SIGSTOP/SIGCONT
# pauses of the leader (integration/pause_test.go); CHAOS_POWERLOSS coordinated power losses of
# all three nodes on lazyfs mounts, cycling defaults, frequent snapshots and torn writeback, and
# CHAOS_POWERLOSS_ONE of the leader alone and of a follower alone (integration/powerloss_test.go);
# CHAOS_PROXY_KILLS leader kills every 10-15 s under official 5.x clients connected to mqproxy
# (integration/proxy_chaos_test.go: pause per kill between two acknowledged sends, p99 <= 1 s);
# CHAOS_PROXY4_KILLS leader kills under official Go 4.x clients given two proxies' remoting
# listeners as name servers (integration/proxy4_chaos_test.go).
# The whole
# -v output scrolls by, then the figures (sent, acknowledged, lost, duplicates, failover
# min/median/p99/max, catch-up time and MB/s) are repeated at the end. make test runs the same
# tests with 3 kills (2 for the delayed messages, 3 behind the proxy), 16 MiB, 4 pauses and 3+1+1 power losses.
CHAOS_KILLS         ?= 20
CHAOS_INTERVAL      ?= 15s
CHAOS_RESTART_DELAY ?= 5s
CHAOS_PRODUCERS     ?= 2
CHAOS_DISK_BUSY     ?= 1
NEWNODE_MB          ?= 100
CHAOS_DELAY_KILLS   ?= 8
CHAOS_TXN_ROUNDS    ?= 5
CHAOS_PAUSES        ?= 50
CHAOS_POWERLOSS     ?= 21
CHAOS_POWERLOSS_ONE ?= 3
CHAOS_PROXY_KILLS   ?= 10
CHAOS_PROXY4_KILLS  ?= 20
chaos: build
	@out=$$(mktemp); \
	( RR_BIN_DIR=$(CURDIR)/$(BIN) RR_LOG_STORE=$(LOG_STORE) RR_CHAOS_KILLS=$(CHAOS_KILLS) RR_CHAOS_INTERVAL=$(CHAOS_INTERVAL) \
	  RR_CHAOS_RESTART_DELAY=$(CHAOS_RESTART_DELAY) RR_CHAOS_PRODUCERS=$(CHAOS_PRODUCERS) \
	  RR_CHAOS_DISK_BUSY=$(CHAOS_DISK_BUSY) RR_NEWNODE_MB=$(NEWNODE_MB) RR_CHAOS_DELAY_KILLS=$(CHAOS_DELAY_KILLS) \
	  RR_CHAOS_TXN_ROUNDS=$(CHAOS_TXN_ROUNDS) RR_PAUSES=$(CHAOS_PAUSES) RR_POWERLOSS_ROUNDS=$(CHAOS_POWERLOSS) \
	  RR_POWERLOSS_SINGLE=$(CHAOS_POWERLOSS_ONE) RR_CHAOS_PROXY_KILLS=$(CHAOS_PROXY_KILLS) RR_CHAOS_PROXY4_KILLS=$(CHAOS_PROXY4_KILLS) \
	  $(GO) test -count=1 -timeout 30m -v -run '^(TestChaos|TestNewNode)' ./integration/; echo $$? >$$out.rc ) 2>&1 | tee $$out; \
	echo; echo "==== chaos figures ===="; \
	grep -E 'CHAOS|NEWNODE|kill [0-9]+/|follower kill:|minority left:|leader isolated:|pause [0-9]+/|power loss|^--- |^(ok|FAIL)' $$out; \
	rc=$$(cat $$out.rc); rm -f $$out $$out.rc; exit $$rc

# faults runs the fault lab (docs/faults.md, "The fault lab runner"): a name server, a three-node
# group and the clients each on its own network-namespace host (needs root, ip, nft), under two
# producers, an ordered producer and a push consumer, while every nemesis of
# integration/nemesis_test.go strikes FAULTS_EACH times in a shuffled order (leader cut from both
# followers, 2|1 splits with the leader or a follower alone, a bridge, one-way loss both ways, a
# flapping link, the name server cut; SIGSTOP of the leader, a follower, the name server; kill -9
# of a follower, the leader, a majority, restarted FAULTS_HOLD later), plus FAULTS_COMPOSED
# overlapping pairs, each fault held FAULTS_HOLD and followed by FAULTS_GAP of quiet load. The
# checker reads every queue on every node and fails a run with anything lost, unexpected, out of
# order, a committed offset going back, replicas that differ or duplicates above FAULTS_DUP_PCT %
# (each must be explained anyway). The -v output scrolls by, then the table per nemesis (faults,
# acknowledged, lost, duplicates and why, recovery to the first SEND_OK and delivery p50/p99) is
# repeated at the end. make test runs the same test with 1 fault of each nemesis and 2 composed.
# The rest of the lab runs beside it at full size (FAULTS_MORE names the tests, FAULTS_ENV their
# knobs): 10 coordinated power losses of all three nodes plus 3 of the leader and 3 of a follower
# alone (integration/powerloss_test.go); 10 disk faults of each kind (EIO on fsync, EIO on write,
# ENOSPC) on the leader and followers, and a follower's stable store failing
# (integration/diskfault_test.go); 60 cut/heal cycles of ten kinds around a leader that must keep
# its leadership (integration/stepdown_test.go); and every nemesis 10 times against two groups
# behind two proxies with the official 5.x clients (integration/faultcluster_test.go).
FAULTS_EACH     ?= 10
FAULTS_COMPOSED ?= 8
FAULTS_HOLD     ?= 2s
FAULTS_GAP      ?= 10s
FAULTS_DUP_PCT  ?= 0.1
FAULTS_MORE     ?= |TestChaosPowerLoss|TestChaosDiskFaults|TestDiskFaultStableStore|TestChaosFollowerCutLeaderStays|TestFaultClusterTwoGroups
FAULTS_ENV      ?= RR_POWERLOSS_ROUNDS=10 RR_POWERLOSS_SINGLE=3 RR_DISKFAULTS=10 RR_FOLLOWER_CUTS=60 RR_CLUSTER_FAULTS=10
faults: build
	@out=$$(mktemp); \
	( RR_BIN_DIR=$(CURDIR)/$(BIN) RR_LOG_STORE=$(LOG_STORE) RR_FAULTS_EACH=$(FAULTS_EACH) RR_FAULTS_COMPOSED=$(FAULTS_COMPOSED) \
	  RR_FAULTS_HOLD=$(FAULTS_HOLD) RR_FAULTS_GAP=$(FAULTS_GAP) RR_FAULTS_DUP_PCT=$(FAULTS_DUP_PCT) $(FAULTS_ENV) \
	  $(GO) test -count=1 -parallel 1 -timeout 6h -v -run '^(TestFaultLab$(FAULTS_MORE))$$' ./integration/; echo $$? >$$out.rc ) 2>&1 | tee $$out; \
	echo; echo "==== fault lab figures ===="; \
	grep -E 'FAULTS|fault [0-9]+/[0-9]+|^--- |^(ok|FAIL)' $$out; \
	rc=$$(cat $$out.rc); rm -f $$out $$out.rc; exit $$rc

# proto regenerates proxy/rmqpb (Go stubs of RocketMQ 5's gRPC protocol) from
# third_party/rocketmq-apis with pinned protoc and plugins (scripts/genproto.sh says how to install them).
proto:
	GO=$(GO) ./scripts/genproto.sh

clean:
	rm -rf $(BIN) dist
