#!/usr/bin/env bash
# Whole-binary benchmark of istio-iptables: first install of the injector's
# rules in a fresh network namespace, wall time (hyperfine) and child
# processes (strace), for both iptables backends and native nftables. Run as
# root: make bench.
#
# Istio's own installer (`pilot-agent istio-iptables`, built once per machine
# by tools/istiobin/build.sh; ISTIO_AGENT=path to use another, ISTIO_AGENT=none
# to skip it) is timed the same way, side by side, with the same flags. Istio
# 1.31 does not apply --network-namespace outside CNI mode: it programs the
# namespace it runs in. So it runs under `ip netns exec`, and the script
# stops if the host namespace ever holds capture (tools/hostcheck).
#
# With OLD=path/to/another/istio-iptables it also times that binary against
# BIN on native nftables, alternating one run of each (RUNS pairs), so that
# load from other work on the machine falls on both alike; it prints the
# medians and the load average before and after.
set -euo pipefail
BIN=${BIN:-bin/istio-iptables}
RUNS=${RUNS:-50}
OLD=${OLD:-}
NS=skiff-bench-$$
FLAGS=(-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -b "*" -d 15090,15021,15020) # the injector's flags; -x "" is the default
trap 'ip netns del $NS 2>/dev/null || true' EXIT

backend_flags() {
  case $1 in
  native) echo --native-nftables ;;
  *) echo --force-iptables-binary "$1" ;;
  esac
}

ISTIO_AGENT=${ISTIO_AGENT:-}
if [[ -z $ISTIO_AGENT ]]; then
  ISTIO_AGENT="$(bash tools/istiobin/build.sh | sed -n 's/^istio bins: \([^ ]*\).*/\1/p' | tail -1)/pilot-agent"
fi
# Each installer's command, before its flags; the namespace is the last
# word of its prefix or its --network-namespace.
INSTALLERS=("skiff:$BIN --network-namespace /run/netns/$NS")
if [[ $ISTIO_AGENT != none ]]; then
  # Skiff's the way Istio's must run, so that the two pay for ip netns exec alike.
  INSTALLERS+=("skiff-under-ip-netns-exec:ip netns exec $NS $BIN" "istio:ip netns exec $NS $ISTIO_AGENT istio-iptables")
fi

# A pod's namespace: loopback and eth0 (a veth) with the pod's address (Istio's
# installer stops with "no valid local IP address found" without one).
PREPARE="ip netns del $NS 2>/dev/null; ip netns add $NS && ip -n $NS link add eth0 type veth peer name eth0p && ip -n $NS addr add 10.1.2.3/24 dev eth0 && ip -n $NS link set eth0 up && ip -n $NS link set lo up"

host_clean() { bash tools/hostcheck/check.sh "$1"; }
host_clean "before the benchmark"

for backend in native nft legacy; do
  for installer in "${INSTALLERS[@]}"; do
    name=${installer%%:*} cmd=${installer#*:}
    echo "## $name: istio-iptables first install, backend $backend ($cmd)"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    hyperfine --runs "$RUNS" --warmup 3 -N --export-json "/tmp/$NS.json" \
      --prepare "sh -c '$PREPARE'" \
      "$cmd $(backend_flags $backend) ${FLAGS[*]}" 2>&1 | grep -E "Time|Range|Error|error"
    jq -r '.results[0] | "median: \(.median * 1000 | . * 100 | round / 100) ms"' "/tmp/$NS.json"
    rm -f "/tmp/$NS.json"
    sh -c "$PREPARE"
    # shellcheck disable=SC2046,SC2086
    procs=$(strace -f -qq -e trace=execve -e signal=none $cmd $(backend_flags $backend) "${FLAGS[@]}" 2>&1 >/dev/null | grep -c 'execve(' )
    # ip netns exec execs the installer: its own exec is not a child.
    [[ $cmd == "ip netns exec"* ]] && procs=$((procs - 1))
    echo "child processes: $((procs - 1))"
    rules=$({ ip netns exec $NS iptables-nft-save; ip netns exec $NS iptables-legacy-save; ip netns exec $NS nft list tables; } 2>/dev/null)
    [[ $rules == *ISTIO_OUTPUT* || $rules == *istio-proxy-nat* ]] ||
      { echo "error: $name left no rules in the pod namespace" >&2; exit 1; }
    ip netns del $NS
    host_clean "after $name, backend $backend"
  done
done

if [[ -n $OLD ]]; then
  echo "## native nftables, $OLD against $BIN, $RUNS alternating pairs"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  : >"/tmp/$NS.times"
  for ((i = 0; i < RUNS; i++)); do
    hyperfine --runs 1 -N --export-json "/tmp/$NS.json" \
      --prepare "sh -c 'ip netns del $NS 2>/dev/null; ip netns add $NS'" \
      "$OLD --network-namespace /run/netns/$NS --native-nftables ${FLAGS[*]}" \
      "$BIN --network-namespace /run/netns/$NS --native-nftables ${FLAGS[*]}" >/dev/null 2>&1
    jq -r '[.results[].times[0]] | @tsv' "/tmp/$NS.json" >>"/tmp/$NS.times"
  done
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  median() { cut -f"$1" "/tmp/$NS.times" | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f ms", m*1000}'; }
  echo "median old: $(median 1)  new: $(median 2)"
  rm -f "/tmp/$NS.json" "/tmp/$NS.times"
fi
