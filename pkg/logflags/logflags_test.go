package logflags

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want slog.Level
	}{
		{"", slog.LevelInfo},
		{"debug", slog.LevelDebug},
		{"default:info", slog.LevelInfo},
		{"default:warn", slog.LevelWarn},
		{"warning", slog.LevelWarn},
		{"ads:debug,default:error", slog.LevelError},
		{"default:info,all:debug", slog.LevelDebug},
		{"ads:debug", slog.LevelInfo}, // no default scope given
		{"none", LevelNone},
		{"default:fatal", slog.LevelError + 4},
	} {
		got, err := ParseLevel(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"loud", "default:loud", "ads:verbose,default:info"} {
		if _, err := ParseLevel(bad); err == nil {
			t.Errorf("ParseLevel(%q): no error", bad)
		}
	}
}

func TestIstioArguments(t *testing.T) {
	// What Istio's charts and templates pass: accepted, the level applied,
	// the rest reported.
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f := Register(fs, "default:info")
	err := fs.Parse([]string{"--log_output_level=default:warn", "--log_as_json", "--log_caller=ads", "--log_target", "stderr"})
	if err != nil {
		t.Fatal(err)
	}
	if lvl, err := f.Level(); err != nil || lvl != slog.LevelWarn {
		t.Errorf("Level = %v, %v", lvl, err)
	}
	var b bytes.Buffer
	h, err := f.Handler(&b)
	if err != nil {
		t.Fatal(err)
	}
	slog.New(h).Warn("hello")
	if !strings.HasPrefix(b.String(), "{") {
		t.Errorf("--log_as_json gave %q", b.String())
	}
	got := strings.Join(f.Unapplied(), " ")
	if got != "--log_caller=ads --log_target=[stderr]" {
		t.Errorf("Unapplied = %q", got)
	}
}

func TestBadLevelNamesTheFlag(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f := Register(fs, "info")
	if err := fs.Parse([]string{"--log_output_level=default:loud"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Level()
	if err == nil || !strings.Contains(err.Error(), `--log_output_level "default:loud"`) {
		t.Fatalf("error %v does not name the flag and value", err)
	}
}

// TestTimesInUTC: records carry UTC times in both formats, whatever the
// local zone, and times inside a group or under another key are left alone.
func TestTimesInUTC(t *testing.T) {
	local := time.Local
	time.Local = time.FixedZone("UTC+3", 3*3600)
	t.Cleanup(func() { time.Local = local })
	at := time.Date(2026, 12, 7, 23, 30, 0, 0, time.Local)
	for _, json := range []bool{false, true} {
		var buf bytes.Buffer
		r := slog.NewRecord(at, slog.LevelInfo, "m", 0)
		r.AddAttrs(slog.Time("at", at), slog.Group("g", slog.Time(slog.TimeKey, at)))
		if err := NewHandler(&buf, slog.LevelInfo, json).Handle(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if !strings.Contains(out, "time=2026-12-07T20:30:00.000Z") && !strings.Contains(out, `"time":"2026-12-07T20:30:00Z"`) || strings.Count(out, "2026-12-07T23:30:00") != 2 {
			t.Errorf("json %v: %s, want the record's time in UTC and the attributes' as given", json, out)
		}
	}
}
