package nftables

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// udataFingerprint is the type of the user-data TLV that carries a rule's
// fingerprint. libnftnl's TLV format is one byte of type, one of length,
// then the value; nft prints only type 0 (comment) and skips the others,
// so the fingerprint does not show in "nft list ruleset".
const udataFingerprint = 0xf5

// userData is a rule's user data: the TLV of its fingerprint.
func userData(fp [16]byte) (u [18]byte) {
	u[0], u[1] = udataFingerprint, byte(len(fp))
	copy(u[2:], fp[:])
	return u
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
	c, err := dial(o.NetNS)
	if err != nil {
		return Result{}, err
	}
	defer c.close()
	cur, err := readState(c)
	if err != nil {
		return Result{}, err
	}
	if !o.Force && cur.holds(p) {
		return Result{}, nil
	}
	return write(c, cur, p)
}

// write commits the batch that replaces cur, what the kernel held when
// read, with p.
func write(c *conn, cur *state, p *Program) (Result, error) {
	b := c.newBatch()
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
		addTableMsg(b, name, false)
		delTableMsg(b, name)
	}
	for _, t := range p.Tables {
		if err := addTable(b, t, cur.table(t.Name) == nil); err != nil {
			return Result{}, err
		}
	}
	if err := c.commit(b); err != nil {
		return Result{}, fmt.Errorf("nftables: commit %d tables, %d rules: %w", len(p.Tables), p.RuleCount(), err)
	}
	res.Changed = true
	return res, nil
}

// policyAccept is a base chain's policy "accept" (the kernel's NF_ACCEPT).
const policyAccept = 1

var hookNums = map[string]uint32{
	"prerouting":  unix.NF_INET_PRE_ROUTING,
	"input":       unix.NF_INET_LOCAL_IN,
	"forward":     unix.NF_INET_FORWARD,
	"output":      unix.NF_INET_LOCAL_OUT,
	"postrouting": unix.NF_INET_POST_ROUTING,
}

// addTableMsg adds "add table inet NAME"; exclusively (the batch fails with
// EEXIST if the table exists) when excl.
func addTableMsg(b *batch, name string, excl bool) {
	flags := uint16(unix.NLM_F_CREATE)
	if excl {
		flags |= unix.NLM_F_EXCL
	}
	b.begin(unix.NFT_MSG_NEWTABLE, flags, step{text: "add table " + name})
	b.str(unix.NFTA_TABLE_NAME, name)
	b.u32(unix.NFTA_TABLE_FLAGS, 0)
}

func delTableMsg(b *batch, name string) {
	b.begin(unix.NFT_MSG_DELTABLE, 0, step{text: "delete table " + name})
	b.str(unix.NFTA_TABLE_NAME, name)
}

// addTable adds t with all its chains, sets and rules; exclusively when
// fresh (see addTableMsg).
func addTable(b *batch, t *Table, fresh bool) error {
	addTableMsg(b, t.Name, fresh)
	// All chains first: rules jump to chains created after their own.
	for _, c := range t.Chains {
		var hook uint32
		if c.Base != nil {
			var ok bool
			if hook, ok = hookNums[c.Base.Hook]; !ok {
				return fmt.Errorf("nftables: table %s chain %s: unknown hook %q", t.Name, c.Name, c.Base.Hook)
			}
		}
		b.begin(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE, step{text: "table " + t.Name + ": add chain " + c.Name})
		b.str(unix.NFTA_CHAIN_TABLE, t.Name)
		b.str(unix.NFTA_CHAIN_NAME, c.Name)
		if c.Base != nil {
			h := b.nest(unix.NFTA_CHAIN_HOOK)
			b.u32(unix.NFTA_HOOK_HOOKNUM, hook)
			b.u32(unix.NFTA_HOOK_PRIORITY, uint32(c.Base.Priority))
			b.end(h)
			b.u32(unix.NFTA_CHAIN_POLICY, policyAccept)
			b.str(unix.NFTA_CHAIN_TYPE, c.Base.Type)
		}
	}
	comp := &compiler{}
	for _, c := range t.Chains {
		for i, r := range c.Rules {
			exprs, sets, err := comp.rule(r)
			if err != nil {
				return fmt.Errorf("nftables: table %s chain %s: %w", t.Name, c.Name, err)
			}
			what := step{table: t.Name, chain: c.Name, rule: r}
			for _, s := range sets {
				addSet(b, t.Name, s, what)
			}
			if err := addRule(b, exprs, r.fingerprint(t.Name, c.Name, i), what); err != nil {
				return fmt.Errorf("nftables: %s: %w", what, err)
			}
		}
	}
	return nil
}

// addRule appends the rule of what, with its expressions and its
// fingerprint as user data, to the end of its chain.
func addRule(b *batch, exprs []expr.Any, fp [16]byte, what step) error {
	b.begin(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, what)
	b.str(unix.NFTA_RULE_TABLE, what.table)
	b.str(unix.NFTA_RULE_CHAIN, what.chain)
	list := b.nest(unix.NFTA_RULE_EXPRESSIONS)
	for _, e := range exprs {
		if err := putExpr(&b.attrs, e); err != nil {
			return err
		}
	}
	b.end(list)
	u := userData(fp)
	b.bytes(unix.NFTA_RULE_USERDATA, u[:])
	return nil
}

// setKeyByteOrder is the user data nft gives a set of big-endian keys
// (libnftnl's NFTNL_UDATA_SET_KEYBYTEORDER, 2 = big endian): only nft's
// printer reads it.
var setKeyByteOrder = []byte{0, 4, 2, 0, 0, 0}

// addSet adds an anonymous constant set of inet_service keys and its elements.
func addSet(b *batch, table string, s anonSet, what step) {
	flags := uint32(unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT)
	if s.interval {
		flags |= unix.NFT_SET_INTERVAL
	}
	b.begin(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, what.then(": add set"))
	b.str(unix.NFTA_SET_TABLE, table)
	b.str(unix.NFTA_SET_NAME, anonSetName)
	b.u32(unix.NFTA_SET_FLAGS, flags)
	b.u32(unix.NFTA_SET_KEY_TYPE, typeInetService)
	b.u32(unix.NFTA_SET_KEY_LEN, 2)
	b.u32(unix.NFTA_SET_ID, s.id)
	desc := b.nest(unix.NFTA_SET_DESC)
	b.u32(unix.NFTA_SET_DESC_SIZE, uint32(len(s.elems)))
	b.end(desc)
	b.bytes(unix.NFTA_SET_USERDATA, setKeyByteOrder)

	b.begin(unix.NFT_MSG_NEWSETELEM, unix.NLM_F_CREATE, what.then(": add set elements"))
	b.str(unix.NFTA_SET_ELEM_LIST_SET, anonSetName)
	b.u32(unix.NFTA_SET_ELEM_LIST_SET_ID, s.id)
	b.str(unix.NFTA_SET_ELEM_LIST_TABLE, table)
	list := b.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	for _, e := range s.elems {
		elem := b.nest(unix.NFTA_LIST_ELEM)
		if e.intervalEnd {
			b.u32(unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
		}
		b.value(unix.NFTA_SET_ELEM_KEY, e.key)
		b.end(elem)
	}
	b.end(list)
}

// Cleanup deletes Skiff's tables (OwnedTables, inet family) in one
// transaction and returns the names of those it deleted. It writes nothing
// when none exists, and never touches any other table.
func Cleanup(o Options) ([]string, error) {
	c, err := dial(o.NetNS)
	if err != nil {
		return nil, err
	}
	defer c.close()
	cur, err := readState(c)
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
	b := c.newBatch()
	for _, name := range removed {
		addTableMsg(b, name, false)
		delTableMsg(b, name)
	}
	if err := c.commit(b); err != nil {
		return nil, fmt.Errorf("nftables: delete tables %v: %w", removed, err)
	}
	return removed, nil
}

// Present returns the names of Skiff's tables the kernel holds.
func Present(o Options) ([]string, error) {
	cur, err := readStateIn(o.NetNS)
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
	cur, err := readStateIn(o.NetNS)
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
	typ    string
	base   *BaseChain
	policy *uint32
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
			if wc.Base != nil && (*gc.base != *wc.Base || gc.policy == nil || *gc.policy != policyAccept) {
				return false
			}
			for j, r := range wc.Rules {
				if u := userData(r.fingerprint(want.Name, wc.Name, j)); !bytes.Equal(gc.rules[j], u[:]) {
					return false
				}
			}
		}
	}
	return true
}

var hookNames = map[uint32]string{}

func init() {
	for name, num := range hookNums {
		hookNames[num] = name
	}
}

// readStateIn is readState on a socket of its own.
func readStateIn(netns int) (*state, error) {
	c, err := dial(netns)
	if err != nil {
		return nil, err
	}
	defer c.close()
	return readState(c)
}

// readState reads Skiff's tables, their chains and their rules' user data:
// one query when none of our tables exists, as in a new namespace.
func readState(c *conn) (*state, error) {
	tables, err := listTables(c, unix.NFPROTO_INET)
	if err != nil {
		return nil, err
	}
	st := &state{}
	for _, name := range OwnedTables() {
		for _, t := range tables {
			if t.name == name {
				st.tables = append(st.tables, t)
			}
		}
	}
	if len(st.tables) == 0 {
		return st, nil
	}
	byTable := map[string]map[string]*kernelChain{}
	for _, t := range st.tables {
		byTable[t.name] = map[string]*kernelChain{}
	}
	err = c.dump(unix.NFT_MSG_GETCHAIN, unix.NFPROTO_INET, nil, func(a []byte) error {
		var table string
		var hook, prio *uint32
		kc := &kernelChain{}
		err := decode(a, func(ad *netlink.AttributeDecoder) {
			switch ad.Type() {
			case unix.NFTA_CHAIN_TABLE:
				table = ad.String()
			case unix.NFTA_CHAIN_NAME:
				kc.name = ad.String()
			case unix.NFTA_CHAIN_TYPE:
				kc.typ = ad.String()
			case unix.NFTA_CHAIN_POLICY:
				v := ad.Uint32()
				kc.policy = &v
			case unix.NFTA_CHAIN_HOOK:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						switch nad.Type() {
						case unix.NFTA_HOOK_HOOKNUM:
							v := nad.Uint32()
							hook = &v
						case unix.NFTA_HOOK_PRIORITY:
							v := nad.Uint32()
							prio = &v
						}
					}
					return nil
				})
			}
		})
		if err != nil {
			return fmt.Errorf("nftables: parse chain: %w", err)
		}
		chains := byTable[table]
		if chains == nil {
			return nil
		}
		if hook != nil && prio != nil {
			kc.base = &BaseChain{Type: kc.typ, Hook: hookNames[*hook], Priority: int32(*prio)}
			if kc.base.Hook == "" {
				kc.base.Hook = fmt.Sprintf("hook%d", *hook)
			}
		}
		t := st.table(table)
		t.chains = append(t.chains, kc)
		chains[kc.name] = kc
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: list chains: %w", err)
	}
	for _, t := range st.tables {
		rules, err := dumpRules(c, t.name)
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			kc := byTable[t.name][r.chain]
			if kc == nil {
				return nil, fmt.Errorf("nftables: table %s: rule in unlisted chain %q", t.name, r.chain)
			}
			kc.rules = append(kc.rules, r.userData)
		}
	}
	return st, nil
}

// listTables lists the tables of a family: their names and flags.
func listTables(c *conn, family byte) ([]*kernelTable, error) {
	var out []*kernelTable
	err := c.dump(unix.NFT_MSG_GETTABLE, family, nil, func(a []byte) error {
		t := &kernelTable{}
		err := decode(a, func(ad *netlink.AttributeDecoder) {
			switch ad.Type() {
			case unix.NFTA_TABLE_NAME:
				t.name = ad.String()
			case unix.NFTA_TABLE_FLAGS:
				t.flags = ad.Uint32()
			}
		})
		out = append(out, t)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: list tables: %w", err)
	}
	return out, nil
}

type dumpedRule struct {
	chain    string
	userData []byte
}

// dumpRules lists the rules of an inet table: their chain and user data.
// It reads only those attributes: the expressions are not needed.
func dumpRules(c *conn, table string) ([]dumpedRule, error) {
	var req attrs
	req.str(unix.NFTA_RULE_TABLE, table)
	var out []dumpedRule
	err := c.dump(unix.NFT_MSG_GETRULE, unix.NFPROTO_INET, req.b, func(a []byte) error {
		var r dumpedRule
		var tbl string
		err := decode(a, func(ad *netlink.AttributeDecoder) {
			switch ad.Type() {
			case unix.NFTA_RULE_TABLE:
				tbl = ad.String()
			case unix.NFTA_RULE_CHAIN:
				r.chain = ad.String()
			case unix.NFTA_RULE_USERDATA:
				r.userData = slices.Clone(ad.Bytes())
			}
		})
		if err != nil {
			return err
		}
		if tbl == table {
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nftables: dump rules of %s: %w", table, err)
	}
	return out, nil
}

// Generation returns the kernel's nftables ruleset generation in the
// namespace. Every committed transaction increments it, so two equal
// readings around an Apply prove that Apply wrote nothing.
func Generation(o Options) (uint32, error) {
	c, err := dial(o.NetNS)
	if err != nil {
		return 0, err
	}
	defer c.close()
	a, err := c.request(unix.NFT_MSG_GETGEN, unix.AF_UNSPEC, unix.NFT_MSG_NEWGEN)
	if err != nil {
		return 0, fmt.Errorf("nftables: get generation: %w", err)
	}
	var gen uint32
	found := false
	err = decode(a, func(ad *netlink.AttributeDecoder) {
		if ad.Type() == unix.NFTA_GEN_ID {
			gen, found = ad.Uint32(), true
		}
	})
	if err != nil {
		return 0, fmt.Errorf("nftables: parse generation: %w", err)
	}
	if !found {
		return 0, errors.New("nftables: no generation in the kernel's answer")
	}
	return gen, nil
}
