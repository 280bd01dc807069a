package logtime

import (
	"log/slog"
	"testing"
	"time"
)

func TestUTC(t *testing.T) {
	at := time.Date(2026, 12, 7, 23, 30, 0, 0, time.FixedZone("UTC+3", 3*3600))
	for _, c := range []struct {
		name   string
		groups []string
		in     slog.Attr
		utc    bool
	}{
		{"the record's time", nil, slog.Time(slog.TimeKey, at), true},
		{"an attribute named time in a group", []string{"g"}, slog.Time(slog.TimeKey, at), false},
		{"another time attribute", nil, slog.Time("at", at), false},
		{"a time key that is not a time", nil, slog.String(slog.TimeKey, "noon"), false},
	} {
		got := UTC(c.groups, c.in)
		if c.utc {
			if got.Value.Kind() != slog.KindTime || got.Value.Time().Location() != time.UTC || !got.Value.Time().Equal(at) {
				t.Errorf("%s: %v, want %v in UTC", c.name, got, at)
			}
		} else if !got.Equal(c.in) {
			t.Errorf("%s: %v, want it unchanged", c.name, got)
		}
	}
}
