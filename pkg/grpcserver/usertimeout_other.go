//go:build !linux

package grpcserver

import (
	"net"
	"time"
)

func setUserTimeout(net.Conn, time.Duration) {}
