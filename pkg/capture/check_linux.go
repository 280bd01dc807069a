package capture

import (
	"context"
	"fmt"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
	"github.com/skiff-mesh/skiff/pkg/netns"
	"github.com/skiff-mesh/skiff/pkg/nftables"
)

// Check reports what is missing or extra in the namespace compared with the
// rules cfg calls for (empty when they are intact). It changes nothing.
func Check(ctx context.Context, cfg *Config) ([]string, error) {
	var drift []string
	err := netns.Do(cfg.NetworkNamespace, func() error {
		c := *cfg
		if err := Resolve(&c, ""); err != nil {
			return err
		}
		if c.NativeNFTables {
			prog, err := nftProgram(&c)
			if err != nil {
				return err
			}
			ok, err := nftables.InSync(prog, nftables.Options{})
			if err != nil {
				return err
			}
			if !ok {
				drift = append(drift, "nftables: our inet tables differ from what the pod's annotations call for")
			}
			return nil
		}
		m, err := mode(ctx, &c)
		if err != nil {
			return fmt.Errorf("detect iptables backend: %w", err)
		}
		r := &ipt.Exec{Mode: m}
		for _, rs := range Build(&c) {
			cur, err := readState(ctx, r, rs.Family)
			if err != nil {
				return err
			}
			for _, d := range ipt.Drift(rs, cur, Ownership) {
				drift = append(drift, rs.Family.String()+" "+d)
			}
		}
		return nil
	})
	return drift, err
}
