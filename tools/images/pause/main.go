// Command pause is the pod sandbox's process: it holds the pod's namespaces
// open, reaps the zombies of a shared PID namespace (it is PID 1 there), and
// exits 0 on SIGTERM or SIGINT, as the Kubernetes pause image does; it
// closes its stdout once it handles those signals. Static
// and without dependencies, so the sandbox image is one small file.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	// Nothing is ever written: closing stdout tells whoever holds its other
	// end that the handlers are in place (before, Go's runtime would end
	// the process on SIGTERM).
	os.Stdout.Close()
	// Children that exited before the handler was in place sent a SIGCHLD
	// nobody caught: reap them now.
	reap()
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child; one SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
