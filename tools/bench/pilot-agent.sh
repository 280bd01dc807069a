#!/usr/bin/env bash
# pilot-agent as it runs in a pod: stripped binary size, exec-to-ready time
# against istiod with its CA, idle RSS; then, as an injected sidecar (a
# stand-in for Envoy) with a 1000-service NameTable and DNS capture, idle and
# under DNS load (mesh names, names forwarded with TTL 0 and with TTL 3600):
# Skiff's shipped binary, then Istio's own pilot-agent in the same pod
# (issue 15, section 2). Run as root from the repo root.
set -euo pipefail
go run ./tools/agentbench -runs 20 -idle 10s
for agent in skiff istio; do
  go run ./tools/agentbench -runs 8 -idle 10s -services 1000 -dns-load 5s \
    -dns-sets mixed,mesh,forward,cached -ship -agent "$agent"
done
