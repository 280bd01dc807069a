package dnsproxy

import "crypto/rand"

// randomID is a DNS message ID from the system's CSPRNG: with the random
// source port, what an off-path spoofer has to guess. (miekg/dns's Id
// reads the same source through encoding/binary, which allocates; this
// does not.)
func randomID() uint16 {
	var b [2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return uint16(b[0])<<8 | uint16(b[1])
}
