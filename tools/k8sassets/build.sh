#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules, once per machine, into
# a cache outside the repo (K8S_ASSETS, default ~/.cache/skiff/k8s/v$VERSION).
# Tests use them as a real API server (envtest style). The first build takes
# 20-30 minutes on 2 cores; later runs find the binaries and return at once.
set -euo pipefail
VERSION=${K8S_VERSION:-1.37.2}
STAGING=0.${VERSION#1.}
MINOR=$(echo "$VERSION" | cut -d. -f2)
ETCD=${ETCD_VERSION:-3.7.3}
OUT=${K8S_ASSETS:-$HOME/.cache/skiff/k8s/v$VERSION}
if [ -x "$OUT/kube-apiserver" ] && [ -x "$OUT/etcd" ]; then
  echo "k8s assets: $OUT"
  exit 0
fi
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export GOFLAGS=-mod=mod

if [ ! -x "$OUT/kube-apiserver" ]; then
  echo "building kube-apiserver v$VERSION (first time on this machine: 20+ minutes)"
  mkdir "$WORK/kube" && cd "$WORK/kube"
  go mod init skiff.local/k8sassets >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@v$VERSION"
  # k8s.io/kubernetes points its staging modules at ./staging: use the published ones.
  gomod=$(go mod download -json "k8s.io/kubernetes@v$VERSION" | jq -r .GoMod)
  for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}'); do
    go mod edit -replace="$m=$m@v$STAGING"
  done
  pkg=k8s.io/component-base/version
  go build -o "$WORK/kube-apiserver.bin" -ldflags "-s -w -X $pkg.gitVersion=v$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$MINOR" \
    k8s.io/kubernetes/cmd/kube-apiserver
  mv "$WORK/kube-apiserver.bin" "$OUT/kube-apiserver"
fi

if [ ! -x "$OUT/etcd" ]; then
  echo "building etcd v$ETCD"
  mkdir "$WORK/etcd" && cd "$WORK/etcd"
  go mod init skiff.local/etcdasset >/dev/null 2>&1
  go mod edit -require="go.etcd.io/etcd/server/v3@v$ETCD"
  go build -o "$WORK/etcd.bin" -ldflags "-s -w" go.etcd.io/etcd/server/v3
  mv "$WORK/etcd.bin" "$OUT/etcd"
fi
echo "k8s assets: $OUT"
