#!/usr/bin/env bash
# Fails when the host's own network namespace holds traffic capture: an
# ISTIO_* chain in any iptables backend or family, an istio-proxy-* nftables
# table, or policy routing to Istio's TPROXY table (133). Tests and
# benchmarks program only namespaces they create; capture in the host's
# namespace sends its outbound TCP to a proxy port nobody listens on. `make
# test` runs it before and after the tests; tools/bench/istio-iptables.sh after
# each installer run. Usage: check.sh [WHEN], e.g. "after the tests"
set -uo pipefail
after=${1:-}
found=$({
  for save in iptables-legacy-save iptables-nft-save ip6tables-legacy-save ip6tables-nft-save; do
    command -v "$save" >/dev/null && "$save" 2>/dev/null | grep -E '^:ISTIO_' | sed "s/^/$save: /"
  done
  nft list tables 2>/dev/null | grep -E 'istio-proxy-' | sed 's/^/nft: /'
  { ip -4 rule; ip -6 rule; } 2>/dev/null | grep -E 'lookup 133\b' | sed 's/^/ip rule: /'
} | sed 's/ \[[0-9]*:[0-9]*\]//')
if [[ -n $found ]]; then
  echo "hostcheck: the host's network namespace holds traffic capture${after:+ ($after)}:" >&2
  echo "$found" >&2
  echo "hostcheck: remove it (bin/istio-iptables --cleanup-only on the host, for each backend: --force-iptables-binary iptables-legacy, iptables-nft, and --native-nftables) before going on" >&2
  exit 1
fi
