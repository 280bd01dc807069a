// Package logflags is Istio's logging command line for Skiff's binaries:
// --log_output_level and the other flags every Istio binary takes, so that
// the arguments Istio's charts and injection templates pass are accepted
// everywhere. The output level becomes a slog level; the flags Skiff cannot
// honour are reported by Unapplied, for the caller to log once.
package logflags

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/skiff-mesh/skiff/pkg/logtime"
)

// LevelNone is the slog level of Istio's "none": nothing is logged.
const LevelNone = slog.Level(math.MaxInt32)

// Flags holds Istio's logging flags as parsed.
type Flags struct {
	fs          *pflag.FlagSet
	outputLevel string
	asJSON      bool
}

// honoured are the flags that change what Skiff logs.
var honoured = []string{"log_output_level", "log_as_json"}

// Register adds Istio's logging flags to fs. defaultLevel is the output
// level when --log_output_level is not given (Istio's is "default:info").
func Register(fs *pflag.FlagSet, defaultLevel string) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.outputLevel, "log_output_level", defaultLevel,
		"minimum level of messages to output: debug, info, warn, error, fatal or none, or Istio's scope:level,... list (the default or all scope applies)")
	fs.BoolVar(&f.asJSON, "log_as_json", false, "log as JSON instead of text")
	// Accepted so that Istio's arguments never stop a binary; see Unapplied.
	fs.StringArray("log_target", []string{"stdout"}, "accepted for compatibility (Skiff logs to stderr)")
	fs.String("log_stacktrace_level", "default:none", "accepted for compatibility")
	fs.String("log_caller", "", "accepted for compatibility")
	fs.String("log_rotate", "", "accepted for compatibility")
	fs.Int("log_rotate_max_age", 30, "accepted for compatibility")
	fs.Int("log_rotate_max_size", 104857600, "accepted for compatibility")
	fs.Int("log_rotate_max_backups", 1000, "accepted for compatibility")
	return f
}

// Level returns the slog level --log_output_level asks for. Istio's form is
// a comma-separated list of scope:level; Skiff has one scope, so the level
// of "all" wins, then that of "default" or of an entry without a scope.
func (f *Flags) Level() (slog.Level, error) {
	lvl, err := ParseLevel(f.outputLevel)
	if err != nil {
		return 0, fmt.Errorf("--log_output_level %q: %w", f.outputLevel, err)
	}
	return lvl, nil
}

// ParseLevel parses an Istio output level list (see Level).
func ParseLevel(s string) (slog.Level, error) {
	var chosen, all string
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		scope, level, scoped := strings.Cut(entry, ":")
		if !scoped {
			scope, level = "default", entry
		}
		if _, err := levelOf(level); err != nil {
			return 0, err
		}
		switch scope {
		case "all":
			all = level
		case "default":
			chosen = level
		}
	}
	if all != "" {
		chosen = all
	}
	if chosen == "" {
		return slog.LevelInfo, nil
	}
	return levelOf(chosen)
}

func levelOf(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	case "fatal":
		return slog.LevelError + 4, nil
	case "none":
		return LevelNone, nil
	}
	return 0, fmt.Errorf("level %q: want debug, info, warn, error, fatal or none", s)
}

// JSON reports whether --log_as_json was given.
func (f *Flags) JSON() bool { return f.asJSON }

// Handler returns the slog handler the flags ask for, writing to w.
func (f *Flags) Handler(w io.Writer) (slog.Handler, error) {
	lvl, err := f.Level()
	if err != nil {
		return nil, err
	}
	return NewHandler(w, lvl, f.asJSON), nil
}

// NewHandler returns a slog handler writing to w at level lvl, as JSON or
// as text, times in UTC.
func NewHandler(w io.Writer, lvl slog.Level, json bool) slog.Handler {
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: logtime.UTC}
	if json {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// Unapplied lists the logging flags given on the command line that Skiff
// accepts but does not act on, as "--name=value".
func (f *Flags) Unapplied() []string {
	var out []string
	f.fs.Visit(func(fl *pflag.Flag) {
		if strings.HasPrefix(fl.Name, "log_") && !slices.Contains(honoured, fl.Name) {
			out = append(out, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	return out
}
