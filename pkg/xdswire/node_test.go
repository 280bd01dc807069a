package xdswire_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/skiff-mesh/skiff/pkg/xdswire"
)

func TestNode(t *testing.T) {
	var fromJSON map[string]any
	if err := json.Unmarshal([]byte(`{"a":[1,"x",null,true,{"b":[]}],"c":{},"d":-0.5}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		md   map[string]any // as given to Node
		want map[string]any // as given to structpb.NewStruct; nil means md
	}{
		"no metadata": {},
		"empty":       {md: map[string]any{}},
		"scalars": {md: map[string]any{
			"s": "v", "empty": "", "t": true, "f": false, "null": nil,
			"pi": math.Pi, "zero": 0.0, "neg": -1e300, "inf": math.Inf(1),
		}},
		"integers": {
			md:   map[string]any{"int": 3, "i32": int32(-4), "i64": int64(1) << 53, "u32": uint32(7), "u8": uint8(8), "f32": float32(0.5)},
			want: map[string]any{"int": 3.0, "i32": -4.0, "i64": float64(1 << 53), "u32": 7.0, "u8": 8.0, "f32": 0.5},
		},
		"unicode keys": {md: map[string]any{"ключ": "значение", "键": "值", "": "empty key", "😀": 1.0}},
		"nested": {md: map[string]any{
			"LABELS": map[string]any{"app": "x", "deep": map[string]any{"deeper": map[string]any{"l": []any{}}}},
			"list":   []any{1.0, "two", nil, false, []any{[]any{"in"}}, map[string]any{"k": "v"}},
			"empty":  map[string]any{},
		}},
		"string shapes": {
			md:   map[string]any{"ss": []string{"a", ""}, "ms": map[string]string{"b": "1", "a": ""}},
			want: map[string]any{"ss": []any{"a", ""}, "ms": map[string]any{"b": "1", "a": ""}},
		},
		"decoded JSON": {md: fromJSON},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			n := &xdswire.Node{ID: "sidecar~1.2.3.4~p.ns~ns.svc.cluster.local", Cluster: "p.ns", Metadata: tt.md}
			want := &corev3.Node{Id: n.ID, Cluster: n.Cluster}
			if tt.md != nil {
				src := tt.want
				if src == nil {
					src = tt.md
				}
				s, err := structpb.NewStruct(src)
				if err != nil {
					t.Fatal(err)
				}
				want.Metadata = s
			}
			b, err := xdswire.MarshalNode(n)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, n.Marshal()) {
				t.Error("Marshal and MarshalNode differ")
			}
			got := &corev3.Node{}
			if err := proto.Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("marshaled\n%v\nwant\n%v", got, want)
			}
			if wantb := marshal(t, want); !bytes.Equal(b, wantb) {
				t.Errorf("marshaled %x\nwant      %x", b, wantb)
			}
			id, err := xdswire.NodeID(b)
			if err != nil || id != n.ID {
				t.Errorf("NodeID = %q, %v; want %q", id, err, n.ID)
			}
		})
	}
}

func TestNodeErrors(t *testing.T) {
	loop := map[string]any{}
	loop["self"] = loop
	tests := map[string]struct {
		md   map[string]any
		want string
	}{
		"unsupported":        {map[string]any{"a": map[string]any{"b": []any{struct{}{}}}}, "Node.metadata.a.b[0]: unsupported type struct {}"},
		"unsupported top":    {map[string]any{"ch": make(chan int)}, "Node.metadata.ch: unsupported type chan int"},
		"bytes not accepted": {map[string]any{"b": []byte("x")}, "unsupported type []uint8"},
		"cycle":              {loop, "nested deeper than 100"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			n := &xdswire.Node{ID: "x", Metadata: tt.md}
			b, err := xdswire.MarshalNode(n)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("MarshalNode = %x, %v; want error containing %q", b, err, tt.want)
			}
			defer func() {
				if r := recover(); r == nil {
					t.Error("Marshal did not panic")
				}
			}()
			n.Marshal()
		})
	}
}

// TestNodeLongMetadata checks lengths that need more than one varint byte at
// every level of nesting.
func TestNodeLongMetadata(t *testing.T) {
	md := map[string]any{}
	for i := range 300 {
		md[strings.Repeat("k", i+1)] = map[string]any{"v": strings.Repeat("v", 200*i)}
	}
	s, err := structpb.NewStruct(md)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev3.Node{Id: "x", Metadata: s}
	b := (&xdswire.Node{ID: "x", Metadata: md}).Marshal()
	if !bytes.Equal(b, marshal(t, want)) {
		t.Error("marshaled bytes differ from the generated encoding")
	}
}
