package memory

import (
	"testing"
	"testing/fstest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPlanFor(t *testing.T) {
	const gib = 1 << 30
	istiod := Defaults{GCPercent: 25}
	for _, c := range []struct {
		name        string
		env         []string
		cgroup      int64
		d           Defaults
		wantLimit   int64
		wantGC      int
		wantRelease bool
	}{
		{"no limit anywhere", nil, 0, Defaults{}, 0, 0, true},
		{"container limit: 90% of it", nil, gib, Defaults{}, 966367641, 0, true},
		{"the user's GOMEMLIMIT wins", []string{"GOMEMLIMIT=200MiB"}, gib, Defaults{}, 0, 0, true},
		{"GOMEMLIMIT=off is the user's too", []string{"GOMEMLIMIT=off"}, gib, Defaults{}, 0, 0, true},
		{"an empty GOMEMLIMIT is unset, as to the runtime", []string{"GOMEMLIMIT="}, gib, Defaults{}, 966367641, 0, true},
		{"GOGC is left and releases go on", []string{"GOGC=50"}, gib, Defaults{}, 966367641, 0, true},
		{"GOGC=off: no releases", []string{"GOGC=off"}, 0, Defaults{}, 0, 0, false},
		{"GOGC=OFF is not off to the runtime", []string{"GOGC=OFF"}, gib, Defaults{}, 966367641, 0, true},
		{"the last entry wins", []string{"GOGC=off", "GOGC=100"}, 0, Defaults{}, 0, 0, true},
		{"other variables do not count", []string{"XGOMEMLIMIT=1", "GOGCX=off"}, 0, Defaults{}, 0, 0, true},
		{"the binary's GC percent without GOGC", nil, gib, istiod, 966367641, 25, true},
		{"the user's GOGC wins over the binary's", []string{"GOGC=100"}, 0, istiod, 0, 0, true},
		{"GOGC=off wins too", []string{"GOGC=off"}, 0, istiod, 0, 0, false},
		{"an empty GOGC is unset, as to the runtime", []string{"GOGC="}, 0, istiod, 0, 25, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := PlanFor(c.env, c.cgroup, c.d)
			if p.Limit != c.wantLimit || p.GCPercent != c.wantGC || p.Release != c.wantRelease || p.Reason == "" {
				t.Errorf("PlanFor(%q, %d, %+v) = %+v, want limit %d, GC percent %d, release %v", c.env, c.cgroup, c.d, p, c.wantLimit, c.wantGC, c.wantRelease)
			}
		})
	}
}

func TestCgroupLimit(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, c := range []struct {
		name string
		fs   fstest.MapFS
		want int64
	}{
		{"v2 in a cgroup namespace", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("268435456\n"),
		}, 268435456},
		{"v2 unlimited", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("max\n"),
		}, 0},
		{"v2 nested: the smallest of the path", fstest.MapFS{
			"proc/self/cgroup":                           file("0::/kubepods/pod1/ctr\n"),
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": file("max\n"),
			"sys/fs/cgroup/kubepods/pod1/memory.max":     file("134217728\n"),
			"sys/fs/cgroup/kubepods/memory.max":          file("1073741824\n"),
		}, 134217728},
		{"v1 with a limit", fstest.MapFS{
			"proc/self/cgroup": file("5:cpu,cpuacct:/x\n4:memory:/kubepods/ctr\n0::/\n"),
			"sys/fs/cgroup/memory/kubepods/ctr/memory.limit_in_bytes": file("536870912\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":              file("9223372036854771712\n"),
		}, 536870912},
		{"v1 host path not mounted: the container's root", fstest.MapFS{
			"proc/self/cgroup":                           file("4:memory:/kubepods/ctr\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("104857600\n"),
		}, 104857600},
		{"v1 unlimited", fstest.MapFS{
			"proc/self/cgroup":                           file("4:memory:/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}, 0},
		{"no memory controller", fstest.MapFS{
			"proc/self/cgroup": file("3:cpu:/\n"),
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := CgroupLimit(c.fs)
			if err != nil || got != c.want {
				t.Errorf("CgroupLimit = %d, %v; want %d", got, err, c.want)
			}
		})
	}
	bad := fstest.MapFS{"proc/self/cgroup": file("0::/\n"), "sys/fs/cgroup/memory.max": file("lots\n")}
	if _, err := CgroupLimit(bad); err == nil {
		t.Error("a limit that is no number: no error")
	}
	if _, err := CgroupLimit(fstest.MapFS{}); err == nil {
		t.Error("no /proc/self/cgroup: no error")
	}
}
