// Package netns runs code inside a Linux network namespace given by path.
package netns

import (
	"fmt"
	"runtime"

	vnetns "github.com/vishvananda/netns"
)

// Do runs fn with the calling goroutine locked to an OS thread that has
// joined the network namespace at path, then returns the thread to the
// namespace it came from. Child processes started by fn inherit the
// namespace. An empty path runs fn where the caller is.
func Do(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	target, err := vnetns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", path, err)
	}
	defer target.Close()

	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open current netns: %w", err)
	}
	defer orig.Close()
	if err := vnetns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %s: %w", path, err)
	}
	defer func() {
		if err := vnetns.Set(orig); err != nil {
			// The thread is stuck in the wrong namespace: let it die with the
			// goroutine instead of returning it to the pool.
			return
		}
		runtime.UnlockOSThread()
	}()
	return fn()
}
