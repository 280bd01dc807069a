package nftables

import (
	"fmt"

	"github.com/google/nftables"
)

// FamilyInUse reports whether nf_tables holds any table of the IPv4 (v6
// false) or IPv6 family, ours or anybody's: iptables-nft keeps its tables
// there. A namespace without any has no rules to read back, so a caller may
// skip iptables-nft-save. It asks the kernel over netlink (no process).
func FamilyInUse(o Options, v6 bool) (bool, error) {
	conn, err := nftables.New(nftables.WithNetNSFd(o.NetNS))
	if err != nil {
		return false, fmt.Errorf("nftables: %w", err)
	}
	fam := nftables.TableFamilyIPv4
	if v6 {
		fam = nftables.TableFamilyIPv6
	}
	tables, err := conn.ListTablesOfFamily(fam)
	if err != nil {
		return false, fmt.Errorf("nftables: list tables: %w", err)
	}
	return len(tables) > 0, nil
}
