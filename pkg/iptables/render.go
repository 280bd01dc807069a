package iptables

import (
	"fmt"
	"strconv"
	"strings"
)

// Spec renders the rule's match and target exactly as iptables-save prints
// them (options in the kernel's canonical order, marks in hex, implicit
// modules spelled out), so that a rendered rule and a saved one compare equal
// as strings. The chain is not included.
func (r Rule) Spec() string {
	var b strings.Builder
	r.Match.render(&b)
	r.Target.render(&b)
	return strings.TrimPrefix(b.String(), " ")
}

// String renders the rule as an append line: "-A CHAIN spec".
func (r Rule) String() string { return "-A " + r.Chain + " " + r.Spec() }

func (m Match) render(b *strings.Builder) {
	addr := func(flag string, a Addr) {
		if !a.IsSet() {
			return
		}
		if a.Not {
			b.WriteString(" !")
		}
		fmt.Fprintf(b, " %s %s", flag, a.Prefix.Masked())
	}
	addr("-s", m.Src)
	addr("-d", m.Dst)
	if m.In != "" {
		b.WriteString(" -i " + m.In)
	}
	if m.Out != "" {
		b.WriteString(" -o " + m.Out)
	}
	if m.Proto != "" {
		b.WriteString(" -p " + m.Proto)
	}
	if m.SPort.IsSet() || m.DPort.IsSet() {
		b.WriteString(" -m " + m.Proto)
		port := func(flag string, p PortMatch) {
			if !p.IsSet() {
				return
			}
			if p.Not {
				b.WriteString(" !")
			}
			fmt.Fprintf(b, " %s %s", flag, p.Range)
		}
		port("--sport", m.SPort)
		port("--dport", m.DPort)
	}
	if len(m.MultiDPorts) > 0 {
		b.WriteString(" -m multiport")
		if m.NotMultiDPorts {
			b.WriteString(" !")
		}
		ports := make([]string, len(m.MultiDPorts))
		for i, p := range m.MultiDPorts {
			ports[i] = p.String()
		}
		b.WriteString(" --dports " + strings.Join(ports, ","))
	}
	for _, o := range m.Owners {
		b.WriteString(" -m owner")
		if o.Not {
			b.WriteString(" !")
		}
		if o.GID {
			b.WriteString(" --gid-owner ")
		} else {
			b.WriteString(" --uid-owner ")
		}
		b.WriteString(strconv.FormatUint(uint64(o.ID), 10))
	}
	if m.CTState != "" {
		b.WriteString(" -m conntrack --ctstate " + m.CTState)
	}
	mark := func(module string, mm *MarkMatch) {
		if mm == nil {
			return
		}
		b.WriteString(" -m " + module)
		if mm.Not {
			b.WriteString(" !")
		}
		fmt.Fprintf(b, " --mark %#x", mm.Value)
	}
	mark("mark", m.Mark)
	mark("connmark", m.ConnMark)
}

func (t Target) render(b *strings.Builder) {
	switch t.Kind {
	case Jump:
		b.WriteString(" -j " + t.Chain)
	case Return:
		b.WriteString(" -j RETURN")
	case Accept:
		b.WriteString(" -j ACCEPT")
	case Drop:
		b.WriteString(" -j DROP")
	case Redirect:
		fmt.Fprintf(b, " -j REDIRECT --to-ports %d", t.Port)
	case TProxy:
		onIP := "0.0.0.0"
		if t.OnIP.IsValid() {
			onIP = t.OnIP.String()
		}
		fmt.Fprintf(b, " -j TPROXY --on-port %d --on-ip %s --tproxy-mark %#x/0xffffffff", t.Port, onIP, t.Mark)
	case SetMark:
		fmt.Fprintf(b, " -j MARK --set-xmark %#x/0xffffffff", t.Mark)
	case SaveConnMark:
		b.WriteString(" -j CONNMARK --save-mark --nfmask 0xffffffff --ctmask 0xffffffff")
	case RestoreConnMark:
		b.WriteString(" -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff")
	case CTZone:
		fmt.Fprintf(b, " -j CT --zone %d", t.Zone)
	default:
		panic(fmt.Sprintf("iptables: rule with unknown target kind %d", t.Kind))
	}
}
