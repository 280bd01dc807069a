package grpcwire

import (
	"context"
	"errors"
	"reflect"
	"time"
)

// HTTP/2 error codes (RFC 9113 section 7) that map to their own gRPC codes.
const (
	h2RefusedStream      = 0x7
	h2Cancel             = 0x8
	h2EnhanceYourCalm    = 0xb
	h2InadequateSecurity = 0xc
)

// streamResetStatus returns the status of a stream that HTTP/2 reset, as the
// gRPC specification maps RST_STREAM codes, or nil when err is no reset.
// net/http's stream error type is unexported, so it is recognised by its
// shape: a struct named http2StreamError with a numeric Code field.
func streamResetStatus(ctx context.Context, err error) *Status {
	for ; err != nil; err = errors.Unwrap(err) {
		v := reflect.ValueOf(err)
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct || v.Type().Name() != "http2StreamError" {
			continue
		}
		f := v.FieldByName("Code")
		if !f.IsValid() || !f.CanUint() {
			return nil
		}
		st := &Status{Code: Internal, Message: "grpcwire: " + err.Error()}
		switch f.Uint() {
		case h2RefusedStream:
			st.Code = Unavailable
		case h2Cancel:
			st.Code = Canceled
			if dl, ok := ctx.Deadline(); ok && !dl.After(time.Now()) {
				st.Code = DeadlineExceeded
			}
		case h2EnhanceYourCalm:
			st.Code = ResourceExhausted
		case h2InadequateSecurity:
			st.Code = PermissionDenied
		}
		return st
	}
	return nil
}
