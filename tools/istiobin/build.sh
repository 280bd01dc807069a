#!/usr/bin/env bash
# Builds Istio's own binaries (pilot-agent, pilot-discovery, istioctl, istio-cni) from
# Istio's published Go module, once per machine, into a cache outside the repo
# (ISTIO_BINS, default ~/.cache/skiff/istio/$VERSION/bin), for the interop tests
# in test/interop. The project's go.mod never requires istio.io/istio: the build
# runs in a copy of Istio's module directory, with Istio's own go.mod and go.sum.
# Istio 1.31 has no standalone istio-iptables main: its rules come from
# `pilot-agent istio-iptables`.
#
# Idempotent: returns at once when every binary is there and the stamp matches.
# Safe to run concurrently (flock on $CACHE/build.lock).
set -euo pipefail
VERSION=${ISTIO_MODULE_VERSION:-v0.0.0-20260827124520-eed52ebb66ad}
CACHE=${ISTIO_CACHE:-$HOME/.cache/skiff/istio/$VERSION}
OUT=${ISTIO_BINS:-$CACHE/bin}
CMDS="pilot/cmd/pilot-agent pilot/cmd/pilot-discovery istioctl/cmd/istioctl cni/cmd/istio-cni"
GOVERSION=$(go env GOVERSION)
STAMP="istio.io/istio@$VERSION $GOVERSION CGO_ENABLED=0 $CMDS"

up_to_date() {
  [ -f "$OUT/.stamp" ] && [ "$(cat "$OUT/.stamp")" = "$STAMP" ] || return 1
  for c in $CMDS; do [ -x "$OUT/$(basename "$c")" ] || return 1; done
}

mkdir -p "$CACHE"
exec 9>"$CACHE/build.lock"
flock 9
if up_to_date; then
  echo "istio bins: $OUT"
  exit 0
fi

start=$(date +%s)
export GOFLAGS=-mod=mod CGO_ENABLED=0
MOD=$(go mod download -json "istio.io/istio@$VERSION" | jq -r .Dir)
[ -f "$MOD/go.mod" ] || { echo "istio bins: module istio.io/istio@$VERSION not found" >&2; exit 1; }
SRC=$CACHE/src
if [ ! -f "$SRC/.copied" ]; then
  rm -rf "$SRC"
  cp -r "$MOD" "$SRC"
  chmod -R u+w "$SRC"
  touch "$SRC/.copied"
fi
ISTIO_VER="$(cat "$SRC/VERSION")-dev"
REV=${VERSION##*-}
V=istio.io/istio/pkg/version
LDFLAGS="-s -w -X $V.buildVersion=$ISTIO_VER -X $V.buildGitRevision=$REV -X $V.buildStatus=Clean -X $V.buildTag=$VERSION"
mkdir -p "$OUT"
rm -f "$OUT/.stamp"
for c in $CMDS; do
  b=$(basename "$c")
  echo "istio bins: building $b ($ISTIO_VER, istio.io/istio@$VERSION)"
  (cd "$SRC" && go build -trimpath -ldflags "$LDFLAGS" -o "$OUT/.$b.tmp" "./$c")
  mv "$OUT/.$b.tmp" "$OUT/$b"
done
echo "$STAMP" >"$OUT/.stamp"
echo "istio bins: $OUT (built in $(( $(date +%s) - start )) s)"
