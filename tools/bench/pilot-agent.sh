#!/usr/bin/env bash
# pilot-agent as it runs in a pod: stripped binary size, exec-to-ready time
# against istiod with its CA, idle RSS; then the shipped binary with a
# 1000-service NameTable and DNS capture, idle and under DNS load (issue 15,
# section 2). Run as root from the repo root.
set -euo pipefail
go run ./tools/agentbench -runs 20 -idle 10s
go run ./tools/agentbench -runs 20 -idle 10s -services 1000 -dns-load 5s -ship
