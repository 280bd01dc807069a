package nftables

import (
	"fmt"
	"strconv"
	"strings"
)

// String renders the tables exactly as "nft list ruleset" prints them once
// Apply has installed the program (nothing else in the namespace), so the
// text can be compared with the kernel's view of the rules.
func (p *Program) String() string {
	var b strings.Builder
	for _, t := range p.Tables {
		t.render(&b, false)
	}
	return b.String()
}

// Script renders the program as an "nft -f" script that does what Apply
// does, in one transaction: it deletes every table Skiff owns (creating it
// first, so that the deletion cannot fail) and creates the program's
// tables. Each rule is followed by its purpose as a comment.
func (p *Program) Script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s, %s, applied in one transaction\n", count(len(p.Tables), "table"), count(p.RuleCount(), "rule"))
	for _, name := range OwnedTables() {
		fmt.Fprintf(&b, "table inet %s\ndelete table inet %s\n", name, name)
	}
	for _, t := range p.Tables {
		t.render(&b, true)
	}
	return b.String()
}

func (t *Table) render(b *strings.Builder, purposes bool) {
	fmt.Fprintf(b, "table inet %s {\n", t.Name)
	for i, c := range t.Chains {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(b, "\tchain %s {\n", c.Name)
		if c.Base != nil {
			fmt.Fprintf(b, "\t\ttype %s hook %s priority %s; policy accept;\n", c.Base.Type, c.Base.Hook, c.Base.priorityText())
		}
		for _, r := range c.Rules {
			b.WriteString("\t\t" + r.String())
			if purposes && r.Purpose != "" {
				b.WriteString(" # " + quoteComment(r.Purpose))
			}
			b.WriteString("\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
}

// priorityText spells the priority as nft lists it: by its standard name
// where it has one for the chain's type and hook, as a number otherwise.
func (c *BaseChain) priorityText() string {
	if c.Type == "nat" {
		switch {
		case c.Hook == "prerouting" && c.Priority == -100:
			return "dstnat"
		case c.Hook == "postrouting" && c.Priority == 100:
			return "srcnat"
		}
		return strconv.Itoa(int(c.Priority))
	}
	switch c.Priority {
	case -300:
		return "raw"
	case -150:
		return "mangle"
	case 0:
		return "filter"
	case 50:
		return "security"
	}
	return strconv.Itoa(int(c.Priority))
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
