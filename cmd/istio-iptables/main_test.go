package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skiff-mesh/skiff/pkg/netns/netnstest"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "istio-iptables-test")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "istio-iptables")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs the binary with a clean environment plus env, returning its exit code and output.
func run(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

var timestamp = regexp.MustCompile(`(?m)^# (Generated|Completed) .*$`)

// snapshot is every rule of the namespace in both backends and families, minus timestamps.
func snapshot(t *testing.T, ns *netnstest.NS) string {
	var b strings.Builder
	for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		b.WriteString(timestamp.ReplaceAllString(ns.Exec(t, save), ""))
	}
	b.WriteString(ns.Exec(t, "ip", "rule", "show"))
	return b.String()
}

func TestBadInputChangesNothing(t *testing.T) {
	ns := netnstest.New(t)
	if code, _, stderr := run(t, nil, "--network-namespace", ns.Path, "-i", "*", "-b", "*"); code != 0 {
		t.Fatalf("setup run: exit %d: %s", code, stderr)
	}
	before := snapshot(t, ns)
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{args: []string{"-p", "70000"}, want: `flag --envoy-port: "70000"`},
		{args: []string{"-i", "10.0.0.0/33"}, want: `flag --istio-service-cidr: "10.0.0.0/33"`},
		{args: []string{"-m", "FOO"}, want: `flag --istio-inbound-interception-mode: "FOO"`},
		{args: []string{"-u", "abc"}, want: `flag --proxy-uid: "abc"`},
		{env: []string{"PROXY_UID=abc"}, want: `env PROXY_UID: "abc"`},
		{env: []string{"ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR=10.1.1.1/32"}, want: `env ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR: "10.1.1.1/32"`},
		{args: []string{"--cleanup-only", "-z", "99999"}, want: `flag --inbound-capture-port: "99999"`},
	}
	for _, tt := range tests {
		args := append([]string{"--network-namespace", ns.Path}, tt.args...)
		code, stdout, stderr := run(t, tt.env, args...)
		if code != 2 {
			t.Errorf("%v %v: exit %d, want 2", tt.args, tt.env, code)
		}
		if !strings.Contains(stderr, tt.want) {
			t.Errorf("%v %v: stderr %q does not name %q", tt.args, tt.env, stderr, tt.want)
		}
		if stdout != "" {
			t.Errorf("%v: printed %q to stdout", tt.args, stdout)
		}
	}
	if after := snapshot(t, ns); after != before {
		t.Errorf("bad input changed the rules:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	ns := netnstest.New(t)
	before := snapshot(t, ns)
	code, stdout, stderr := run(t, nil, "--network-namespace", ns.Path, "-n", "-i", "*", "-b", "*", "--redirect-dns", "--capture-all-dns")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"# ipv4, iptables nft", "*nat", "-A ISTIO_OUTPUT -j ISTIO_REDIRECT", "*raw", "COMMIT"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, stdout)
		}
	}
	if after := snapshot(t, ns); after != before {
		t.Errorf("dry run changed the rules:\n%s", after)
	}
}

func TestValidationExitCodes(t *testing.T) {
	ns := netnstest.New(t)
	if code, _, stderr := run(t, nil, "--network-namespace", ns.Path, "--skip-rule-apply", "--run-validation", "--probe-timeout", "1s"); code != 126 {
		t.Errorf("validation without rules: exit %d, want 126: %s", code, stderr)
	}
	if code, _, stderr := run(t, []string{"RUN_VALIDATION=true"}, "--network-namespace", ns.Path, "-i", "*", "-b", "*"); code != 0 {
		t.Errorf("apply with validation: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run(t, nil, "--network-namespace", ns.Path, "--cleanup-only"); code != 0 {
		t.Errorf("cleanup: exit %d: %s", code, stderr)
	}
	if code, _, _ := run(t, nil, "--network-namespace", ns.Path, "--skip-rule-apply", "--run-validation", "--probe-timeout", "1s"); code != 126 {
		t.Errorf("validation after cleanup: exit %d, want 126", code)
	}
}

func TestForceIPTablesBinary(t *testing.T) {
	ns := netnstest.New(t)
	if code, _, stderr := run(t, []string{"FORCE_IPTABLES_BINARY=legacy"}, "--network-namespace", ns.Path, "-i", "*"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(ns.Exec(t, "iptables-legacy-save"), "-A ISTIO_OUTPUT -j ISTIO_REDIRECT") {
		t.Error("rules not in legacy")
	}
	if strings.Contains(ns.Exec(t, "iptables-nft-save"), "ISTIO") {
		t.Error("rules also in nft")
	}
	// Detection now joins legacy, and cleanup empties it.
	if code, _, stderr := run(t, nil, "--network-namespace", ns.Path, "--cleanup-only"); code != 0 {
		t.Fatalf("cleanup exit %d: %s", code, stderr)
	}
	if strings.Contains(ns.Exec(t, "iptables-legacy-save"), "ISTIO") {
		t.Error("cleanup left legacy rules")
	}
}

// TestNoHeavyDependencies keeps grpc, Envoy's protos and client-go out of the init binary.
func TestNoHeavyDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"google.golang.org/grpc", "github.com/envoyproxy/", "k8s.io/client-go", "google.golang.org/protobuf"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("istio-iptables links %s", dep)
			}
		}
	}
}
