package spiffe

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    ID
		wantErr string
	}{
		{in: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage", want: ID{"cluster.local", "default", "bookinfo-productpage"}},
		{in: "spiffe://example.org/ns/a_b/sa/A.b-c", want: ID{"example.org", "a_b", "A.b-c"}},
		{in: "", wantErr: "empty"},
		{in: "http://cluster.local/ns/a/sa/b", wantErr: `scheme "http" is not "spiffe"`},
		{in: "cluster.local/ns/a/sa/b", wantErr: "does not start with spiffe://"},
		{in: "spiffe:///ns/a/sa/b", wantErr: "trust domain is empty"},
		{in: "spiffe://Cluster.local/ns/a/sa/b", wantErr: `has character 'C'`},
		{in: "spiffe://cluster.local:8080/ns/a/sa/b", wantErr: `has character ':'`},
		{in: "spiffe://user@cluster.local/ns/a/sa/b", wantErr: `has character '@'`},
		{in: "spiffe://cluster.local", wantErr: `path "/" is not /ns/<namespace>/sa/<service-account>`},
		{in: "spiffe://cluster.local/ns/a", wantErr: "is not /ns/"},
		{in: "spiffe://cluster.local/ns/a/sa/b/c", wantErr: "is not /ns/"},
		{in: "spiffe://cluster.local/sa/a/ns/b", wantErr: "is not /ns/"},
		{in: "spiffe://cluster.local/ns//sa/b", wantErr: "namespace is empty"},
		{in: "spiffe://cluster.local/ns/a/sa/", wantErr: "service account is empty"},
		{in: "spiffe://cluster.local/ns/../sa/b", wantErr: "relative path segment"},
		{in: "spiffe://cluster.local/ns/a%2Fb/sa/b", wantErr: `namespace "a%2Fb" has character '%'`},
		{in: "spiffe://cluster.local/ns/a/sa/b?x=1", wantErr: "query and fragment"},
		{in: "spiffe://cluster.local/ns/a/sa/b#f", wantErr: "query and fragment"},
		{in: "spiffe://" + strings.Repeat("a", 300) + "/ns/a/sa/b", wantErr: "longer than 255"},
		{in: "spiffe://cluster.local/ns/a/sa/" + strings.Repeat("b", 2100), wantErr: "longer than 2048"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
			if got.URL().String() != tt.in {
				t.Errorf("URL() = %q, want %q", got.URL(), tt.in)
			}
		})
	}
}

func TestNew(t *testing.T) {
	id, err := New("cluster.local", "ns1", "sa1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := id.String(), "spiffe://cluster.local/ns/ns1/sa/sa1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if _, err := New("cluster.local", "ns/x", "sa"); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Errorf("New with a slash in the namespace: error = %v", err)
	}
	if _, err := New("", "ns", "sa"); err == nil {
		t.Error("New with an empty trust domain succeeded")
	}
	u, _ := url.Parse("spiffe://td/ns/a/sa/b")
	if id, err := FromURL(u); err != nil || id != (ID{"td", "a", "b"}) {
		t.Errorf("FromURL = %v, %v", id, err)
	}
	if _, err := FromURL(nil); err == nil {
		t.Error("FromURL(nil) succeeded")
	}
}

// FuzzParse checks that Parse never panics and that what it accepts formats
// back to the same text and validates.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"spiffe://cluster.local/ns/default/sa/default",
		"spiffe://td/ns/a/sa/b/c",
		"spiffe://td/ns/./sa/b",
		"spiffe://TD/ns/a/sa/b",
		"spiffe://td:1/ns/a/sa/b?q",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, id.String())
		}
		if err := id.Validate(); err != nil {
			t.Fatalf("parsed ID does not validate: %v", err)
		}
		back, err := FromURL(id.URL())
		if err != nil || back != id {
			t.Fatalf("URL round trip: %v, %v", back, err)
		}
	})
}
