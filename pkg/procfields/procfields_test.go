package procfields

import (
	"maps"
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	got := Parse("Name:\tistiod\nVmRSS:\t  137508 kB\nRssAnon:\t  113680 kB\nThreads:\t12\nCpus_allowed_list:\t0-1\n\nbad line\n")
	want := map[string]int{"VmRSS": 137508, "RssAnon": 113680, "Threads": 12}
	if !maps.Equal(got, want) {
		t.Errorf("Parse = %v, want %v", got, want)
	}
}

func TestReadSelf(t *testing.T) {
	m, err := Read("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	if m["VmRSS"] <= 0 || m["Threads"] <= 0 {
		t.Errorf("/proc/self/status: VmRSS %d kB, Threads %d", m["VmRSS"], m["Threads"])
	}
	if _, err := Read("/proc/self/no-such-file"); !os.IsNotExist(err) {
		t.Errorf("missing file: %v", err)
	}
}
