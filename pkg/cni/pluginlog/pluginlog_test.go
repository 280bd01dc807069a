package pluginlog

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBufferEncodesAsIstioReadsThem(t *testing.T) {
	b := NewBuffer(slog.LevelInfo)
	log := slog.New(b).With("component", "istio-cni")
	log.Debug("not kept")
	log.Info("traffic capture installed", "pod", "default/shell")
	log.WithGroup("g").Warn("careful", "n", 3)
	log.Error("ADD failed", "err", "boom")
	recs := b.Records()
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3 (debug is below the level): %q", len(recs), recs)
	}
	for i, want := range []struct{ level, msg string }{{"info", "traffic capture installed"}, {"warn", "careful"}, {"error", "ADD failed"}} {
		var m map[string]any
		if err := json.Unmarshal(recs[i].JSON, &m); err != nil {
			t.Fatalf("record %d is not JSON: %v: %s", i, err, recs[i].JSON)
		}
		if m["level"] != want.level || m["msg"] != want.msg || m["component"] != "istio-cni" {
			t.Errorf("record %d = %v, want level %q, msg %q and the logger's component", i, m, want.level, want.msg)
		}
		if at, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil || at.Location() != time.UTC {
			t.Errorf("record %d time %v: %v, want RFC 3339 in UTC, as Istio's", i, m["time"], err)
		}
	}
	if !strings.Contains(string(recs[0].JSON), `"pod":"default/shell"`) {
		t.Errorf("fields lost: %s", recs[0].JSON)
	}
}

// TestBufferTimesInUTC: a record made in another zone is written in UTC.
func TestBufferTimesInUTC(t *testing.T) {
	b := NewBuffer(slog.LevelInfo)
	at := time.Date(2026, 12, 7, 23, 30, 0, 0, time.FixedZone("UTC+3", 3*3600))
	if err := b.Handle(t.Context(), slog.NewRecord(at, slog.LevelInfo, "m", 0)); err != nil {
		t.Fatal(err)
	}
	if recs := b.Records(); len(recs) != 1 || !strings.Contains(string(recs[0].JSON), `"time":"2026-12-07T20:30:00Z"`) {
		t.Errorf("records %q, want one with the time in UTC", recs)
	}
}

func TestShipAppendsToTheRollingFile(t *testing.T) {
	dir := t.TempDir()
	b := NewBuffer(slog.LevelDebug)
	log := slog.New(b)
	log.Debug("only for the socket")
	log.Info("one")
	// No socket in dir: the file alone, without an error.
	if err := Ship(dir, b.Records()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(got)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], `"msg":"one"`) {
		t.Errorf("file = %q, want the info record alone", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	// Past its size the file rolls over to .1.
	if err := os.Truncate(path, maxFileSize+1); err != nil {
		t.Fatal(err)
	}
	if err := Ship(dir, b.Records()); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path + ".1"); err != nil || st.Size() != maxFileSize+1 {
		t.Errorf("rolled-over file: %v, %v", st, err)
	}
	if got, _ := os.ReadFile(path); !strings.Contains(string(got), `"msg":"one"`) || len(got) > 200 {
		t.Errorf("new file = %q", got)
	}
	// Nothing to ship, or nowhere: nothing done.
	if err := Ship("", b.Records()); err != nil {
		t.Error(err)
	}
	if err := Ship(filepath.Join(dir, "absent"), nil); err != nil {
		t.Error(err)
	}
}

func TestShipReportsAnUnusableSocket(t *testing.T) {
	dir := t.TempDir()
	// A socket file nobody listens on.
	if err := os.WriteFile(filepath.Join(dir, SocketName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b := NewBuffer(slog.LevelInfo)
	slog.New(b).Info("x")
	if err := Ship(dir, b.Records()); err == nil || !strings.Contains(err.Error(), "plugin log socket") {
		t.Errorf("Ship = %v, want an error naming the socket", err)
	}
}

func TestRequestIsAJSONArrayOfTheRecords(t *testing.T) {
	recs := []Record{{JSON: []byte(`{"msg":"a \"quoted\" \\ path","level":"info"}`)}, {JSON: []byte("{\"msg\":\"tab\\t\x01\"}")}}
	req := string(request(recs))
	head, body, ok := strings.Cut(req, "\r\n\r\n")
	if !ok || !strings.HasPrefix(head, "POST /log HTTP/1.1\r\n") || !strings.Contains(head, "Content-Length: "+strconv.Itoa(len(body))) {
		t.Fatalf("request head %q, body of %d bytes", head, len(body))
	}
	var got []string
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if len(got) != 2 || got[0] != string(recs[0].JSON) || got[1] != string(recs[1].JSON) {
		t.Errorf("body decodes to %q", got)
	}
}
