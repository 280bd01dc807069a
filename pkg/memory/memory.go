// Package memory keeps a Go process's heap near what it holds, for the
// agent and istiod: it sets a soft memory limit from the container's
// memory limit when the user set none (as Istio's binaries do through
// automemlimit), and returns the heap the runtime grew while a big update
// was built (the agent's NameTable and cluster list, istiod's pushes) once
// the update is in place, since an idle process runs no GC that would
// otherwise give it back.
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
	// Release returns the heap to the OS after big updates.
	Release bool
	// Reason says why, for the log.
	Reason string
}

// PlanFor decides from the environment ("K=V" entries) and the cgroup's
// memory limit in bytes (0: none). A GOMEMLIMIT or GOGC the user set is
// never overridden: the runtime has applied them already. GOGC=off turns
// the release off too, since it asks for no collections.
func PlanFor(environ []string, cgroupLimit int64) Plan {
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
	if env["GOGC"] == "off" { // as the runtime reads it: exactly "off"
		why = append(why, "GOGC=off: no release after updates")
	} else {
		p.Release = true
	}
	p.Reason = strings.Join(why, "; ")
	return p
}

// Apply applies PlanFor to this process: the soft memory limit from its
// container's limit (read under /), unless the user set GOMEMLIMIT. It
// logs what it decided and returns the plan.
func Apply(environ []string, log *slog.Logger) Plan {
	limit, err := CgroupLimit(os.DirFS("/"))
	if err != nil {
		log.Warn("container memory limit not read; no soft memory limit set", "err", err)
	}
	plan := PlanFor(environ, limit)
	if plan.Limit > 0 {
		debug.SetMemoryLimit(plan.Limit)
	}
	log.Info("Go heap", "memory_limit_bytes", plan.Limit, "release_after_updates", plan.Release, "why", plan.Reason)
	return plan
}
