// Command pause is the pod sandbox's process: it holds the pod's namespaces
// open, reaps the zombies of a shared PID namespace (it is PID 1 there), and
// exits 0 on SIGTERM or SIGINT, as the Kubernetes pause image does. Static
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
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// One SIGCHLD may stand for several exits: reap until none is left.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
