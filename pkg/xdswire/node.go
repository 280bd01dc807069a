package xdswire

// Node is the part of an envoy.config.core.v3.Node the agent sends: its
// identity and metadata.
type Node struct {
	// ID is id (field 1).
	ID string
	// Cluster is cluster (field 2).
	Cluster string
	// Metadata is metadata (field 3), a google.protobuf.Struct, written only
	// if non-nil. Its values may be nil (null), string, bool, float64 or any
	// other Go integer or float type (all numbers are float64 on the wire),
	// map[string]any, map[string]string, []any or []string, nested at most
	// 100 deep. These are the types encoding/json decodes into, so decoded
	// JSON can be used as is.
	Metadata map[string]any
}

// MarshalNode encodes n, its fields in field-number order and the metadata
// keys sorted, so the output is deterministic. It returns an error naming the
// key if a metadata value has an unsupported type or nests too deep.
func MarshalNode(n *Node) ([]byte, error) {
	b := appendString(nil, 1, n.ID)
	b = appendString(b, 2, n.Cluster)
	if n.Metadata == nil {
		return b, nil
	}
	var err error
	b = appendMessage(b, 3, func(b []byte) []byte {
		b, err = appendStruct(b, n.Metadata, "Node.metadata", 0)
		return b
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Marshal is [MarshalNode] for metadata known to be valid, such as decoded
// JSON: it panics if MarshalNode returns an error.
func (n *Node) Marshal() []byte {
	b, err := MarshalNode(n)
	if err != nil {
		panic(err)
	}
	return b
}

// NodeID returns the id of the encoded Node b, as found by [FieldString].
func NodeID(b []byte) (string, error) {
	id, _, err := FieldString(b, 1)
	return id, err
}
