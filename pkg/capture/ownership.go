package capture

import (
	"regexp"
	"sync"

	ipt "github.com/skiff-mesh/skiff/pkg/iptables"
)

// ownedShapes are the rules Skiff (like Istio) puts in built-in chains that
// do not jump to one of its chains. They are recognised by shape so that a
// rerun with other flags, or --cleanup-only, removes what an earlier run
// installed. A foreign rule of exactly one of these shapes would be taken for
// ours; nothing else in the built-in chains is touched. They are compiled
// when first needed, not at start: a new pod's run never looks at a rule,
// and every process that links this package would pay for them.
var ownedShapes = sync.OnceValue(func() map[string][]*regexp.Regexp {
	return map[string][]*regexp.Regexp{
		ipt.NAT + "/PREROUTING": {regexp.MustCompile(`^-i \S+ -j RETURN$`)},
		ipt.NAT + "/OUTPUT":     {regexp.MustCompile(`^-o \S+ -j RETURN$`)},
		ipt.Mangle + "/PREROUTING": {
			regexp.MustCompile(`^-i \S+ -j RETURN$`),
			regexp.MustCompile(`^-p tcp -m mark --mark 0x[0-9a-f]+ -j CONNMARK --save-mark --nfmask 0xffffffff --ctmask 0xffffffff$`),
		},
		ipt.Mangle + "/OUTPUT": {
			regexp.MustCompile(`^-o \S+ -j RETURN$`),
			regexp.MustCompile(`^-o lo -p tcp -m mark --mark 0x[0-9a-f]+ -j RETURN$`),
			regexp.MustCompile(`^! -d \S+ -o lo -p tcp -m owner --[ug]id-owner \d+ -j MARK --set-xmark 0x[0-9a-f]+/0xffffffff$`),
			regexp.MustCompile(`^-p tcp -m connmark --mark 0x[0-9a-f]+ -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff$`),
		},
	}
})

// Ownership says which chains and rules belong to istio-iptables.
func Ownership() ipt.Ownership {
	return ipt.Ownership{
		Chains:   []string{ChainInbound, ChainRedirect, ChainInRedirect, ChainOutput, ChainOutputDNS, ChainDivert, ChainTProxy, ChainDrop},
		OwnsRule: ownsRule,
	}
}

func ownsRule(table, chain, spec string) bool {
	for _, re := range ownedShapes()[table+"/"+chain] {
		if re.MatchString(spec) {
			return true
		}
	}
	return false
}
