package cni

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxPodBytes bounds a pod's JSON as the plugin reads it.
const maxPodBytes = 4 << 20

// ErrPodNotFound is a pod the API server, or the node agent's cache, does
// not know (yet).
var ErrPodNotFound = errors.New("not found")

// answer is an HTTP/1.x response as the plugin reads it from the node
// agent's socket: the status and the body.
type answer struct {
	status int
	reason string
	body   []byte
}

// readAnswer reads one HTTP/1.0 or 1.1 response: the status line, the
// headers, and a body of Content-Length bytes or, without one, up to the
// end of the connection. A chunked or otherwise encoded body is refused
// (the plugin asks in HTTP/1.0, which has none). Reading it this way keeps
// net/http, and the TLS code it links, out of a binary started for every
// pod.
func readAnswer(r *bufio.Reader) (*answer, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, fmt.Errorf("status line: %w", err)
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, reason, _ := strings.Cut(rest, " ")
	if proto != "HTTP/1.0" && proto != "HTTP/1.1" {
		return nil, fmt.Errorf("status line %q: not HTTP/1.x", line)
	}
	a := &answer{reason: reason}
	if len(code) != 3 {
		return nil, fmt.Errorf("status line %q: bad status code", line)
	}
	if a.status, err = strconv.Atoi(code); err != nil || a.status < 100 {
		return nil, fmt.Errorf("status line %q: bad status code", line)
	}
	length := -1
	for {
		line, err := readLine(r)
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("header %q: no colon", line)
		}
		value = strings.TrimSpace(value)
		switch {
		case strings.EqualFold(name, "Content-Length"):
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 || (length >= 0 && n != length) {
				return nil, fmt.Errorf("header Content-Length: %q", value)
			}
			if n > maxPodBytes {
				return nil, fmt.Errorf("header Content-Length: %d is over %d bytes", n, maxPodBytes)
			}
			length = n
		case strings.EqualFold(name, "Transfer-Encoding"):
			return nil, fmt.Errorf("header Transfer-Encoding: %q not read here", value)
		}
	}
	if length >= 0 {
		a.body = make([]byte, length)
		if _, err := io.ReadFull(r, a.body); err != nil {
			return nil, fmt.Errorf("body of %d bytes: %w", length, err)
		}
		return a, nil
	}
	if a.body, err = io.ReadAll(io.LimitReader(r, maxPodBytes+1)); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	if len(a.body) > maxPodBytes {
		return nil, fmt.Errorf("body over %d bytes", maxPodBytes)
	}
	return a, nil
}

// readLine reads one CRLF- or LF-terminated line of at most the reader's
// buffer, without its ending.
func readLine(r *bufio.Reader) (string, error) {
	b, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errors.New("line too long")
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	return string(bytes.TrimSuffix(b[:len(b)-1], []byte("\r"))), nil
}

// DecodePod reads the answer to a pod GET of source: the pod on 200,
// ErrPodNotFound on 404, or an error with the status and body.
func DecodePod(source string, status int, reason string, body []byte) (*Pod, error) {
	switch status {
	case 200:
	case 404:
		return nil, ErrPodNotFound
	default:
		return nil, fmt.Errorf("GET %s: %d %s: %s", source, status, reason, strings.TrimSpace(string(body)))
	}
	var pod Pod
	if err := json.Unmarshal(body, &pod); err != nil {
		return nil, fmt.Errorf("decode pod from %s: %w", source, err)
	}
	return &pod, nil
}
