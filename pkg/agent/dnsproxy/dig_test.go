package dnsproxy

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// dig runs the dig binary against the proxy and returns its output.
func dig(t *testing.T, server, port string, args ...string) string {
	t.Helper()
	bin := requireTool(t, "dig")
	out, err := exec.Command(bin, append([]string{"@" + server, "-p", port, "+time=3", "+tries=1"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestDig(t *testing.T) {
	up := startDnsmasq(t, dnsmasqRecords()...)
	s := startServer(t, testConfig(up.Addr), nil)
	for _, a := range s.Addrs() {
		server, port := a.Addr().String(), strconv.Itoa(int(a.Port()))
		for _, transport := range []string{"+notcp", "+tcp"} {
			t.Run(server+transport, func(t *testing.T) {
				for _, tc := range []struct {
					args []string
					want []string
				}{
					{[]string{"reviews.default.svc.cluster.local", "A", "+short"}, []string{"10.0.0.1"}},
					{[]string{"reviews", "AAAA", "+short"}, []string{"fd00::1"}},
					{[]string{"reviews.default.default.svc.cluster.local", "A", "+short"},
						[]string{"reviews.default.", "10.0.0.1"}},
					{[]string{"ext.test", "A", "+short"}, []string{"192.0.2.7"}},
					{[]string{"nope.test", "A"}, []string{"status: NXDOMAIN"}},
					{[]string{"api.example.com", "AAAA"}, []string{"status: NOERROR", "ANSWER: 0"}},
					// dig asks with a 1232-byte buffer: over UDP it gets TC
					// and retries over TCP by itself; either way the whole
					// 1.5 kB record arrives.
					{[]string{"big.test", "TXT", "+short"}, bigTXT},
				} {
					out := dig(t, server, port, append(tc.args, transport)...)
					for _, w := range tc.want {
						if !strings.Contains(out, w) {
							t.Errorf("dig %v: output lacks %q:\n%s", tc.args, w, out)
						}
					}
				}
			})
		}
	}
}
