package status

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"time"
)

// mountProfiling serves Go's profiles under /debug/pprof/ on the paths
// net/http/pprof uses (as Istio's agent does with --profiling, on by
// default): the index, each named profile (heap, goroutine, allocs, ...
// with ?debug=N, and ?gc=1 for heap), cmdline, profile (CPU, ?seconds=N),
// symbol and trace; only to requests from loopback. They are written here
// on runtime/pprof rather than taken from net/http/pprof, whose delta
// profiles (?seconds= on a named profile) link half a megabyte more.
func mountProfiling(mux *http.ServeMux) {
	mux.Handle("/debug/pprof/", localOnly(http.HandlerFunc(pprofNamed)))
	mux.Handle("/debug/pprof/cmdline", localOnly(http.HandlerFunc(pprofCmdline)))
	mux.Handle("/debug/pprof/profile", localOnly(recording("profile", 30*time.Second, pprof.StartCPUProfile, pprof.StopCPUProfile)))
	mux.Handle("/debug/pprof/symbol", localOnly(http.HandlerFunc(pprofSymbol)))
	mux.Handle("/debug/pprof/trace", localOnly(recording("trace", time.Second, trace.Start, trace.Stop)))
}

// localOnly refuses requests whose peer is not a loopback address.
func localOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(r) {
			http.Error(w, "only from localhost", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func fromLoopback(r *http.Request) bool {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pprofNamed serves /debug/pprof/NAME, or the index for /debug/pprof/.
func pprofNamed(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	if name == "" {
		pprofIndex(w)
		return
	}
	p := pprof.Lookup(name)
	if p == nil {
		http.Error(w, "no such profile: "+name, http.StatusNotFound)
		return
	}
	if r.FormValue("seconds") != "" {
		http.Error(w, "delta profiles (seconds=) are not served; take two profiles and compare them with go tool pprof -diff_base", http.StatusBadRequest)
		return
	}
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	if name == "heap" && r.FormValue("gc") != "" {
		runtime.GC()
	}
	if debug != 0 {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	if err := p.WriteTo(w, debug); err != nil {
		http.Error(w, "write profile: "+err.Error(), http.StatusInternalServerError)
	}
}

// pprofIndex lists the profiles with their counts, as plain text.
func pprofIndex(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	ps := pprof.Profiles()
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name() < ps[j].Name() })
	fmt.Fprintln(w, "profiles (GET /debug/pprof/NAME, ?debug=1 for text):")
	for _, p := range ps {
		fmt.Fprintf(w, "%8d %s\n", p.Count(), p.Name())
	}
	fmt.Fprintln(w, "also: cmdline, profile (CPU, ?seconds=30), symbol, trace (?seconds=1)")
}

func pprofCmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(os.Args, "\x00"))
}

// seconds reads ?seconds=, def when absent; ok is false (and the error
// written) when it is not a positive number.
func seconds(w http.ResponseWriter, r *http.Request, def time.Duration) (time.Duration, bool) {
	s := r.FormValue("seconds")
	if s == "" {
		return def, true
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		http.Error(w, "seconds="+s+": not a positive number", http.StatusBadRequest)
		return 0, false
	}
	return time.Duration(n * float64(time.Second)), true
}

// wait waits d or until the client goes away.
func wait(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// recording serves a profile recorded for the request's seconds (def when
// not given): start writes it to the reply until stop.
func recording(file string, def time.Duration, start func(io.Writer) error, stop func()) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d, ok := seconds(w, r, def)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="`+file+`"`)
		if err := start(w); err != nil {
			http.Error(w, file+": "+err.Error(), http.StatusInternalServerError)
			return
		}
		wait(r, d)
		stop()
	}
}

// pprofSymbol answers pprof's symbol lookups: GET says symbols are there;
// POST (or GET with a query) takes "0xADDR+0xADDR..." and returns one
// "0xADDR NAME" line per address it knows.
func pprofSymbol(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var in []byte
	if r.Method == http.MethodPost {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(http.MaxBytesReader(w, r.Body, 1<<20))
		in = buf.Bytes()
	} else {
		in = []byte(r.URL.RawQuery)
	}
	var out bytes.Buffer
	fmt.Fprintln(&out, "num_symbols: 1")
	sc := bufio.NewScanner(bytes.NewReader(in))
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, '+'); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		pc, err := strconv.ParseUint(strings.TrimSpace(sc.Text()), 0, 64)
		if err != nil {
			continue
		}
		if f := runtime.FuncForPC(uintptr(pc)); f != nil {
			fmt.Fprintf(&out, "%#x %s\n", pc, f.Name())
		}
	}
	_, _ = w.Write(out.Bytes())
}
