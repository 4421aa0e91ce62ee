#!/usr/bin/env bash
# Regenerates the Go stubs of RocketMQ 5's gRPC protocol (package proxy/rmqpb, import path
# rocketraft/proxy/rmqpb) from the vendored definitions in third_party/rocketmq-apis
# (apache/rocketmq/v2/{definition,service,admin}.proto). Run through `make proto`.
#
# The output depends on the generator versions (they are written into every generated file's
# header), so they are pinned here and checked before anything is generated:
#   protoc              3.21.12  (Debian 12: apt-get install protobuf-compiler, which also
#                                 installs the well-known types under /usr/include/google/protobuf;
#                                 the .proto files import google/protobuf/{duration,timestamp}.proto)
#   protoc-gen-go       v1.36.12 (same as google.golang.org/protobuf in go.mod)
#   protoc-gen-go-grpc  v1.5.1
# GENPROTO_ANY_VERSION=1 accepts other versions (the generated headers will then differ).
#
# The .proto files carry no go_package option, so each one is mapped to our import path with an
# M option; the files stay registered under their own paths (apache/rocketmq/v2/*.proto) and
# protobuf full names (apache.rocketmq.v2.*).
set -euo pipefail
cd "$(dirname "$0")/.."

PROTOC_VERSION=3.21.12
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.5.1

GO="${GO:-go}"
MODULE=rocketraft
GO_PKG="$MODULE/proxy/rmqpb"
OUT_DIR=proxy/rmqpb
PROTO_ROOT=third_party/rocketmq-apis
PROTOS=(apache/rocketmq/v2/definition.proto apache/rocketmq/v2/service.proto apache/rocketmq/v2/admin.proto)

# go install puts the plugins in $GOBIN (default $GOPATH/bin), which need not be on PATH.
gobin="$("$GO" env GOBIN 2>/dev/null || true)"
[ -n "$gobin" ] || gobin="$("$GO" env GOPATH 2>/dev/null | cut -d: -f1)/bin"
export PATH="$PATH:$gobin"

fail=0
check() { # check NAME WANT GOT HOWTO
	local name="$1" want="$2" got="$3" howto="$4"
	if [ -z "$got" ]; then
		echo "genproto: $name not found; install it with:" >&2
		echo "    $howto" >&2
		fail=1
	elif [ "$got" != "$want" ] && [ "${GENPROTO_ANY_VERSION:-0}" != 1 ]; then
		echo "genproto: $name is $got, want $want; install it with:" >&2
		echo "    $howto" >&2
		echo "  (or set GENPROTO_ANY_VERSION=1 to use $got anyway)" >&2
		fail=1
	fi
}

got=""
if command -v protoc >/dev/null; then got="$(protoc --version | awk '{print $2}')"; fi
check protoc "$PROTOC_VERSION" "$got" \
	"apt-get update && apt-get install -y protobuf-compiler   # Debian 12 ships $PROTOC_VERSION"
if [ -n "$got" ] && [ ! -f "$(dirname "$(dirname "$(command -v protoc)")")/include/google/protobuf/timestamp.proto" ] &&
	[ ! -f /usr/include/google/protobuf/timestamp.proto ]; then
	echo "genproto: protoc's well-known types (google/protobuf/*.proto) not found; on Debian they come with" >&2
	echo "    apt-get install -y protobuf-compiler libprotobuf-dev" >&2
	fail=1
fi

got=""
if command -v protoc-gen-go >/dev/null; then got="$(protoc-gen-go --version | awk '{print $2}')"; fi
check protoc-gen-go "$PROTOC_GEN_GO_VERSION" "$got" \
	"$GO install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"

got=""
if command -v protoc-gen-go-grpc >/dev/null; then got="v$(protoc-gen-go-grpc --version | awk '{print $2}')"; fi
[ "$got" != v ] || got=""
check protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION" "$got" \
	"$GO install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"

[ "$fail" = 0 ] || exit 1

go_opts=(--go_opt=module="$MODULE")
grpc_opts=(--go-grpc_opt=module="$MODULE")
for p in "${PROTOS[@]}"; do
	go_opts+=(--go_opt=M"$p"="$GO_PKG")
	grpc_opts+=(--go-grpc_opt=M"$p"="$GO_PKG")
done

# Generate into a scratch tree first so that a failure leaves the checked-in stubs alone, then
# replace every generated file of the package (doc.go and the tests are kept).
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
protoc -I "$PROTO_ROOT" \
	--go_out="$tmp" "${go_opts[@]}" \
	--go-grpc_out="$tmp" "${grpc_opts[@]}" \
	"${PROTOS[@]}"

mkdir -p "$OUT_DIR"
rm -f "$OUT_DIR"/*.pb.go
cp "$tmp/$OUT_DIR"/*.pb.go "$OUT_DIR"/
echo "genproto: generated $(cd "$OUT_DIR" && ls *.pb.go | tr '\n' ' ')in $OUT_DIR"
