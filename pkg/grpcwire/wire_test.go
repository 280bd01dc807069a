package grpcwire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"
)

func TestStatusText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code Code
		text string
	}{
		{nil, OK, ""},
		{Errorf(Unavailable, "no %s", "peer"), Unavailable, "rpc error: code = Unavailable desc = no peer"},
		{fmt.Errorf("wrapped: %w", Errorf(NotFound, "x")), NotFound, ""},
		{context.Canceled, Canceled, ""},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), DeadlineExceeded, ""},
		{errors.New("boom"), Unknown, ""},
	} {
		if got := CodeOf(tc.err); got != tc.code {
			t.Errorf("CodeOf(%v) = %s; want %s", tc.err, got, tc.code)
		}
		if tc.text != "" && tc.err.Error() != tc.text {
			t.Errorf("Error() = %q; want %q", tc.err.Error(), tc.text)
		}
	}
	if Unauthenticated.String() != "Unauthenticated" || Code(17).String() != "Code(17)" {
		t.Errorf("String: %s, %s", Unauthenticated, Code(17))
	}
}

func TestMessageEncoding(t *testing.T) {
	for plain, wire := range map[string]string{
		"":                 "",
		"plain text ok":    "plain text ok",
		"100%":             "100%25",
		"ä\n":              "%C3%A4%0A",
		"tab\there, ~ end": "tab%09here, ~ end",
	} {
		if got := EncodeMessage(plain); got != wire {
			t.Errorf("EncodeMessage(%q) = %q; want %q", plain, got, wire)
		}
		if got := decodeMessage(wire); got != plain {
			t.Errorf("decodeMessage(%q) = %q; want %q", wire, got, plain)
		}
	}
	// A receiver is lenient: malformed escapes pass through.
	if got := decodeMessage("50%% off %zz %4"); got != "50%% off %zz %4" {
		t.Errorf("decodeMessage of malformed escapes = %q", got)
	}
}

func TestTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Nanosecond:              "1n",
		99999999 * time.Nanosecond:   "99999999n",
		100 * time.Millisecond:       "100000u",
		1500 * time.Millisecond:      "1500000u",
		2 * time.Minute:              "120000m",
		100000 * time.Second:         "100000S",
		time.Duration(math.MaxInt64): "2562048H",
	} {
		if got := encodeTimeout(d); got != want {
			t.Errorf("encodeTimeout(%v) = %q; want %q", d, got, want)
		}
		back, err := ParseTimeout(want)
		if err != nil || back < d {
			t.Errorf("ParseTimeout(%q) = %v, %v; want at least %v", want, back, err, d)
		}
	}
	for _, bad := range []string{"", "1", "m", "123456789m", "-1m", "1x", "1.5S", "+1S"} {
		if _, err := ParseTimeout(bad); err == nil {
			t.Errorf("ParseTimeout(%q): no error", bad)
		}
	}
	if d, err := ParseTimeout("99999999H"); err != nil || d != math.MaxInt64 {
		t.Errorf("ParseTimeout of the largest value = %v, %v", d, err)
	}
}

func frame(flag byte, msg []byte) []byte {
	var hdr [headerLen]byte
	putHeader(&hdr, len(msg))
	hdr[0] = flag
	return append(hdr[:], msg...)
}

func TestReadFrame(t *testing.T) {
	two := append(frame(0, []byte("ab")), frame(0, nil)...)
	var hdr [headerLen]byte
	r := bytes.NewReader(two)
	if m, err := readFrame(r, &hdr, 10); err != nil || string(m) != "ab" {
		t.Fatalf("first frame = %q, %v", m, err)
	}
	if m, err := readFrame(r, &hdr, 10); err != nil || len(m) != 0 {
		t.Fatalf("empty frame = %q, %v", m, err)
	}
	if _, err := readFrame(r, &hdr, 10); err != io.EOF {
		t.Fatalf("at the end: %v; want io.EOF", err)
	}
	for name, tc := range map[string]struct {
		in   []byte
		code Code
	}{
		"compressed":   {frame(1, []byte("x")), Internal},
		"bad flag":     {frame(7, []byte("x")), Internal},
		"too large":    {frame(0, make([]byte, 11)), ResourceExhausted},
		"short prefix": {[]byte{0, 0}, Internal},
		"short body":   {frame(0, []byte("abc"))[:7], Internal},
	} {
		_, err := readFrame(bytes.NewReader(tc.in), &hdr, 10)
		if st, ok := err.(*Status); !ok || st.Code != tc.code {
			t.Errorf("%s: %v; want %s", name, err, tc.code)
		}
	}
	// A reader's own ErrUnexpectedEOF (net/http's lost connection) is not
	// a malformed frame: it passes through for the caller to map.
	if _, err := readFrame(io.MultiReader(bytes.NewReader([]byte{0}), errReader{io.ErrUnexpectedEOF}), &hdr, 10); err != io.ErrUnexpectedEOF {
		t.Errorf("reader's ErrUnexpectedEOF became %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// FuzzReadFrame: any byte stream reads as messages, io.EOF or a *Status;
// never a panic, never a message over the limit, and the messages read
// frame back into the input they came from.
func FuzzReadFrame(f *testing.F) {
	f.Add(frame(0, []byte("hello")))
	f.Add(append(frame(0, nil), frame(1, []byte("z"))...))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 64
		var hdr [headerLen]byte
		r := bytes.NewReader(in)
		var again []byte
		for {
			m, err := readFrame(r, &hdr, max)
			if err == io.EOF {
				if !bytes.Equal(again, in) {
					t.Fatalf("messages frame back to %x; read from %x", again, in)
				}
				return
			}
			if err != nil {
				if _, ok := err.(*Status); !ok {
					t.Fatalf("error %v is not a *Status", err)
				}
				return
			}
			if len(m) > max {
				t.Fatalf("message of %d bytes over the limit", len(m))
			}
			again = append(again, frame(0, m)...)
		}
	})
}

// FuzzStatusTrailer: any grpc-status and grpc-message values parse without
// a panic, and any message survives encoding into a header value.
func FuzzStatusTrailer(f *testing.F) {
	f.Add("14", "no%20peer", "ünïcode 100%")
	f.Add("", "%", "\x00\xff")
	f.Fuzz(func(t *testing.T, code, wire, msg string) {
		parseStatus(code, wire)
		enc := EncodeMessage(msg)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7e {
				t.Fatalf("encoded message %q has byte %#x", enc, enc[i])
			}
		}
		if got := decodeMessage(enc); got != msg {
			t.Fatalf("decode(encode(%q)) = %q", msg, got)
		}
		ParseTimeout(wire)
	})
}
