// Package grpcwire is gRPC's wire protocol (length-prefixed messages over
// HTTP/2, status in trailers) on net/http, for binaries that must not link
// grpc-go. Messages are opaque bytes: callers encode and decode them.
package grpcwire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Code is a gRPC status code.
type Code uint32

// The gRPC status codes, as the gRPC specification numbers them.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded",
	"NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted",
	"FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented",
	"Internal", "Unavailable", "DataLoss", "Unauthenticated",
}

// String returns the code's name as grpc-go spells it ("Unavailable"), or
// "Code(N)" for a code outside the specification.
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Status is the outcome of an RPC other than OK. It is the error type the
// client returns for a failed RPC, and the error a handler returns to choose
// the status its caller sees.
type Status struct {
	Code    Code
	Message string
}

// Error formats the status as grpc-go does, so logs read the same.
func (s *Status) Error() string {
	return fmt.Sprintf("rpc error: code = %s desc = %s", s.Code, s.Message)
}

// Errorf returns a *Status with code c and a formatted message.
func Errorf(c Code, format string, a ...any) error {
	return &Status{Code: c, Message: fmt.Sprintf(format, a...)}
}

// CodeOf returns the code of err: OK for nil, the code of a *Status in err's
// chain, Canceled or DeadlineExceeded for the context errors, and Unknown for
// anything else.
func CodeOf(err error) Code {
	return statusOf(err).Code
}

// statusOf turns any error into the status sent or reported for it.
func statusOf(err error) *Status {
	var st *Status
	switch {
	case err == nil:
		return &Status{Code: OK}
	case errors.As(err, &st):
		return st
	case errors.Is(err, context.Canceled):
		return &Status{Code: Canceled, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &Status{Code: DeadlineExceeded, Message: err.Error()}
	}
	return &Status{Code: Unknown, Message: err.Error()}
}

// httpCode maps a non-gRPC HTTP response's status to a gRPC code, as the
// gRPC "HTTP to gRPC status code mapping" document says.
func httpCode(status int) Code {
	switch status {
	case 400:
		return Internal
	case 401:
		return Unauthenticated
	case 403:
		return PermissionDenied
	case 404:
		return Unimplemented
	case 429, 502, 503, 504:
		return Unavailable
	}
	return Unknown
}

// parseStatus reads grpc-status and grpc-message values. A missing or
// malformed grpc-status is an Internal error, as the specification asks.
func parseStatus(code, msg string) *Status {
	if code == "" {
		return &Status{Code: Internal, Message: "server closed the stream without sending a status"}
	}
	n, err := strconv.ParseUint(code, 10, 32)
	if err != nil {
		return &Status{Code: Internal, Message: fmt.Sprintf("malformed grpc-status %q", code)}
	}
	return &Status{Code: Code(n), Message: decodeMessage(msg)}
}

// EncodeMessage percent-encodes a grpc-message value: every byte outside
// printable ASCII, and '%' itself, becomes %XX.
func EncodeMessage(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x7e && s[i] != '%' {
		i++
	}
	if i == len(s) {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*(len(s)-i))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c <= 0x7e && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// decodeMessage undoes EncodeMessage. Sequences that are not %XX pass
// through unchanged, as the specification asks of a lenient receiver.
func decodeMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
