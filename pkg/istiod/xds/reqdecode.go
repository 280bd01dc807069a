package xds

import (
	"errors"
	"fmt"
	"hash/maphash"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// decodeSlice decodes a request that arrived in several buffers (one per
// HTTP/2 data frame) without copying it into one: the resource names, most
// of a SotW ACK, are only hashed where they lie, and the buffers are kept
// (referenced) in case Names is called. The hash equals decode's.
func (r *rawRequest) decodeSlice(data mem.BufferSlice) error {
	cur := sliceCursor{bufs: make([][]byte, 0, len(data))}
	for _, b := range data {
		cur.bufs = append(cur.bufs, b.ReadOnlyData())
	}
	rest := make([]byte, 0, 256)
	var h maphash.Hash
	h.SetSeed(namesSeed)
	var scratch [2 * binary64Len]byte
	for !cur.done() {
		tag, ok := cur.varint()
		if !ok {
			return errTruncated
		}
		num, typ := protowire.DecodeTag(tag)
		if num <= 0 {
			return fmt.Errorf("decode discovery request: invalid field number %d", num)
		}
		switch typ {
		case protowire.VarintType:
			v, ok := cur.varint()
			if !ok {
				return errTruncated
			}
			rest = protowire.AppendVarint(protowire.AppendTag(rest, num, typ), v)
		case protowire.Fixed32Type, protowire.Fixed64Type:
			n := 4
			if typ == protowire.Fixed64Type {
				n = 8
			}
			rest = protowire.AppendTag(rest, num, typ)
			if !cur.take(n, func(b []byte) { rest = append(rest, b...) }) {
				return errTruncated
			}
		case protowire.BytesType:
			n, ok := cur.varint()
			if !ok || n > uint64(cur.remaining()) {
				return errTruncated
			}
			if num == 3 {
				head := protowire.AppendVarint(protowire.AppendTag(scratch[:0], num, typ), n)
				h.Write(head)
				cur.take(int(n), func(b []byte) { h.Write(b) })
				r.hasNames = true
				continue
			}
			rest = protowire.AppendVarint(protowire.AppendTag(rest, num, typ), n)
			cur.take(int(n), func(b []byte) { rest = append(rest, b...) })
		default:
			return fmt.Errorf("decode discovery request: unsupported wire type %d of field %d", typ, num)
		}
	}
	r.namesHash = h.Sum64()
	if r.hasNames {
		data.Ref()
		r.frames = data
	}
	if err := proto.Unmarshal(rest, &r.req); err != nil {
		return fmt.Errorf("decode discovery request: %w", err)
	}
	return nil
}

// binary64Len is the longest varint.
const binary64Len = 10

var errTruncated = errors.New("decode discovery request: truncated message")

// encodedNames returns the encoded resource_names fields, copying them out
// of the frames decodeSlice kept.
func (r *rawRequest) encodedNames() []byte {
	if r.names == nil && r.frames != nil {
		var tmp rawRequest
		if err := tmp.decode(r.frames.Materialize()); err == nil {
			r.names = tmp.names
		}
	}
	return r.names
}

// sliceCursor reads a message spread over several byte slices.
type sliceCursor struct {
	bufs [][]byte
}

func (c *sliceCursor) done() bool {
	for len(c.bufs) > 0 && len(c.bufs[0]) == 0 {
		c.bufs = c.bufs[1:]
	}
	return len(c.bufs) == 0
}

func (c *sliceCursor) remaining() int {
	n := 0
	for _, b := range c.bufs {
		n += len(b)
	}
	return n
}

func (c *sliceCursor) varint() (uint64, bool) {
	var v uint64
	for i := 0; i < binary64Len; i++ {
		if c.done() {
			return 0, false
		}
		b := c.bufs[0][0]
		c.bufs[0] = c.bufs[0][1:]
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, true
		}
	}
	return 0, false
}

// take passes the next n bytes to f, in pieces; false if fewer remain.
func (c *sliceCursor) take(n int, f func([]byte)) bool {
	for n > 0 {
		if c.done() {
			return false
		}
		k := min(n, len(c.bufs[0]))
		f(c.bufs[0][:k])
		c.bufs[0] = c.bufs[0][k:]
		n -= k
	}
	return true
}
