#!/usr/bin/env bash
# Builds the release tarballs (make dist): for each architecture of DIST_ARCHS, the static
# binaries (make static: CGO off, version stamped), the default configurations, LICENSE and
# deploy/dist/README.md as README.md, packed as
#   DIST_DIR/rocketraft-<version>-linux-<arch>.tar.gz   (one top directory of the same name)
# and DIST_DIR/SHA256SUMS over the tarballs this run made (check with: sha256sum -c SHA256SUMS).
#
# Env (the Makefile passes them): VERSION, COMMIT, DATE (the stamp), DIST_ARCHS ("amd64 arm64"),
# DIST_DIR (dist), MAKE (make), GO (go).
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE="${MAKE:-make}"
GO="${GO:-go}"
DIST_ARCHS="${DIST_ARCHS:-amd64 arm64}"
DIST_DIR="${DIST_DIR:-dist}"
VERSION="${VERSION:-$(cat VERSION 2>/dev/null || git describe --tags --always --dirty 2>/dev/null || echo unknown)}"
COMMIT="${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
DATE="${DATE:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}"
# The version goes into file names: keep it to characters every file system and URL accepts.
fver="$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9._+-' '_')"

# The files every tarball carries besides the binaries (paths as in the repository).
CONFIGS=(config/broker.properties config/dledger/broker-n0.properties config/dledger/broker-n1.properties
	config/dledger/broker-n2.properties config/plain_acl.example.yml)

mkdir -p "$DIST_DIR"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
made=()
for arch in $DIST_ARCHS; do
	name="rocketraft-$fver-linux-$arch"
	stage="$work/$name"
	mkdir -p "$stage"
	echo "building $name"
	"$MAKE" --no-print-directory static GO="$GO" ARCH="$arch" STATIC_BIN="$stage" \
		VERSION="$VERSION" COMMIT="$COMMIT" DATE="$DATE"
	for f in "${CONFIGS[@]}"; do
		install -D -m 0644 "$f" "$stage/$f"
	done
	install -m 0644 LICENSE "$stage/LICENSE"
	sed "s/@VERSION@/$fver/g; s/@ARCH@/$arch/g" deploy/dist/README.md >"$stage/README.md"
	# Owner and order fixed, so the tarball's listing does not depend on who built it.
	tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner -czf "$DIST_DIR/$name.tar.gz" "$name"
	made+=("$name.tar.gz")
done
(cd "$DIST_DIR" && sha256sum "${made[@]}" >SHA256SUMS)
echo "wrote:"
for f in "${made[@]}"; do echo "  $DIST_DIR/$f"; done
echo "  $DIST_DIR/SHA256SUMS"
