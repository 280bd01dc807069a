package pluginlog

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// send posts the records to the socket at path, if there is one. It does
// not read the answer: once written, the request is the node agent's, even
// after the plugin has exited. Plain blocking system calls with a send
// timeout keep the plugin's one-shot send cheap.
func send(path string, records []Record) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("plugin log socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(sendTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return fmt.Errorf("plugin log socket: %w", err)
	}
	switch err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); {
	case errors.Is(err, unix.ENOENT):
		return nil // no node agent listening here
	case err != nil:
		return fmt.Errorf("plugin log socket %s: %w", path, err)
	}
	for msg := request(records); len(msg) > 0; {
		n, err := unix.Write(fd, msg)
		if err != nil {
			return fmt.Errorf("plugin log socket %s: %w", path, err)
		}
		msg = msg[n:]
	}
	return nil
}
