package ha_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/istiod/leader"
	"github.com/skiff-mesh/skiff/pkg/kubetest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// leaseDuration is the replicas' lease duration: short, so that a
// successor takes over a killed leader's leases well within the test's
// 15 s bound (Istio's 30 s would not).
const leaseDuration = 4 * time.Second

// buildIstiod compiles cmd/istiod once into a temporary directory.
func buildIstiod(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "istiod")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/skiff-mesh/skiff/cmd/istiod").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// replica is one istiod process.
type replica struct {
	id     string
	cmd    *exec.Cmd
	grpc   string // plaintext xDS address, read from the log
	exited chan struct{}

	mu    sync.Mutex
	lines []string
}

var servingRE = regexp.MustCompile(`msg="istiod serving" grpc=(\S+)`)

// startReplica runs istiod as pod id in istio-system against env, on
// loopback ports of its own; it is killed when the test ends.
func startReplica(t *testing.T, bin string, env *kubetest.Env, id string) *replica {
	t.Helper()
	cmd := exec.Command(bin, "discovery", "--kubeconfig", env.Kubeconfig,
		"--grpcAddr", "127.0.0.1:0", "--secureGRPCAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0",
		"--httpAddr", "127.0.0.1:0", "--webhookAddr", "127.0.0.1:0")
	cmd.Dir = t.TempDir() // relative default paths (cacerts, injector files) land there, empty
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "KUBECONFIG" && k != "KUBERNETES_SERVICE_HOST" && !strings.HasPrefix(k, "POD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "POD_NAME="+id, "POD_NAMESPACE=istio-system",
		leader.LeaseDurationEnv+"="+leaseDuration.String())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{id: id, cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			r.lines = append(r.lines, line)
			r.mu.Unlock()
			if m := servingRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", id, strings.Join(r.log(), "\n"))
		}
	})
	select {
	case r.grpc = <-addr:
	case <-r.exited:
		t.Fatalf("%s exited before serving:\n%s", id, strings.Join(r.log(), "\n"))
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start serving:\n%s", id, strings.Join(r.log(), "\n"))
	}
	return r
}

// kill sends SIGKILL (a crash: nothing is released) and waits for the exit.
func (r *replica) kill() {
	r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

func (r *replica) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// count returns how many log lines match re.
func (r *replica) count(re *regexp.Regexp) int {
	n := 0
	for _, l := range r.log() {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

// becameLeader matches the line a replica logs when it starts lease's
// singleton.
func becameLeader(lease string) *regexp.Regexp {
	return regexp.MustCompile(`msg="became leader; starting singleton".*lease=istio-system/` + regexp.QuoteMeta(lease) + `(\s|$)`)
}

// waitLogged waits until r logs a line matching re.
func waitLogged(t *testing.T, r *replica, d time.Duration, re *regexp.Regexp) {
	t.Helper()
	polltest.Within(t, d, fmt.Sprintf("%s logs %s", r.id, re), func() bool { return r.count(re) > 0 })
}
