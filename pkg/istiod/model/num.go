package model

import (
	"fmt"
	"strconv"
)

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

// parsePort parses a port number in 1..65535.
func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q: want a number in 1..65535", s)
	}
	return uint16(n), nil
}
