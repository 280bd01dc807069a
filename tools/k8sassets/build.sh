#!/usr/bin/env bash
# Builds the Kubernetes binaries the tests run, once per machine, into a cache
# outside the repo (K8S_ASSETS, default ~/.cache/skiff/k8s/v$VERSION):
# kube-apiserver and etcd (a real API server, envtest style), and the node's
# kubelet, kube-controller-manager, kube-scheduler, kube-proxy and CoreDNS
# (pkg/kubenode), and helm for installing the charts. The first build takes 20-30 minutes on 2 cores; later runs
# find the binaries and return at once.
set -euo pipefail
VERSION=${K8S_VERSION:-1.37.2}
STAGING=0.${VERSION#1.}
MINOR=$(echo "$VERSION" | cut -d. -f2)
ETCD=${ETCD_VERSION:-3.7.3}
COREDNS=${COREDNS_VERSION:-1.14.7}
HELM=${HELM_VERSION:-3.22.0}
OUT=${K8S_ASSETS:-$HOME/.cache/skiff/k8s/v$VERSION}
KUBE_CMDS="kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy"
missing=""
for b in $KUBE_CMDS etcd coredns helm; do [ -x "$OUT/$b" ] || missing="$missing $b"; done
if [ -z "$missing" ]; then
  echo "k8s assets: $OUT"
  exit 0
fi
echo "k8s assets: building$missing into $OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export GOFLAGS=-mod=mod

kube_module() {
  [ -d "$WORK/kube" ] && return
  mkdir "$WORK/kube"
  (cd "$WORK/kube"
  go mod init skiff.local/k8sassets >/dev/null 2>&1
  go mod edit -require="k8s.io/kubernetes@v$VERSION"
  # k8s.io/kubernetes points its staging modules at ./staging: use the published ones.
  gomod=$(go mod download -json "k8s.io/kubernetes@v$VERSION" | jq -r .GoMod)
  for m in $(grep -oE '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}'); do
    go mod edit -replace="$m=$m@v$STAGING"
  done)
}

for b in $KUBE_CMDS; do
  [ -x "$OUT/$b" ] && continue
  echo "building $b v$VERSION"
  kube_module
  pkg=k8s.io/component-base/version
  (cd "$WORK/kube" && go build -o "$WORK/$b.bin" -ldflags "-s -w -X $pkg.gitVersion=v$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$MINOR" \
    "k8s.io/kubernetes/cmd/$b")
  mv "$WORK/$b.bin" "$OUT/$b"
done

if [ ! -x "$OUT/etcd" ]; then
  echo "building etcd v$ETCD"
  mkdir "$WORK/etcd" && cd "$WORK/etcd"
  go mod init skiff.local/etcdasset >/dev/null 2>&1
  go mod edit -require="go.etcd.io/etcd/server/v3@v$ETCD"
  go build -o "$WORK/etcd.bin" -ldflags "-s -w" go.etcd.io/etcd/server/v3
  mv "$WORK/etcd.bin" "$OUT/etcd"
fi

if [ ! -x "$OUT/coredns" ]; then
  echo "building coredns v$COREDNS"
  mkdir "$WORK/coredns" && cd "$WORK/coredns"
  go mod init skiff.local/corednsasset >/dev/null 2>&1
  go mod edit -require="github.com/coredns/coredns@v$COREDNS"
  go build -o "$WORK/coredns.bin" -ldflags "-s -w" github.com/coredns/coredns
  mv "$WORK/coredns.bin" "$OUT/coredns"
fi
if [ ! -x "$OUT/helm" ]; then
  echo "building helm v$HELM"
  mkdir "$WORK/helm" && cd "$WORK/helm"
  go mod init skiff.local/helmasset >/dev/null 2>&1
  go mod edit -require="helm.sh/helm/v3@v$HELM"
  go build -o "$WORK/helm.bin" -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM" helm.sh/helm/v3/cmd/helm
  mv "$WORK/helm.bin" "$OUT/helm"
fi
echo "k8s assets: $OUT"
