package interop

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/skiff-mesh/skiff/pkg/logtest"
	"github.com/skiff-mesh/skiff/pkg/polltest"
)

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	givenMu.Lock()
	defer givenMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		// A closed port may be handed out again at once: never give one
		// twice, or two listeners of one process share it.
		if !given[addr] {
			given[addr] = true
			return addr
		}
	}
}

// given holds every address freeAddr returned in this test binary.
var (
	givenMu sync.Mutex
	given   = map[string]bool{}
)

// startProcess runs a control plane binary on the host until the test ends.
// Its stdout and stderr go to one buffer, which the test may read while it runs.
func startProcess(t *testing.T, dir string, env []string, bin string, args ...string) *logtest.Buffer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	w := &logtest.Buffer{}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s logs:\n%s", filepath.Base(bin), w.String())
		}
	})
	return w
}

// listening waits until something accepts connections on addr.
func listening(t *testing.T, addr string) {
	t.Helper()
	polltest.Within(t, 30*time.Second, addr+" listening", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}
