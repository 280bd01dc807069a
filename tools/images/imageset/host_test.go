package imageset

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLDD(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []string
		err       string
	}{
		{"dynamic", `	linux-vdso.so.1 (0x00007ffd)
	libxtables.so.12 => /lib/x86_64-linux-gnu/libxtables.so.12 (0x00007fde)
	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fde)
	/lib64/ld-linux-x86-64.so.2 (0x00007fde)
`, []string{"/lib/x86_64-linux-gnu/libxtables.so.12", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}, ""},
		{"static", "\tstatically linked\n", nil, ""},
		{"missing", "\tlibnope.so.1 => not found\n", nil, "libnope.so.1 not found"},
		{"garbage", "\twhat is this\n", nil, "unexpected line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseLDD(tc.out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
