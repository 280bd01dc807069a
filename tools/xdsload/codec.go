package main

import (
	"fmt"
	"io"
	"unique"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// rawCodec marshals requests with protobuf and scans responses in the
// frames they arrived in: a full push is 1.3 MB per client, and copying it
// into one buffer first (what gRPC does for a []byte codec) was garbage and
// CPU of the load generator, on the cores istiod runs on.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if b, ok := v.(encoded); ok {
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// encoded is a request already marshaled (so its size is known).
type encoded []byte

// Unmarshal reads a rawResponse's fields, skipping the resources; with
// r.track (delta responses), each resource's name and version and the
// removed names too.
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r := v.(*rawResponse)
	r.size = data.Len()
	s := scanner{bufs: data}
	for !s.done() {
		tag, err := s.varint()
		if err != nil {
			return err
		}
		num, typ := protowire.DecodeTag(tag)
		switch typ {
		case protowire.BytesType:
			n, err := s.varint()
			if err != nil {
				return err
			}
			switch {
			case r.track && num == 2: // DeltaDiscoveryResponse.resources
				h, err := scanResource(&s, int(n))
				if err != nil {
					return err
				}
				r.held = append(r.held, h)
				continue
			case r.track && num == 6: // removed_resources
				b, err := s.bytes(int(n))
				if err != nil {
					return err
				}
				r.removed = append(r.removed, unique.Make(string(b)))
				continue
			}
			switch num {
			case 1, 4, 5:
				b, err := s.bytes(int(n))
				if err != nil {
					return err
				}
				switch num {
				case 1:
					r.version = string(b)
				case 4:
					r.typeURL = string(b)
				case 5:
					r.nonce = string(b)
				}
			default:
				if err := s.skip(int(n)); err != nil {
					return err
				}
			}
		default:
			if err := s.skipScalar(num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}

// heldResource is a delta resource's name and version, interned: every
// client holds most of the same ones.
type heldResource struct{ name, version unique.Handle[string] }

// empty is the interned "" (a zero Handle has no value).
var empty = unique.Make("")

// scanResource reads the name (3) and version (1) of the Resource in the
// next n bytes of s, skipping its body.
func scanResource(s *scanner, n int) (heldResource, error) {
	h := heldResource{name: empty, version: empty} // either may be absent
	end := s.pos + n
	for s.pos < end {
		tag, err := s.varint()
		if err != nil {
			return h, err
		}
		num, typ := protowire.DecodeTag(tag)
		if typ != protowire.BytesType {
			if err := s.skipScalar(num, typ); err != nil {
				return h, fmt.Errorf("resource: %w", err)
			}
			continue
		}
		l, err := s.varint()
		if err != nil {
			return h, err
		}
		if num != 1 && num != 3 {
			if err := s.skip(int(l)); err != nil {
				return h, err
			}
			continue
		}
		b, err := s.bytes(int(l))
		if err != nil {
			return h, err
		}
		if num == 1 {
			h.version = unique.Make(string(b))
		} else {
			h.name = unique.Make(string(b))
		}
	}
	if s.pos != end {
		return h, fmt.Errorf("resource overruns its length")
	}
	return h, nil
}

// scanner reads a message spread over buffers without joining them.
type scanner struct {
	bufs mem.BufferSlice
	i    int // the buffer being read
	off  int // the offset in it
	pos  int // bytes read so far
}

// next moves past exhausted buffers; it reports whether data is left.
func (s *scanner) next() bool {
	for s.i < len(s.bufs) && s.off == s.bufs[s.i].Len() {
		s.i, s.off = s.i+1, 0
	}
	return s.i < len(s.bufs)
}

func (s *scanner) done() bool { return !s.next() }

func (s *scanner) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if !s.next() {
			return 0, io.ErrUnexpectedEOF
		}
		b := s.bufs[s.i].ReadOnlyData()[s.off]
		s.off++
		s.pos++
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("varint overflows 64 bits")
}

// skipScalar skips the value of field num, of a wire type other than
// bytes.
func (s *scanner) skipScalar(num protowire.Number, typ protowire.Type) error {
	switch typ {
	case protowire.VarintType:
		_, err := s.varint()
		return err
	case protowire.Fixed32Type:
		return s.skip(4)
	case protowire.Fixed64Type:
		return s.skip(8)
	}
	return fmt.Errorf("field %d: unexpected wire type %d", num, typ)
}

func (s *scanner) skip(n int) error {
	for n > 0 {
		if !s.next() {
			return io.ErrUnexpectedEOF
		}
		k := min(n, s.bufs[s.i].Len()-s.off)
		s.off += k
		s.pos += k
		n -= k
	}
	return nil
}

func (s *scanner) bytes(n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for len(out) < n {
		if !s.next() {
			return nil, io.ErrUnexpectedEOF
		}
		d := s.bufs[s.i].ReadOnlyData()[s.off:]
		k := min(n-len(out), len(d))
		out = append(out, d[:k]...)
		s.off += k
		s.pos += k
	}
	return out, nil
}
