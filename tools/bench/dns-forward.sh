#!/usr/bin/env bash
# The DNS proxy's forward path, binary against binary: each dnsbench build
# given as an argument serves (-serve) in front of a dnsmasq upstream whose
# answers have TTL 0, so nothing is cached and every query is forwarded;
# dnsperf drives each for DURATION seconds, ROUNDS times, alternating, then
# drives the upstream directly. Prints QPS and the proxy's CPU per query.
# Loopback only. Run as root from the repo root:
#   go build -o /tmp/dnsbench-new ./tools/dnsbench
#   bash tools/bench/dns-forward.sh /tmp/dnsbench-old /tmp/dnsbench-new
set -euo pipefail
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-2}
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
for i in $(seq 0 999); do echo "192.0.$((i >> 8)).$((i & 255)) host-$i.bench.test"; done >"$dir/hosts"
for i in $(seq 0 999); do echo "host-$i.bench.test A"; done >"$dir/queries"
up=127.0.54.1 proxy=127.0.54.2 port=5399
dnsmasq --keep-in-foreground --port=$port --listen-address=$up --bind-interfaces --no-resolv --no-hosts \
  --conf-file=/dev/null --pid-file= --user=root --log-facility=/dev/null --addn-hosts="$dir/hosts" \
  --local-ttl=0 --cache-size=0 &
pids+=($!)
until dig +short +time=1 +tries=1 @$up -p $port host-1.bench.test >/dev/null 2>&1; do sleep 0.1; done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  for bin in "$@"; do
    "$bin" -serve $proxy:$port -serve-upstream $up:$port >/dev/null &
    sk=$!
    pids+=($sk)
    until dig +short +time=1 +tries=1 @$proxy -p $port host-1.bench.test >/dev/null 2>&1; do sleep 0.1; done
    t0=$(awk '{print $14+$15}' /proc/$sk/stat)
    out=$(dnsperf -s $proxy -p $port -d "$dir/queries" -c 8 -q 100 -l "$DURATION")
    t1=$(awk '{print $14+$15}' /proc/$sk/stat)
    qps=$(awk '/Queries per second/{print $4}' <<<"$out")
    done_q=$(awk '/Queries completed/{print $3}' <<<"$out")
    lost=$(awk '/Queries lost/{print $3}' <<<"$out")
    echo "round $r $bin: $qps QPS, lost $lost, proxy CPU $(awk -v t=$((t1 - t0)) -v n="$done_q" 'BEGIN{printf "%.1f", t*10000/n}') us/query"
    kill $sk
    wait $sk 2>/dev/null || true
  done
done
echo "upstream direct: $(dnsperf -s $up -p $port -d "$dir/queries" -c 8 -q 100 -l "$DURATION" | awk '/Queries per second/{print $4}') QPS"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
