// Package memory keeps a Go process's heap near what it holds, for the
// agent and istiod: it sets a soft memory limit from the container's
// memory limit when the user set none (as Istio's binaries do through
// automemlimit), a binary's own GC percent when the user set no GOGC, and
// returns the heap the runtime grew while a big update was built (the
// agent's NameTable and cluster list, istiod's pushes) once the update is
// in place, since an idle process runs no GC that would otherwise give it
// back.
package memory

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
)

// limitRatio is the share of the container's limit given to the Go heap,
// as automemlimit (which Istio's agent links) gives it: the rest is left
// for what the runtime does not count (binary pages, thread stacks).
const limitRatio = 0.9

// Plan is what the agent does about its heap.
type Plan struct {
	// Limit is the soft memory limit to set (debug.SetMemoryLimit); 0
	// leaves the runtime's (GOMEMLIMIT's, or none).
	Limit int64
	// GCPercent is the GC percent to set (debug.SetGCPercent); 0 leaves
	// the runtime's (GOGC's, or 100).
	GCPercent int
	// Release returns the heap to the OS after big updates.
	Release bool
	// Reason says why, for the log.
	Reason string
}

// Defaults are a binary's own settings, applied where the user set none.
type Defaults struct {
	// GCPercent replaces the runtime's 100 when GOGC is unset (0: keep
	// 100). A lower one collects more often while a burst of garbage is
	// made, so the heap spans it grows are fewer and what outlives the
	// burst is packed into fewer of them.
	GCPercent int
}

// PlanFor decides from the environment ("K=V" entries), the cgroup's
// memory limit in bytes (0: none) and the binary's defaults. A GOMEMLIMIT
// or GOGC the user set is never overridden: the runtime has applied them
// already. GOGC=off turns the release off too, since it asks for no
// collections.
func PlanFor(environ []string, cgroupLimit int64, d Defaults) Plan {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v // the last one wins, as in os.Getenv
		}
	}
	var p Plan
	var why []string
	switch memLimit := env["GOMEMLIMIT"]; {
	case memLimit != "": // empty is unset, to the runtime too
		why = append(why, fmt.Sprintf("GOMEMLIMIT=%s set by the user", memLimit))
	case cgroupLimit > 0:
		p.Limit = int64(math.Floor(float64(cgroupLimit) * limitRatio))
		why = append(why, fmt.Sprintf("soft limit %d bytes: %.0f%% of the cgroup's %d", p.Limit, limitRatio*100, cgroupLimit))
	default:
		why = append(why, "no cgroup memory limit, no GOMEMLIMIT")
	}
	switch gogc := env["GOGC"]; {
	case gogc == "off": // as the runtime reads it: exactly "off"
		why = append(why, "GOGC=off: no release after updates")
	case gogc != "":
		why = append(why, fmt.Sprintf("GOGC=%s set by the user", gogc))
	case d.GCPercent > 0:
		p.GCPercent = d.GCPercent
		why = append(why, fmt.Sprintf("GC percent %d, this binary's default", d.GCPercent))
	}
	p.Release = env["GOGC"] != "off"
	p.Reason = strings.Join(why, "; ")
	return p
}

// Apply applies PlanFor to this process: the soft memory limit from its
// container's limit (read under /), unless the user set GOMEMLIMIT, and
// d's GC percent, unless the user set GOGC. It logs what it decided and
// returns the plan.
func Apply(environ []string, d Defaults, log *slog.Logger) Plan {
	limit, err := CgroupLimit(os.DirFS("/"))
	if err != nil {
		log.Warn("container memory limit not read; no soft memory limit set", "err", err)
	}
	plan := PlanFor(environ, limit, d)
	if plan.Limit > 0 {
		debug.SetMemoryLimit(plan.Limit)
	}
	if plan.GCPercent > 0 {
		debug.SetGCPercent(plan.GCPercent)
	}
	log.Info("Go heap", "memory_limit_bytes", plan.Limit, "gc_percent", plan.GCPercent, "release_after_updates", plan.Release, "why", plan.Reason)
	return plan
}
