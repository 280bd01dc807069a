package cni

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// TestReadAnswer: the node agent's answers as Go's HTTP server writes them
// (with and without Content-Length, 1.0 and 1.1), and what the plugin
// refuses, naming the part.
func TestReadAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		status   int
		body     string
		err      string
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}trailing", 200, "{}", ""},
		{"to the end", "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}", 200, `{"a":1}`, ""},
		{"bare LF", "HTTP/1.1 404 Not Found\ncontent-length: 4\n\nnope", 404, "nope", ""},
		{"no reason", "HTTP/1.1 503\r\n\r\n", 503, "", ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 0, "", "Transfer-Encoding"},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", 0, "", "not HTTP/1.x"},
		{"bad code", "HTTP/1.1 2x0 OK\r\n\r\n", 0, "", "bad status code"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", 0, "", "body of 10 bytes"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 0, "", "Content-Length"},
		{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", 0, "", "Content-Length"},
		{"no colon", "HTTP/1.1 200 OK\r\nbroken\r\n\r\n", 0, "", "no colon"},
		{"cut in the headers", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", 0, "", "unexpected EOF"},
		{"long line", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 5000) + "\r\n\r\n", 0, "", "too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := readAnswer(bufio.NewReader(strings.NewReader(tc.in)))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error naming %q", a, err, tc.err)
				}
				return
			}
			if err != nil || a.status != tc.status || string(a.body) != tc.body {
				t.Fatalf("got %+v, %v; want %d %q", a, err, tc.status, tc.body)
			}
		})
	}
}

// TestDecodePod: 200 is a pod, 404 ErrPodNotFound, anything else an error
// with the status and body.
func TestDecodePod(t *testing.T) {
	p, err := DecodePod("src", 200, "OK", []byte(`{"metadata":{"name":"a","namespace":"b"}}`))
	if err != nil || p.Metadata.Name != "a" {
		t.Errorf("200: %+v %v", p, err)
	}
	if _, err := DecodePod("src", 404, "Not Found", nil); !errors.Is(err, ErrPodNotFound) {
		t.Errorf("404: %v", err)
	}
	if _, err := DecodePod("src", 503, "Service Unavailable", []byte("pod cache not synced yet\n")); err == nil || !strings.Contains(err.Error(), "GET src: 503 Service Unavailable: pod cache not synced yet") {
		t.Errorf("503: %v", err)
	}
	if _, err := DecodePod("src", 200, "OK", []byte(`{`)); err == nil || !strings.Contains(err.Error(), "decode pod from src") {
		t.Errorf("bad JSON: %v", err)
	}
}

// FuzzReadAnswer: any bytes on the socket give an answer or an error, never
// a panic or a body past the limit.
func FuzzReadAnswer(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("HTTP/1.0 404 Not Found\r\n\r\nno"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := readAnswer(bufio.NewReader(strings.NewReader(string(in))))
		if err != nil {
			return
		}
		if a.status < 100 || a.status > 999 || len(a.body) > maxPodBytes {
			t.Fatalf("answer %d with %d bytes", a.status, len(a.body))
		}
		_, _ = DecodePod("fuzz", a.status, a.reason, a.body)
	})
}
