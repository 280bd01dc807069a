package nftables

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// udataFingerprint is the type of the user-data TLV that carries a rule's
// fingerprint. libnftnl's TLV format is one byte of type, one of length,
// then the value; nft prints only type 0 (comment) and skips the others,
// so the fingerprint does not show in "nft list ruleset".
const udataFingerprint = 0xf5

func userData(fp [16]byte) []byte {
	return append([]byte{udataFingerprint, byte(len(fp))}, fp[:]...)
}

// Apply makes the kernel hold exactly p in Skiff's tables. It reads our
// tables back first and does nothing when they match. Otherwise it sends one
// netlink batch that deletes each of our tables that exists and creates p's
// tables with all their chains, sets and rules: the kernel commits the batch
// atomically, so packets see either the old rules or the new ones and never a
// moment without capture. Tables of other names, and tables of these names in
// other families, are left alone.
//
// A table that did not exist is created exclusively rather than deleted
// first: deleting a table makes the commit wait for an RCU grace period
// (about 10 ms), which a first install in a new namespace never needs. Should
// someone create the table between the read and the commit, the kernel
// rejects the whole batch (EEXIST) and Apply reads and tries once more.
//
// Whether the kernel holds p is decided by structure and fingerprints: the
// same tables, not dormant; the same chains in order with the same hook,
// priority, type and policy; and in each chain as many rules as p has, each
// carrying in its user data the fingerprint of p's rule at that place
// (table, chain, position and text). A rule added, removed, reordered or
// replaced by anyone else (nft keeps no user data it was not given), or one
// written by a build that translates it differently, fails the check.
// Fingerprints are compared rather than expressions because the kernel
// echoes user data verbatim, whereas its expression dumps vary by kernel
// version (attributes it adds, anonymous set names) and the netlink
// library's parser is lossy: it silently drops expressions it does not know
// (tproxy) and reads "ct zone set" back as a load.
func Apply(p *Program, o Options) (Result, error) {
	res, err := applyOnce(p, o)
	if errors.Is(err, unix.EEXIST) {
		res, err = applyOnce(p, o)
	}
	return res, err
}

func applyOnce(p *Program, o Options) (Result, error) {
	cur, err := readState(o.NetNS)
	if err != nil {
		return Result{}, err
	}
	if !o.Force && cur.holds(p) {
		return Result{}, nil
	}
	conn, err := nftables.New(nftables.WithNetNSFd(o.NetNS))
	if err != nil {
		return Result{}, fmt.Errorf("nftables: open netlink: %w", err)
	}
	var res Result
	for _, name := range OwnedTables() {
		if cur.table(name) == nil {
			continue
		}
		if p.Table(name) == nil {
			res.Removed = append(res.Removed, name)
		}
		// Adding first makes the deletion valid whether or not the table
		// still exists when the batch is committed.
		t := &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
		conn.AddTable(t)
		conn.DelTable(t)
	}
	for _, t := range p.Tables {
		if err := addTable(conn, t, cur.table(t.Name) == nil); err != nil {
			return Result{}, err
		}
	}
	if err := conn.Flush(); err != nil {
		return Result{}, fmt.Errorf("nftables: commit %d tables, %d rules: %w", len(p.Tables), p.RuleCount(), err)
	}
	res.Changed = true
	return res, nil
}

var hookNums = map[string]nftables.ChainHook{
	"prerouting":  unix.NF_INET_PRE_ROUTING,
	"input":       unix.NF_INET_LOCAL_IN,
	"forward":     unix.NF_INET_FORWARD,
	"output":      unix.NF_INET_LOCAL_OUT,
	"postrouting": unix.NF_INET_POST_ROUTING,
}

// addTable adds t with all its chains, sets and rules; exclusively (the
// batch fails with EEXIST if the table exists) when fresh.
func addTable(conn *nftables.Conn, t *Table, fresh bool) error {
	tbl := &nftables.Table{Name: t.Name, Family: nftables.TableFamilyINet}
	if fresh {
		conn.CreateTable(tbl)
	} else {
		conn.AddTable(tbl)
	}
	chains := make(map[string]*nftables.Chain, len(t.Chains))
	// All chains first: rules jump to chains created after their own.
	for _, c := range t.Chains {
		ch := &nftables.Chain{Name: c.Name, Table: tbl}
		if c.Base != nil {
			hook, ok := hookNums[c.Base.Hook]
			if !ok {
				return fmt.Errorf("nftables: table %s chain %s: unknown hook %q", t.Name, c.Name, c.Base.Hook)
			}
			policy := nftables.ChainPolicyAccept
			ch.Hooknum = nftables.ChainHookRef(hook)
			ch.Priority = nftables.ChainPriorityRef(nftables.ChainPriority(c.Base.Priority))
			ch.Type = nftables.ChainType(c.Base.Type)
			ch.Policy = &policy
		}
		chains[c.Name] = conn.AddChain(ch)
	}
	comp := &compiler{table: tbl}
	for _, c := range t.Chains {
		for i, r := range c.Rules {
			exprs, sets, err := comp.rule(r)
			if err != nil {
				return fmt.Errorf("nftables: table %s chain %s: %w", t.Name, c.Name, err)
			}
			for _, s := range sets {
				if err := conn.AddSet(s.set, s.elems); err != nil {
					return fmt.Errorf("nftables: table %s chain %s rule %q: add set: %w", t.Name, c.Name, r.String(), err)
				}
			}
			conn.AddRule(&nftables.Rule{
				Table: tbl, Chain: chains[c.Name], Exprs: exprs,
				UserData: userData(r.fingerprint(t.Name, c.Name, i)),
			})
		}
	}
	return nil
}

// Cleanup deletes Skiff's tables (OwnedTables, inet family) in one
// transaction and returns the names of those it deleted. It writes nothing
// when none exists, and never touches any other table.
func Cleanup(o Options) ([]string, error) {
	cur, err := readState(o.NetNS)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, t := range cur.tables {
		removed = append(removed, t.name)
	}
	if len(removed) == 0 {
		return nil, nil
	}
	conn, err := nftables.New(nftables.WithNetNSFd(o.NetNS))
	if err != nil {
		return nil, fmt.Errorf("nftables: open netlink: %w", err)
	}
	for _, name := range removed {
		t := &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
		conn.AddTable(t)
		conn.DelTable(t)
	}
	if err := conn.Flush(); err != nil {
		return nil, fmt.Errorf("nftables: delete tables %v: %w", removed, err)
	}
	return removed, nil
}

// Present returns the names of Skiff's tables the kernel holds.
func Present(o Options) ([]string, error) {
	cur, err := readState(o.NetNS)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range cur.tables {
		out = append(out, t.name)
	}
	return out, nil
}

// InSync reports whether the kernel holds exactly p in Skiff's tables, by
// the check Apply makes before writing.
func InSync(p *Program, o Options) (bool, error) {
	cur, err := readState(o.NetNS)
	if err != nil {
		return false, err
	}
	return cur.holds(p), nil
}

// state is what the kernel holds in the tables Skiff owns.
type state struct {
	tables []*kernelTable
}

type kernelTable struct {
	name   string
	flags  uint32
	chains []*kernelChain
}

type kernelChain struct {
	name   string
	base   *BaseChain
	policy *nftables.ChainPolicy
	rules  [][]byte // user data of each rule, in order
}

func (s *state) table(name string) *kernelTable {
	for _, t := range s.tables {
		if t.name == name {
			return t
		}
	}
	return nil
}

// holds reports whether the state is exactly p (see Apply).
func (s *state) holds(p *Program) bool {
	if len(s.tables) != len(p.Tables) {
		return false
	}
	for _, want := range p.Tables {
		got := s.table(want.Name)
		if got == nil || got.flags != 0 || len(got.chains) != len(want.Chains) {
			return false
		}
		for i, wc := range want.Chains {
			gc := got.chains[i]
			if gc.name != wc.Name || len(gc.rules) != len(wc.Rules) {
				return false
			}
			if (gc.base == nil) != (wc.Base == nil) {
				return false
			}
			if wc.Base != nil && (*gc.base != *wc.Base || gc.policy == nil || *gc.policy != nftables.ChainPolicyAccept) {
				return false
			}
			for j, r := range wc.Rules {
				if !bytes.Equal(gc.rules[j], userData(r.fingerprint(want.Name, wc.Name, j))) {
					return false
				}
			}
		}
	}
	return true
}

var hookNames = map[nftables.ChainHook]string{}

func init() {
	for name, num := range hookNums {
		hookNames[num] = name
	}
}

// readState reads Skiff's tables, their chains and their rules' user data.
func readState(netns int) (*state, error) {
	conn, err := nftables.New(nftables.WithNetNSFd(netns))
	if err != nil {
		return nil, fmt.Errorf("nftables: open netlink: %w", err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("nftables: list tables: %w", err)
	}
	st := &state{}
	for _, name := range OwnedTables() {
		for _, t := range tables {
			if t.Name == name {
				st.tables = append(st.tables, &kernelTable{name: t.Name, flags: t.Flags})
			}
		}
	}
	if len(st.tables) == 0 {
		return st, nil
	}
	chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("nftables: list chains: %w", err)
	}
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: netns})
	if err != nil {
		return nil, fmt.Errorf("nftables: open netlink: %w", err)
	}
	defer nl.Close()
	for _, t := range st.tables {
		byName := map[string]*kernelChain{}
		for _, c := range chains {
			if c.Table == nil || c.Table.Name != t.name {
				continue
			}
			kc := &kernelChain{name: c.Name, policy: c.Policy}
			if c.Hooknum != nil && c.Priority != nil {
				kc.base = &BaseChain{Type: string(c.Type), Hook: hookNames[*c.Hooknum], Priority: int32(*c.Priority)}
				if kc.base.Hook == "" {
					kc.base.Hook = fmt.Sprintf("hook%d", *c.Hooknum)
				}
			}
			t.chains = append(t.chains, kc)
			byName[c.Name] = kc
		}
		rules, err := dumpRules(nl, t.name)
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			c := byName[r.chain]
			if c == nil {
				return nil, fmt.Errorf("nftables: table %s: rule in unlisted chain %q", t.name, r.chain)
			}
			c.rules = append(c.rules, r.userData)
		}
	}
	return st, nil
}

type dumpedRule struct {
	chain    string
	userData []byte
}

const (
	msgGetRule = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETRULE
	msgNewRule = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE
	msgGetGen  = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN
	msgNewGen  = unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN
)

// nfgenmsg is the header of every nftables message: family, version, resource id.
func nfgenmsg(family byte) []byte { return []byte{family, unix.NFNETLINK_V0, 0, 0} }

// dumpRules lists the rules of an inet table: their chain and user data.
// It reads the raw attributes: the expressions are not needed, and the
// library's rule parser would decode them all.
func dumpRules(nl *netlink.Conn, table string) ([]dumpedRule, error) {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: append([]byte(table), 0)}})
	if err != nil {
		return nil, fmt.Errorf("nftables: dump rules of %s: %w", table, err)
	}
	msgs, err := nl.Execute(netlink.Message{
		Header: netlink.Header{Type: msgGetRule, Flags: netlink.Request | netlink.Dump},
		Data:   append(nfgenmsg(unix.NFPROTO_INET), attrs...),
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: dump rules of %s: %w", table, err)
	}
	var out []dumpedRule
	for _, m := range msgs {
		if m.Header.Type != msgNewRule || len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return nil, fmt.Errorf("nftables: parse rule of %s: %w", table, err)
		}
		var r dumpedRule
		var tbl string
		for ad.Next() {
			switch ad.Type() {
			case unix.NFTA_RULE_TABLE:
				tbl = ad.String()
			case unix.NFTA_RULE_CHAIN:
				r.chain = ad.String()
			case unix.NFTA_RULE_USERDATA:
				r.userData = slices.Clone(ad.Bytes())
			}
		}
		if err := ad.Err(); err != nil {
			return nil, fmt.Errorf("nftables: parse rule of %s: %w", table, err)
		}
		if tbl == table {
			out = append(out, r)
		}
	}
	return out, nil
}

// Generation returns the kernel's nftables ruleset generation in the
// namespace. Every committed transaction increments it, so two equal
// readings around an Apply prove that Apply wrote nothing.
func Generation(o Options) (uint32, error) {
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: o.NetNS})
	if err != nil {
		return 0, fmt.Errorf("nftables: open netlink: %w", err)
	}
	defer nl.Close()
	msgs, err := nl.Execute(netlink.Message{
		Header: netlink.Header{Type: msgGetGen, Flags: netlink.Request},
		Data:   nfgenmsg(unix.AF_UNSPEC),
	})
	if err != nil {
		return 0, fmt.Errorf("nftables: get generation: %w", err)
	}
	for _, m := range msgs {
		if m.Header.Type != msgNewGen || len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, fmt.Errorf("nftables: parse generation: %w", err)
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), ad.Err()
			}
		}
	}
	return 0, errors.New("nftables: no generation in the kernel's answer")
}
