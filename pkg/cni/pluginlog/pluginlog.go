// Package pluginlog carries the CNI plugin's log records to where an
// operator reads them, as Istio's plugin does. The plugin runs for a few
// milliseconds under the container runtime, which drops its stderr when
// the command succeeds. So the records of a command are kept (Buffer, a
// slog.Handler) and at its end (Ship) appended to a small rolling file in
// the node agent's run directory and sent to the node agent's log socket
// there, which prints them in install-cni's own log (kubectl logs
// istio-cni-node-…).
//
// The wire is Istio's, so either side may be Istio's during an upgrade: an
// HTTP POST of /log on <run dir>/log.sock whose body is a JSON array of
// strings, each one JSON record with "level" (debug, info, warn, error),
// "time" (RFC 3339), "msg" and any other fields. The package links no
// net/http: the plugin writes the request itself, with plain system calls,
// and does not wait for the answer.
package pluginlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/skiff-mesh/skiff/pkg/logtime"
)

const (
	// SocketName is the node agent's log socket in its run directory.
	SocketName = "log.sock"
	// FileName is the rolling file in the run directory, kept for when the
	// node agent is down.
	FileName = "istio-cni.log"
	// Path is the HTTP path records are posted to.
	Path = "/log"
	// maxFileSize is where the file rolls over to FileName.1 (Istio's 10 MB).
	maxFileSize = 10 << 20
	// sendTimeout bounds connecting to and writing the socket.
	sendTimeout = time.Second
)

// Record is one encoded log record.
type Record struct {
	Level slog.Level
	JSON  []byte // one JSON object, no newline
}

// Buffer is a slog.Handler that keeps each record it handles, encoded as
// Istio's node agent reads them.
type Buffer struct {
	inner slog.Handler
	state *bufferState // shared with the handlers WithAttrs and WithGroup make
}

type bufferState struct {
	mu      sync.Mutex
	scratch bytes.Buffer
	records []Record
}

// NewBuffer returns a Buffer keeping the records at lvl and above.
func NewBuffer(lvl slog.Leveler) *Buffer {
	st := &bufferState{}
	return &Buffer{state: st, inner: slog.NewJSONHandler(&st.scratch, &slog.HandlerOptions{
		Level: lvl,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.LevelKey {
				if l, ok := a.Value.Any().(slog.Level); ok {
					return slog.String(slog.LevelKey, levelName(l))
				}
			}
			return logtime.UTC(groups, a)
		},
	})}
}

// levelName is the level as Istio writes it.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// Enabled implements slog.Handler.
func (b *Buffer) Enabled(ctx context.Context, l slog.Level) bool { return b.inner.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (b *Buffer) Handle(ctx context.Context, r slog.Record) error {
	st := b.state
	st.mu.Lock()
	defer st.mu.Unlock()
	st.scratch.Reset()
	if err := b.inner.Handle(ctx, r); err != nil {
		return err
	}
	st.records = append(st.records, Record{Level: r.Level, JSON: bytes.Clone(bytes.TrimSuffix(st.scratch.Bytes(), []byte("\n")))})
	return nil
}

// WithAttrs implements slog.Handler.
func (b *Buffer) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Buffer{inner: b.inner.WithAttrs(attrs), state: b.state}
}

// WithGroup implements slog.Handler.
func (b *Buffer) WithGroup(name string) slog.Handler {
	return &Buffer{inner: b.inner.WithGroup(name), state: b.state}
}

// Records returns the records kept so far.
func (b *Buffer) Records() []Record {
	b.state.mu.Lock()
	defer b.state.mu.Unlock()
	return append([]Record(nil), b.state.records...)
}

// Ship appends the records at info and above to the rolling file in dir
// and sends all of them to the node agent's socket there, when it has one.
// Nothing is done without records or without dir.
func Ship(dir string, records []Record) error {
	if dir == "" || len(records) == 0 {
		return nil
	}
	return errors.Join(appendFile(filepath.Join(dir, FileName), records), send(filepath.Join(dir, SocketName), records))
}

// appendFile appends the records at info and above, one per line, rolling
// the file over to path.1 once it has grown past maxFileSize.
func appendFile(path string, records []Record) error {
	var lines []byte
	for _, r := range records {
		if r.Level >= slog.LevelInfo {
			lines = append(append(lines, r.JSON...), '\n')
		}
	}
	if len(lines) == 0 {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.Size() > maxFileSize {
		// Another plugin may roll it over at the same time; either rename wins.
		_ = os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("plugin log file: %w", err)
	}
	_, err = f.Write(lines)
	return errors.Join(err, f.Close())
}

// request is the HTTP request carrying records: a JSON array of the
// records' JSON texts, as strings.
func request(records []Record) []byte {
	body := []byte{'['}
	for i, r := range records {
		if i > 0 {
			body = append(body, ',')
		}
		body = appendString(body, r.JSON)
	}
	body = append(body, ']')
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: unix\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", Path, len(body))
	return append([]byte(head), body...)
}

// appendString appends s as a JSON string.
func appendString(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}
