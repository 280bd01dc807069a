#!/usr/bin/env bash
# pilot-agent as it runs in a pod: stripped binary size, exec-to-ready time
# against istiod with its CA, idle RSS. Run as root from the repo root.
set -euo pipefail
go run ./tools/agentbench -runs 20 -idle 10s
