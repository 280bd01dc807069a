// Package logsink is the node agent's end of the CNI plugin's log socket
// (package pluginlog): it prints each record the plugin posts in
// install-cni's own log, at the record's level and time, with its fields
// and scope=cni-plugin, as Istio's node agent does. Istio's plugin posts
// the same way, so its records arrive too while an upgrade replaces it.
package logsink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/skiff-mesh/skiff/pkg/cni/pluginlog"
)

// maxBody bounds one post: a command's records are a few kB.
const maxBody = 1 << 20

// Listen listens on the log socket in dir, replacing an earlier one, with
// mode 0600 (the plugin runs as root). Closing the listener removes the
// socket only while it is still this one: a node agent that started since
// (a rolling update) keeps its own.
func Listen(dir string) (net.Listener, error) {
	path := filepath.Join(dir, pluginlog.SocketName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plugin log socket: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("plugin log socket: remove the earlier one: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("plugin log socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	st, err := os.Stat(path)
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("plugin log socket: %w", err)
	}
	return &listener{UnixListener: ln, path: path, st: st}, nil
}

type listener struct {
	*net.UnixListener
	path string
	st   fs.FileInfo
	once sync.Once
}

func (l *listener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		if now, serr := os.Stat(l.path); serr == nil && os.SameFile(now, l.st) {
			_ = os.Remove(l.path)
		}
	})
	return err
}

// Handler serves POST /log, printing the records to log.
func Handler(log *slog.Logger) http.Handler {
	s := &sink{log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+pluginlog.Path, s.post)
	return mux
}

type sink struct {
	log *slog.Logger
	mu  sync.Mutex // keeps one post's records together
}

func (s *sink) post(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.log.Warn("plugin log post not read", "err", err)
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	var texts []string
	if err := json.Unmarshal(body, &texts); err != nil {
		s.log.Warn("plugin log post is not a JSON array of strings", "err", err, "body", truncate(body))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range texts {
		rec, err := Parse(t)
		if err != nil {
			s.log.Warn("plugin log record not understood", "err", err, "record", truncate([]byte(t)))
			continue
		}
		if h := s.log.Handler(); h.Enabled(r.Context(), rec.Level) {
			_ = h.Handle(r.Context(), rec)
		}
	}
}

// Parse reads one record of the plugin's: a JSON object with level, time
// and msg, its other fields becoming attributes (in key order), with
// scope=cni-plugin first.
func Parse(text string) (slog.Record, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return slog.Record{}, err
	}
	msg, ok := raw["msg"].(string)
	if !ok {
		return slog.Record{}, errors.New(`no "msg" string`)
	}
	lvl, ok := raw["level"].(string)
	if !ok {
		return slog.Record{}, errors.New(`no "level" string`)
	}
	level, ok := levels[lvl]
	if !ok {
		return slog.Record{}, fmt.Errorf("level %q is not debug, info, warn or error", lvl)
	}
	ts, _ := raw["time"].(string)
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return slog.Record{}, fmt.Errorf("time %q: %w", ts, err)
	}
	rec := slog.NewRecord(t, level, msg, 0)
	rec.AddAttrs(slog.String("scope", "cni-plugin"))
	delete(raw, "msg")
	delete(raw, "level")
	delete(raw, "time")
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		rec.AddAttrs(slog.Any(k, raw[k]))
	}
	return rec, nil
}

// levels are the levels Istio's node agent prints; it has no fatal from
// the plugin either.
var levels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
