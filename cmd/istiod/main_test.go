package main_test

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod/xds/gen"
	"github.com/skiff-mesh/skiff/pkg/istiod/xds/xdstest"
)

// build compiles istiod into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "istiod")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startBinary runs the built istiod in file mode on the sample mesh with
// extra args, in a directory of its own (relative default paths, the CA's
// files, land there), until the test ends; it returns the xDS address and
// that directory.
// started is an istiod binary serving: its addresses and working directory.
type started struct{ grpc, monitoring, dir string }

func startBinary(t *testing.T, bin string, env []string, extra ...string) started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mesh, err := filepath.Abs(filepath.Join("..", "..", "examples", "mesh"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"discovery", "--config-dir", mesh, "--grpcAddr", "127.0.0.1:0",
		"--secureGRPCAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--webhookAddr", "127.0.0.1:0"}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cmd.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	addr := make(chan started, 1)
	go func() {
		re := regexp.MustCompile(`msg="istiod serving" grpc=(\S+) monitoring=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- started{grpc: m[1], monitoring: m[2], dir: cmd.Dir}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case s := <-addr:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("istiod did not start")
	}
	return started{}
}

// TestCATrustDomainFromMesh: without --trust-domain the CA's root is for
// the mesh config's trustDomain, as Istio's.
func TestCATrustDomainFromMesh(t *testing.T) {
	meshFile := filepath.Join(t.TempDir(), "mesh")
	if err := os.WriteFile(meshFile, []byte("trustDomain: example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := startBinary(t, build(t), nil, "--meshConfig", meshFile).dir
	b, err := os.ReadFile(filepath.Join(dir, "var", "lib", "istio", "ca", "ca-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("ca-cert.pem: no PEM")
	}
	root, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := root.Subject.Organization; len(got) != 1 || got[0] != "example.org" {
		t.Fatalf("root organization %v, want the mesh's trust domain example.org", got)
	}
}

func TestBinaryServesSampleMesh(t *testing.T) {
	grpcAddr := startBinary(t, build(t), nil).grpc
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := xdstest.DialSotW(ctx, grpcAddr, xdstest.Node("sidecar~127.0.0.31~productpage-0.default~default.svc.cluster.local", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Request(gen.ClusterType, nil, "", "", nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.Recv(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetResources()) < 10 {
		t.Fatalf("CDS: %d clusters", len(r.GetResources()))
	}
}

func TestBadFlags(t *testing.T) {
	bin := build(t)
	out, err := exec.Command(bin, "--config-dir", "x", "--debounce-after", "0s").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2", err)
	}
	if !strings.Contains(string(out), "debounce-after 0s: must be positive") {
		t.Fatalf("output %q does not name the flag and value", out)
	}
}

func TestBadLeaderElectionEnv(t *testing.T) {
	bin := build(t)
	for _, tc := range []struct{ env, want string }{
		{"ENABLE_LEADER_ELECTION=maybe", `ENABLE_LEADER_ELECTION="maybe"`},
		{"SKIFF_LEADER_ELECTION_LEASE_DURATION=1s", `SKIFF_LEADER_ELECTION_LEASE_DURATION="1s": must be at least 2s`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			cmd := exec.Command(bin, "--config-dir", t.TempDir())
			cmd.Env = append(cmd.Environ(), tc.env)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want code 2", err)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output %q does not name the variable and value (%s)", out, tc.want)
			}
		})
	}
}

// TestVersion: "pilot-discovery version", as Istio's, in its three forms.
func TestVersion(t *testing.T) {
	bin := build(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "client version: version.BuildInfo{Version:"},
		{[]string{"version", "-s"}, "client version: "},
		{[]string{"version", "-o", "json"}, `"clientVersion": {`},
	} {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("istiod %q: %v %q, want %q", tc.args, err, out, tc.want)
		}
	}
}

// TestGCPercent: istiod collects at 25 % heap growth unless GOGC says
// otherwise, read from its own Go runtime metrics.
func TestGCPercent(t *testing.T) {
	bin := build(t)
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "go_gc_gogc_percent 25"},
		{[]string{"GOGC=100"}, "go_gc_gogc_percent 100"},
	} {
		s := startBinary(t, bin, tc.env)
		resp, err := http.Get("http://" + s.monitoring + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want+"\n") {
			t.Errorf("env %q: no %q in the metrics", tc.env, tc.want)
		}
	}
}
