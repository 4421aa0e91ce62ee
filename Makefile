# rocketraft: RocketMQ-compatible broker whose commitlog is replicated by Raft.
GO        ?= go
BIN       := bin
BINARIES  := mqnamesrv mqbroker mqadmin mqbench
UNIT_PKGS := $(shell $(GO) list ./... | grep -v /integration)

.PHONY: all build test unit integration vet fmt-check run bench clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 -timeout 5m $(UNIT_PKGS)

integration: build
	RR_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 8m ./integration/

# test is what CI runs: build everything, vet, gofmt, race-enabled unit tests
# (fuzz targets run over their seed corpus), then the real-process integration
# tests with the official Go client.
test: build fmt-check vet unit integration

# run starts a name server and a broker on loopback with data under ./data.
run: build
	./scripts/run.sh

# bench starts its own name server and broker in a temporary directory and
# prints producer and consumer figures for ASYNC_FLUSH and SYNC_FLUSH.
bench: build
	./scripts/bench.sh

clean:
	rm -rf $(BIN)
