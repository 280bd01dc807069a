package gen

import (
	"iter"
	"strings"

	"github.com/skiff-mesh/skiff/pkg/istiod/model"
)

// contestedNames are, per push, the host names (in lower case) that a
// virtual host may share with another, or hold twice. Only a host with one
// of them can lose a domain in dedupeDomains: its domains are its names
// (an IPv6 address in brackets, which no name holds). A shared host with
// none is passed over there, in every scope that takes it.
var contestedNames = model.NewMemo[struct{}, *claims]()

// contested returns pc's claims on host names.
func contested(pc *model.PushContext) *claims {
	return contestedNames.Get(pc, struct{}{}, func() *claims {
		c := newClaims(5 * len(pc.Services))
		for _, svc := range pc.Services {
			c.add(hostNames(svc, svc.Namespace)) // its own namespace sees the most names
		}
		c.seen = nil
		return c
	})
}

// claims finds the names claimed more than once.
type claims struct {
	seen      map[string]struct{}
	contested map[string]struct{}
}

// newClaims makes claims room for about n names.
func newClaims(n int) *claims {
	return &claims{seen: make(map[string]struct{}, n), contested: map[string]struct{}{}}
}

// add claims names.
func (c *claims) add(names iter.Seq[string]) {
	for n := range names {
		n = strings.ToLower(n)
		if _, ok := c.seen[n]; ok {
			c.contested[n] = struct{}{}
		}
		c.seen[n] = struct{}{}
	}
}

// alone reports whether none of names is contested.
func (c *claims) alone(names iter.Seq[string]) bool {
	for n := range names {
		if _, ok := c.contested[strings.ToLower(n)]; ok {
			return false
		}
	}
	return true
}
