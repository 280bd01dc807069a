#!/usr/bin/env bash
# Whole-binary benchmark of istio-iptables: first install of the injector's
# rules in a fresh network namespace, wall time (hyperfine) and child
# processes (strace), for both iptables backends. Run as root: make bench.
set -euo pipefail
BIN=${BIN:-bin/istio-iptables}
RUNS=${RUNS:-50}
NS=skiff-bench-$$
FLAGS=(-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -b "*" -d 15090,15021,15020) # the injector's flags; -x "" is the default
trap 'ip netns del $NS 2>/dev/null || true' EXIT

for backend in nft legacy; do
  echo "## istio-iptables first install, backend $backend"
  hyperfine --runs "$RUNS" --warmup 3 -N --export-json "/tmp/$NS.json" \
    --prepare "sh -c 'ip netns del $NS 2>/dev/null; ip netns add $NS'" \
    "$BIN --network-namespace /run/netns/$NS --force-iptables-binary $backend ${FLAGS[*]}" 2>&1 | grep -E "Time|Range|Error|error"
  jq -r '.results[0] | "median: \(.median * 1000 | . * 100 | round / 100) ms"' "/tmp/$NS.json"
  rm -f "/tmp/$NS.json"
  ip netns del $NS 2>/dev/null || true; ip netns add $NS
  procs=$(strace -f -qq -e trace=execve -e signal=none "$BIN" --network-namespace /run/netns/$NS --force-iptables-binary "$backend" "${FLAGS[@]}" 2>&1 >/dev/null | grep -c 'execve(' )
  echo "child processes: $((procs - 1))"
  ip netns del $NS
done
