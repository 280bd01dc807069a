package cluster

import (
	"slices"
	"testing"
	"time"
)

// Lines as containerd's CRI service logs them (logrus text format).
const containerdLog = `time="2026-12-06T16:01:02.100000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:burst1-5-0,Uid:u0,Namespace:plain,Attempt:0,}"
time="2026-12-06T16:01:02.200000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:burst1-5-1,Uid:u1,Namespace:plain,Attempt:0,}"
time="2026-12-06T16:01:02.300000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:burst1-5-0,Uid:u0,Namespace:plain,Attempt:0,} returns sandbox id \"aa01\""
time="2026-12-06T16:01:02.450000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:burst1-5-1,Uid:u1,Namespace:plain,Attempt:0,} returns sandbox id \"bb02\""
time="2026-12-06T16:01:02.500000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:other-1,Uid:u2,Namespace:plain,Attempt:0,} returns sandbox id \"cc03\""
time="2026-12-06T16:01:09.000000000Z" level=info msg="StopPodSandbox for \"aa01\""
time="2026-12-06T16:01:09.100000000Z" level=info msg="StopPodSandbox for \"aa01\" returns successfully"
`

func TestSandboxesFromContainerdLog(t *testing.T) {
	if n := sandboxesRunning(containerdLog, "burst1-5-"); n != 1 {
		t.Errorf("sandboxes running = %d, want 1 (bb02)", n)
	}
	if n := sandboxesRunning(containerdLog+`time="2026-12-06T16:01:09.200000000Z" level=info msg="StopPodSandbox for \"bb02\" returns successfully"`, "burst1-5-"); n != 0 {
		t.Errorf("sandboxes running after both stops = %d, want 0", n)
	}
	got := sandboxTimes(containerdLog, "burst1-5-")
	want := []time.Duration{200 * time.Millisecond, 250 * time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("sandbox times = %v, want %v", got, want)
	}
}
