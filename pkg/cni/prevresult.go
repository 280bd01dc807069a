package cni

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"
)

// prevResult is the result of the plugins before this one, which a chained
// plugin that changes nothing passes on. When it is already in the
// configuration's version (0.3.0 or later, as libcni hands it), it is kept
// as its bytes and only the pod's addresses are read from it; decoding it
// into the library's types and encoding it again took 11% of the
// instructions of an ADD (callgrind). Its other fields are not checked:
// libcni hands on the previous plugin's result as it parsed it. A result in
// another version is converted by the library, as before.
type prevResult struct {
	raw   json.RawMessage // printed as is, when typed is nil
	typed types.Result    // the library's, when it converts
	addrs []netip.Addr    // the pod's addresses, in the chain's order
}

// parsePrevResult reads raw for a configuration at confVersion; a nil raw
// gives a nil result.
func parsePrevResult(raw json.RawMessage, confVersion string) (*prevResult, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	var head struct {
		CNIVersion string `json:"cniVersion"`
		IPs        []struct {
			Address *string `json:"address"` // nil without one, which the library lets pass
		} `json:"ips"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	if modern, _ := version.GreaterThanOrEqualTo(confVersion, "0.3.0"); modern && head.CNIVersion == confVersion {
		r := &prevResult{raw: raw}
		for _, ip := range head.IPs {
			if ip.Address == nil {
				continue
			}
			a, _, err := net.ParseCIDR(*ip.Address) // as the library reads it
			if err != nil {
				return nil, fmt.Errorf("ips: address %q: %w", *ip.Address, err)
			}
			if a, ok := netip.AddrFromSlice(a); ok {
				r.addrs = append(r.addrs, a.Unmap())
			}
		}
		return r, nil
	}
	if head.CNIVersion == "" {
		// Results before 1.0.0 may leave the version out: it is the
		// configuration's, as the library has it.
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		m["cniVersion"] = confVersion
		var err error
		if raw, err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	typed, err := create.Create(confVersion, raw)
	if err != nil {
		return nil, err
	}
	r := &prevResult{typed: typed}
	res, err := current.NewResultFromResult(typed)
	if err != nil {
		return nil, err
	}
	for _, ip := range res.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			r.addrs = append(r.addrs, a.Unmap())
		}
	}
	return r, nil
}

// printTo writes the result at version ver to w (stdout if nil); a nil one
// is an empty result.
func (r *prevResult) printTo(w io.Writer, ver string) error {
	if w == nil {
		w = os.Stdout
	}
	switch {
	case r == nil:
		return printTo(w, &current.Result{CNIVersion: current.ImplementedSpecVersion}, ver)
	case r.typed != nil:
		return printTo(w, r.typed, ver)
	}
	_, err := w.Write(r.raw)
	return err
}

// printTo writes the library's result r, converted to version ver, to w.
func printTo(w io.Writer, r types.Result, ver string) error {
	conv, err := r.GetAsVersion(ver)
	if err != nil {
		return cniError(types.ErrIncompatibleCNIVersion, "convert result", err)
	}
	return conv.PrintTo(w)
}
