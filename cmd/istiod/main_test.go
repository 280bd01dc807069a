package main_test

import (
	"bufio"
	"context"
	"errors"
	"io"
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

func TestBinaryServesSampleMesh(t *testing.T) {
	bin := build(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mesh, err := filepath.Abs(filepath.Join("..", "..", "examples", "mesh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "discovery", "--config-dir", mesh, "--grpcAddr", "127.0.0.1:0",
		"--secureGRPCAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0")
	cmd.Dir = t.TempDir() // relative default paths (the CA's files) land there
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); cmd.Wait() }()
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`msg="istiod serving" grpc=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var grpcAddr string
	select {
	case grpcAddr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatal("istiod did not start")
	}
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
