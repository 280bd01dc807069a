#!/usr/bin/env bash
# Builds Istio's own CNI plugin (cni/cmd/istio-cni) from Istio's published Go
# module, once per machine, beside the binaries build.sh makes, for pkg/cni's
# comparison with it (TestSameRulesAsIstiosPlugin) and the CNI benchmark's
# side-by-side case (BenchmarkAddPaired). It is apart from build.sh, so that
# a failure here touches no other interop test.
#
# It builds with Istio's own go.mod. When a module that go.mod names is
# neither in the module cache nor served (here, on 2026-12-02:
# github.com/containernetworking/cni v1.3.0 and github.com/stretchr/objx
# v0.5.2), it builds again with a copy of that go.mod that replaces each by
# the next patch release in the cache (v1.3.1, the one this project uses,
# and v0.5.3), says so, and records it in the stamp. Istio's source is not
# changed.
#
# Idempotent; serialised with build.sh's lock.
set -euo pipefail
VERSION=${ISTIO_MODULE_VERSION:-v0.0.0-20260827124520-eed52ebb66ad}
CACHE=${ISTIO_CACHE:-$HOME/.cache/skiff/istio/$VERSION}
OUT=${ISTIO_BINS:-$CACHE/bin}
bash "$(dirname "$0")/build.sh" >/dev/null # the source copy and the lock's directory
SRC=$CACHE/src
GOVERSION=$(go env GOVERSION)
REPLACE="github.com/containernetworking/cni@v1.3.0=github.com/containernetworking/cni@v1.3.1 github.com/stretchr/objx@v0.5.2=github.com/stretchr/objx@v0.5.3"

exec 9>"$CACHE/build.lock"
flock 9
STAMP_FILE=$OUT/.stamp-istio-cni
if [ -x "$OUT/istio-cni" ] && [ -f "$STAMP_FILE" ] && grep -q "^istio.io/istio@$VERSION $GOVERSION " "$STAMP_FILE"; then
  echo "istio-cni: $OUT/istio-cni ($(cat "$STAMP_FILE"))"
  exit 0
fi
export CGO_ENABLED=0
V=istio.io/istio/pkg/version
LDFLAGS="-s -w -X $V.buildVersion=$(cat "$SRC/VERSION")-dev -X $V.buildGitRevision=${VERSION##*-} -X $V.buildStatus=Clean -X $V.buildTag=$VERSION"
rm -f "$STAMP_FILE"
if (cd "$SRC" && GOFLAGS=-mod=mod go build -trimpath -ldflags "$LDFLAGS" -o "$OUT/.istio-cni.tmp" ./cni/cmd/istio-cni) 2>"$OUT/.istio-cni.log"; then
  note="Istio's go.mod"
else
  echo "istio-cni: the build with Istio's go.mod failed ($OUT/.istio-cni.log: $(grep -o 'github.com/[^ :/]*/[^ :/]*@v[0-9.]*' "$OUT/.istio-cni.log" | sort -u | tr '\n' ' ')); building with: $REPLACE" >&2
  alt=$(mktemp -d)
  trap 'rm -rf "$alt"' EXIT
  cp "$SRC/go.mod" "$alt/go.mod"
  cp "$SRC/go.sum" "$alt/go.sum"
  args=()
  for r in $REPLACE; do args+=(-replace "$r"); done
  (cd "$SRC" && go mod edit -modfile="$alt/go.mod" "${args[@]}")
  (cd "$SRC" && GOFLAGS=-mod=mod GOPROXY=off GONOSUMDB=github.com/containernetworking,github.com/stretchr \
    go build -modfile="$alt/go.mod" -trimpath -ldflags "$LDFLAGS" -o "$OUT/.istio-cni.tmp" ./cni/cmd/istio-cni)
  note="Istio's go.mod with $REPLACE"
fi
mv "$OUT/.istio-cni.tmp" "$OUT/istio-cni"
echo "istio.io/istio@$VERSION $GOVERSION CGO_ENABLED=0 cni/cmd/istio-cni, $note" >"$STAMP_FILE"
echo "istio-cni: $OUT/istio-cni ($(cat "$STAMP_FILE"))"
