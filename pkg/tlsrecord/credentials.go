package tlsrecord

import (
	"net"

	"google.golang.org/grpc/credentials"
)

// ServerCredentials returns gRPC transport credentials that handshake as tc
// does, over a Conn: a gRPC server's TLS connections then keep one record's
// buffer each. gRPC still sees the raw socket it accepted (for its TCP user
// timeout) and the handshake's AuthInfo (for peer identities) unchanged.
func ServerCredentials(tc credentials.TransportCredentials) credentials.TransportCredentials {
	return serverCreds{tc}
}

type serverCreds struct {
	credentials.TransportCredentials
}

func (s serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return s.TransportCredentials.ServerHandshake(NewConn(raw))
}

func (s serverCreds) Clone() credentials.TransportCredentials {
	return serverCreds{s.TransportCredentials.Clone()}
}
