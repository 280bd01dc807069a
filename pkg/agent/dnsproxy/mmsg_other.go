//go:build !linux

package dnsproxy

import "net"

func newBatchConn(c *net.UDPConn) batchConn { return xnetBatchConn(c) }
