package nftables

import "golang.org/x/sys/unix"

// FamilyInUse reports whether nf_tables holds any table of the IPv4 (v6
// false) or IPv6 family, ours or anybody's: iptables-nft keeps its tables
// there. A namespace without any has no rules to read back, so a caller may
// skip iptables-nft-save. It asks the kernel over netlink (no process).
func FamilyInUse(o Options, v6 bool) (bool, error) {
	c, err := dial(o.NetNS)
	if err != nil {
		return false, err
	}
	defer c.close()
	fam := byte(unix.NFPROTO_IPV4)
	if v6 {
		fam = unix.NFPROTO_IPV6
	}
	tables, err := listTables(c, fam)
	if err != nil {
		return false, err
	}
	return len(tables) > 0, nil
}
