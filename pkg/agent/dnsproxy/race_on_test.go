//go:build race

package dnsproxy

// raceEnabled: the race detector's instrumentation allocates, so tests
// that count allocations skip the count.
const raceEnabled = true
