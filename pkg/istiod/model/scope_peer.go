package model

import (
	"hash/maphash"
	"slices"
	"sync"
)

// Peer returns the scope of the push context that sees the same services
// as s (the very same, in the same order), built first: s itself, or one
// whose namespace differs. What is built from the visible services alone
// (the name table) is built once for all the peers: every namespace of a
// mesh without Sidecars sees every service.
func (s *Scope) Peer() *Scope { return s.peer }

// peerBuckets files the scopes of a push context by their services.
var peerBuckets = NewMemo[uint64, *peerBucket]()

type peerBucket struct {
	mu     sync.Mutex
	scopes []*Scope
}

var peerSeed = maphash.MakeSeed()

// peerOf returns the first scope filed with s's services, filing s if it
// is the first.
func (pc *PushContext) peerOf(s *Scope) *Scope {
	var h maphash.Hash
	h.SetSeed(peerSeed)
	for _, svc := range s.Services {
		h.WriteString(svc.Hostname)
	}
	b := peerBuckets.Get(pc, h.Sum64(), func() *peerBucket { return &peerBucket{} })
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range b.scopes {
		if slices.Equal(o.Services, s.Services) {
			return o
		}
	}
	b.scopes = append(b.scopes, s)
	return s
}
