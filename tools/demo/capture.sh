#!/usr/bin/env bash
# make demo: two network namespaces joined by a veth, the injector's rules
# installed in the "pod" by istio-iptables, and real traffic showing each
# capture path. Everything it creates is removed on exit, even on failure.
set -euo pipefail
BIN=${BIN:-bin}
POD=skiff-demo-pod-$$ PEER=skiff-demo-peer-$$
VP=sdp$$ VQ=sdq$$
LISTENER_PID=
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
  set +e
  [ -n "$LISTENER_PID" ] && kill "$LISTENER_PID" 2>/dev/null
  if ip netns list | grep -q "^$POD"; then
    "$BIN/istio-iptables" --network-namespace "/run/netns/$POD" --cleanup-only 2>/dev/null
    ip netns del "$POD"
  fi
  ip netns list | grep -q "^$PEER" && ip netns del "$PEER"
  rm -rf "/etc/netns/$POD"
}
trap cleanup EXIT

say "Two namespaces: pod 10.99.0.2 <-veth-> peer 10.99.0.1"
ip netns add "$POD"; ip netns add "$PEER"
ip link add "$VP" netns "$POD" type veth peer name "$VQ" netns "$PEER"
ip -n "$POD" addr add 10.99.0.2/24 dev "$VP"; ip -n "$PEER" addr add 10.99.0.1/24 dev "$VQ"
for ns in "$POD" "$PEER"; do ip -n "$ns" link set lo up; done
ip -n "$POD" link set "$VP" up; ip -n "$PEER" link set "$VQ" up
mkdir -p "/etc/netns/$POD"; echo "nameserver 10.99.0.1" > "/etc/netns/$POD/resolv.conf"

say "istio-iptables with the injector's flags and DNS capture (ISTIO_META_DNS_CAPTURE=true)"
echo "+ istio-iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x \"\" -b '*' -d 15090,15021,15020"
ip netns exec "$POD" env ISTIO_META_DNS_CAPTURE=true "$BIN/istio-iptables" \
  -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020
ip netns exec "$POD" iptables-save -t nat | grep -E '^(-A|:ISTIO)'

say "A stand-in proxy runs as uid 1337 on 15001, 15006 and 15053"
ip netns exec "$POD" setpriv --reuid=1337 --regid=1337 --clear-groups "$BIN/capture-listener" &
LISTENER_PID=$!
sleep 0.5

say "Outbound: the app dials 10.99.0.1:8080; the connection lands on 15001"
ip netns exec "$POD" bash -c 'exec 3<>/dev/tcp/10.99.0.1/8080' || true
sleep 0.2

say "Inbound: the peer dials the pod on 10.99.0.2:9080; the connection lands on 15006"
ip netns exec "$PEER" bash -c 'exec 3<>/dev/tcp/10.99.0.2/9080' || true
sleep 0.2

say "DNS: the app asks its resolv.conf server (10.99.0.1:53); the query lands on 15053"
echo "+ dig reviews.default.svc.cluster.local"
ip netns exec "$POD" dig +short +time=2 +tries=1 reviews.default.svc.cluster.local
echo "+ dig +tcp ratings.default.svc.cluster.local"
ip netns exec "$POD" dig +short +tcp +time=2 +tries=1 ratings.default.svc.cluster.local
sleep 0.2

say "The proxy's own traffic (uid 1337) is not captured: its dial to 10.99.0.1:8080 is refused by the peer"
ip netns exec "$POD" setpriv --reuid=1337 --regid=1337 --clear-groups bash -c 'exec 3<>/dev/tcp/10.99.0.1/8080' 2>&1 | sed 's/^/  /' || true

say "Cleanup: istio-iptables --cleanup-only, then the namespaces go"
"$BIN/istio-iptables" --network-namespace "/run/netns/$POD" --cleanup-only
ip netns exec "$POD" iptables-save -t nat | grep -c ISTIO | sed 's/^/  ISTIO rules left: /' || true
