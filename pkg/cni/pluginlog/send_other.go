//go:build !linux

package pluginlog

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"time"
)

// send posts the records to the socket at path, if there is one (the
// plugin runs on Linux; this keeps the package building elsewhere).
func send(path string, records []Record) error {
	c, err := net.DialTimeout("unix", path, sendTimeout)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("plugin log socket %s: %w", path, err)
	}
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(sendTimeout))
	if _, err := c.Write(request(records)); err != nil {
		return fmt.Errorf("plugin log socket %s: %w", path, err)
	}
	return nil
}
