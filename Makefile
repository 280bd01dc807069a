# Skiff: make help lists the targets.
SHELL := /bin/bash
GO ?= go
BIN := bin
# Debian packages the tests, benchmarks and demo use, by the command that proves each is there.
DEB_PKGS := iptables:iptables nft:nftables ip:iproute2 conntrack:conntrack dig:dnsutils \
	dnsmasq:dnsmasq-base dnsperf:dnsperf setpriv:util-linux hyperfine:hyperfine strace:strace jq:jq curl:curl openssl:openssl \
	containerd:containerd runc:runc /bin/busybox:busybox-static cc:gcc
BINARIES := istio-iptables
# grpcnotrace: gRPC without golang.org/x/net/trace, whose text/template makes
# the linker keep every exported method of every type (about 5 MB of each
# gRPC binary). Nothing here enables gRPC tracing or serves http.DefaultServeMux.
GOTAGS ?= grpcnotrace

.PHONY: help deps k8s-assets istio-bins interop build test bench bench-iptables bench-cni bench-agent demo demo-cluster demo-capture lint golden e2e fuzz clean images

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

deps: ## install the Debian packages and Go modules the tests need (as root)
	@missing=""; for p in $(DEB_PKGS); do command -v $${p%%:*} >/dev/null || missing="$$missing $${p##*:}"; done; \
	[ -x /usr/lib/cni/bridge ] || missing="$$missing containernetworking-plugins"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	$(GO) mod download

build: ## build every binary into bin/ (static: no cgo, so no dynamic loader at start)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -tags "$(GOTAGS)" -ldflags "-s -w" -o $(BIN)/ ./cmd/... ./examples/...

images: deps ## container images of the binaries (proxyv2, pilot, install-cni, app, pause, shell) as OCI tars in bin/images, for ctr -n k8s.io images import
	$(GO) run ./tools/images -out $(BIN)/images

k8s-assets: ## build kube-apiserver and etcd once per machine, cached outside the repo (first time: 20+ min)
	bash tools/k8sassets/build.sh

istio-bins: deps ## build Istio 1.31's pilot-agent, pilot-discovery, istioctl and CNI plugin from its Go module once per machine, cached outside the repo, for the interop tests (first time: 10-20 min)
	bash tools/istiobin/build.sh

interop: deps k8s-assets istio-bins ## Skiff's binaries against Istio 1.31's own (test/interop)
	$(GO) test -count=1 ./test/interop/

test: deps k8s-assets istio-bins ## run every test, privileged ones included (run as root, as CI does), then again under the race detector
	@[ "$$(id -u)" = 0 ] || echo "warning: not root: privileged tests will skip"
	$(MAKE) --no-print-directory lint
	GOOS=darwin $(GO) build ./pkg/... ./cmd/...
	bash tools/hostcheck/check.sh "before the tests"
	$(GO) test -count=1 ./...
	$(GO) test -race -count=1 ./...
	bash tools/hostcheck/check.sh "after the tests"

lint: ## gofmt, go vet, and one slog key for errors ("err")
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	@! git grep -nE '\.(Debug|Info|Warn|Error)\(.*"error", ' -- '*.go' || { echo 'log errors under the slog key "err"'; exit 1; }
	$(GO) vet ./...

golden: ## rewrite golden files from the current code
	$(GO) test ./pkg/... -run Golden -update

fuzz: fuzz-ca ## run each of our own fuzz targets for 30 s (the CA's through fuzz-ca)
	$(GO) test ./pkg/capture -run XXX -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./pkg/iptables -run XXX -fuzz FuzzParseSave -fuzztime 30s
	$(GO) test ./pkg/cni/logsink -run XXX -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./pkg/cni -run XXX -fuzz FuzzPrevResult -fuzztime 30s
	$(GO) test ./pkg/cni -run XXX -fuzz FuzzDecodePod -fuzztime 30s
	$(GO) test ./pkg/agent/dnsproxy -run XXX -fuzz FuzzHandlePacket -fuzztime 30s
	$(GO) test ./pkg/agent/dnsproxy -run XXX -fuzz FuzzAnswerFromWire -fuzztime 30s
	$(GO) test ./pkg/agent/dnsproxy -run XXX -fuzz FuzzParseRequest -fuzztime 30s
	$(GO) test ./pkg/agent/dnsproxy -run XXX -fuzz FuzzCompressRecords -fuzztime 30s
	$(GO) test ./pkg/agent/config -run XXX -fuzz FuzzParseDownwardAPI -fuzztime 30s
	$(GO) test ./pkg/agent/config -run XXX -fuzz FuzzLoad -fuzztime 30s
	$(GO) test ./pkg/agent/config -run XXX -fuzz '^FuzzProxyConfig$$' -fuzztime 30s
	$(GO) test ./pkg/agent/config -run XXX -fuzz '^FuzzProxyConfigField$$' -fuzztime 30s
	$(GO) test ./pkg/grpcwire -run XXX -fuzz '^FuzzReadFrame$$' -fuzztime 30s
	$(GO) test ./pkg/grpcwire -run XXX -fuzz '^FuzzStatusTrailer$$' -fuzztime 30s
	$(GO) test ./pkg/nds -run XXX -fuzz '^FuzzUnmarshal$$' -fuzztime 30s
	$(GO) test ./pkg/xdswire -run XXX -fuzz '^FuzzDecodeDiscoveryRequest$$' -fuzztime 30s
	$(GO) test ./pkg/xdswire -run XXX -fuzz '^FuzzDecodeDiscoveryResponse$$' -fuzztime 30s
	$(GO) test ./pkg/xdswire -run XXX -fuzz '^FuzzDecodeDeltaDiscoveryRequest$$' -fuzztime 30s
	$(GO) test ./pkg/xdswire -run XXX -fuzz '^FuzzDecodeDeltaDiscoveryResponse$$' -fuzztime 30s
	$(GO) test ./pkg/xdswire -run XXX -fuzz '^FuzzDecodeCertificateResponse$$' -fuzztime 30s
	$(GO) test ./pkg/xdswire -run XXX -fuzz '^FuzzDecodeHealthCheckResponse$$' -fuzztime 30s
	$(GO) test ./pkg/xdswire -run XXX -fuzz '^FuzzStripFields$$' -fuzztime 30s
	$(GO) test ./pkg/istiod/mesh -run XXX -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./pkg/istiod/webhook -run XXX -fuzz FuzzAdmissionReview -fuzztime 30s -fuzzminimizetime 2s
	$(GO) test ./pkg/istiod/webhook -run XXX -fuzz FuzzCreatePatch -fuzztime 30s -fuzzminimizetime 2s
	$(GO) test ./pkg/tlsrecord -run XXX -fuzz '^FuzzConn$$' -fuzztime 30s
	$(GO) test ./pkg/gotmpl -run XXX -fuzz '^FuzzMatchesTextTemplate$$' -fuzztime 30s
	$(GO) test ./pkg/grpcserver -run XXX -fuzz '^FuzzFrames$$' -fuzztime 30s
	$(GO) test ./pkg/istiod/xds -run XXX -fuzz '^FuzzRawRequest$$' -fuzztime 30s
	$(GO) test ./pkg/istiod/xds -run XXX -fuzz '^FuzzDecodeDelta$$' -fuzztime 30s
	$(GO) test ./pkg/istiod/registry/file -run XXX -fuzz '^FuzzParse$$' -fuzztime 30s
	$(GO) test ./pkg/istiod/duration -run XXX -fuzz '^FuzzNormalize$$' -fuzztime 30s
	$(GO) test ./pkg/cni/install -run XXX -fuzz '^FuzzInsertRemove$$' -fuzztime 30s

bench: bench-iptables bench-cni bench-agent bench-dns bench-ca bench-istiod bench-pods ## every benchmark; figures go to docs/benchmarks.md
	bash tools/hostcheck/check.sh "after the benchmarks"

bench-iptables: deps build ## istio-iptables first install vs one exec per rule
	$(GO) test -run XXX -bench . -benchtime 50x ./pkg/capture/
	BIN=$(BIN)/istio-iptables bash tools/bench/istio-iptables.sh

bench-cni: deps k8s-assets ## CNI ADD latency with and without the plugin, alone and 30 at once, beside Istio's own plugin and the cheapest plugin in Go and in C; install-cni's idle memory
	$(GO) test -run XXX -bench Add -benchtime 60x ./pkg/cni/
	$(GO) test -run XXX -bench IdleRSS -benchtime 3x ./cmd/install-cni/

bench-agent: deps build ## pilot-agent start-to-ready, binary size, idle and loaded RSS, DNS QPS, beside Istio's own agent
	$(GO) test -run XXX -bench StartToReady -benchtime 20x ./pkg/agent/
	bash tools/bench/pilot-agent.sh

demo: deps ## a mesh in network namespaces: istiod, agents, mTLS gRPC apps, captured DNS, 90/10 split (as root)
	$(GO) run ./tools/demo/mesh -root .
	bash tools/hostcheck/check.sh "after the demo"

demo-cluster: deps k8s-assets ## a real node (kubelet, containerd, CoreDNS), Skiff installed with helm, the demo mesh as Deployments, then uninstalled (as root)
	$(GO) run ./tools/demo/cluster -root .

demo-capture: deps build ## istio-iptables alone: outbound, inbound and DNS captured in a pod namespace (as root)
	BIN=$(BIN) bash tools/demo/capture.sh
	bash tools/hostcheck/check.sh "after the demo"

e2e: deps build ## end-to-end tests (the binaries together in namespaces)
	$(GO) test -count=1 ./cmd/...

clean: ## remove build output
	rm -rf $(BIN)

.PHONY: bench-pods
bench-pods: deps k8s-assets ## pod create -> running/Ready on a real node: no injection, istio-init, CNI, one at a time and 30 at once; sandbox (CNI ADD) times from containerd's log
	$(GO) run ./tools/podbench -root . -n 20

.PHONY: bench-dns
bench-dns: deps ## DNS proxy vs dnsmasq with dnsperf, 10 s runs (as root), the upstream probed beside the forward runs and dnsmasq direct again beside the proxy's CPU burned; figures go to docs/benchmarks.md
	$(GO) run ./tools/dnsbench -duration 10s

.PHONY: bench-istiod
bench-istiod: k8s-assets ## istiod xDS: 1000 services x 5 endpoints, 250/1000/4000 sidecar clients on the TLS port, as sidecars connect (the scaling curve), then beside Istio's own pilot-discovery on a kube-apiserver, without and with the pod behind each endpoint, every sidecar reconnecting with the versions it holds, and the mesh spread over 20 namespaces; figures go to docs/benchmarks.md
	$(GO) test -run XXX -bench HeldPerConn -benchtime 5x ./pkg/tlsrecord/
	$(GO) test -run XXX -bench IdleConn -benchtime 3x ./pkg/grpcserver/
	$(GO) test -run XXX -bench '(Recv|Send)Large' -benchtime 2000x ./pkg/grpcserver/
	$(GO) test -run XXX -bench Inject -benchtime 200x ./pkg/istiod/inject/
	$(GO) test -run XXX -bench 'Rebuild(Endpoint|Pod)Change' -benchtime 2000x ./pkg/istiod/model/
	$(GO) test -run XXX -bench 'Scopes' -benchmem -benchtime 20x ./pkg/istiod/model/
	$(GO) test -run XXX -bench 'FullPushNamespaces' -benchmem -benchtime 20x ./pkg/istiod/xds/gen/
	$(GO) test -run XXX -bench ApplyOneFile -benchmem -benchtime 500x ./pkg/istiod/registry/file/
	$(GO) test -run XXX -bench BuildPodChange -benchtime 2000x ./pkg/istiod/registry/kube/
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -tags "$(GOTAGS)" -ldflags "-s -w" -o $(BIN)/istiod ./cmd/istiod
	$(GO) run ./tools/xdsload --istiod $(BIN)/istiod --services 1000 --endpoints 5 --clients 250,1000 --full-pushes 5 --eds-changes 50
	$(GO) run ./tools/xdsload --istiod $(BIN)/istiod --services 1000 --endpoints 5 --clients 4000 --streams-per-conn 8 --timeout 120s --full-pushes 2 --eds-changes 10 --istiod-arg=--keepaliveInterval=10m
	$(GO) run ./tools/xdsload --istiod $(BIN)/istiod --services 1000 --endpoints 5 --clients 1000 --full-pushes 5 --eds-changes 50 --delta=false
	$(GO) run ./tools/xdsload --istiod $(BIN)/istiod --services 1000 --endpoints 5 --clients 1000 --full-pushes 2 --eds-changes 5 --reconnects 1 --rest 35s --timeout 300s
	for cp in skiff istio; do $(GO) run ./tools/xdsload --istiod $(BIN)/istiod --control-plane $$cp --source kube --tls=false \
	  --services 1000 --endpoints 5 --clients 1000 --full-pushes 2 --eds-changes 5 --rest 35s --timeout 300s || exit 1; done
	for cp in skiff istio; do $(GO) run ./tools/xdsload --istiod $(BIN)/istiod --control-plane $$cp --source kube --pods --rollout-steps 5 \
	  --services 1000 --endpoints 5 --clients 1000 --full-pushes 2 --eds-changes 5 --rest 35s --timeout 300s || exit 1; done
	for cp in skiff istio; do $(GO) run ./tools/xdsload --istiod $(BIN)/istiod --control-plane $$cp --source kube --tls=false --reconnects 1 \
	  --services 1000 --endpoints 5 --clients 1000 --full-pushes 2 --eds-changes 5 --rest 35s --timeout 300s || exit 1; done
	for cp in skiff istio; do $(GO) run ./tools/xdsload --istiod $(BIN)/istiod --control-plane $$cp --source kube --namespaces 20 \
	  --services 1000 --endpoints 5 --clients 1000 --full-pushes 2 --eds-changes 5 --rest 35s --timeout 300s || exit 1; done

.PHONY: bench-ca fuzz-ca
bench-ca: k8s-assets ## istiod CA: CSRs/s and p99 for ECDSA and RSA CSRs, beside openssl, then Skiff's and Istio's on a kube-apiserver; figures go to docs/benchmarks.md
	$(GO) test -run XXX -bench . -benchtime 3s ./pkg/istiod/ca/
	$(GO) run ./tools/cabench -n 10000 -c 2,16
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -tags "$(GOTAGS)" -ldflags "-s -w" -o $(BIN)/istiod ./cmd/istiod
	for cp in skiff istio; do $(GO) run ./tools/cabench -control-plane $$cp -istiod $(BIN)/istiod -n 3000 -c 16 \
	  -control-plane-arg=--kubernetesApiQPS=5000 -control-plane-arg=--kubernetesApiBurst=10000 || exit 1; done

fuzz-ca: ## fuzz SPIFFE IDs, CSR/PEM parsing, CreateCertificate requests and tokens, 30 s each
	$(GO) test ./pkg/spiffe -run XXX -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./pkg/pki -run XXX -fuzz FuzzParseCSR -fuzztime 30s -fuzzminimizetime 1s
	$(GO) test ./pkg/pki -run XXX -fuzz FuzzParseCertificates -fuzztime 30s -fuzzminimizetime 1s
	$(GO) test ./pkg/istiod/ca -run XXX -fuzz FuzzCreateCertificate -fuzztime 30s -fuzzminimizetime 1s
	$(GO) test ./pkg/istiod/ca -run XXX -fuzz FuzzJWTVerify -fuzztime 30s -fuzzminimizetime 1s
