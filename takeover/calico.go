// Package takeover takes a node over from Calico Felix's own dataplane: it
// finds what a Felix left in nftables (its nftables mode's `calico` tables,
// its iptables mode's `cali-` chains in iptables-nft's shared tables) and
// removes exactly those objects over netlink, in one transaction, and again
// whenever they reappear; it removes Calico's ipsets once nothing refers to
// them; and it reports what it cannot remove (iptables-legacy rules, in
// x_tables, which nftables does not reach).
//
// In nftables a packet passes every base chain of its hook, and a drop in
// any of them is final: a stale `calico` table keeps dropping what nftep's
// table allows. Hence the take-over.
package takeover

import (
	"fmt"
	"strings"

	"github.com/nftep/nftep/nft"
)

// Felix's nftables mode programs these whole tables (its ownership rule:
// everything in them is Felix's). The iptables-mode Felix creates
// `arp calico-arp` too.
var calicoTables = []struct {
	family nft.Family
	name   string
}{
	{nft.FamilyIP, "calico"},
	{nft.FamilyIP6, "calico"},
	{nft.FamilyARP, "calico-arp"},
}

// sharedTables are iptables-nft's tables in which Felix's iptables mode adds
// its chains: the filter, nat, mangle and raw tables of ip and ip6. Other
// programs (kube-proxy, Docker, the user) share them.
var sharedTables = []string{"filter", "nat", "mangle", "raw"}

// chainPrefix starts every chain Felix's iptables mode creates;
// commentPrefix starts the comment of every rule it writes (a hash of the
// rule: "cali:Cz_u1IQiXIMmKD4c").
const (
	chainPrefix   = "cali-"
	commentPrefix = "cali:"
)

// isCalicoTable says whether family/name is one of Felix's own tables.
func isCalicoTable(family nft.Family, name string) bool {
	for _, t := range calicoTables {
		if t.family == family && t.name == name {
			return true
		}
	}
	return false
}

// isSharedTable says whether family/name is one of iptables-nft's tables
// Felix's iptables mode writes into.
func isSharedTable(family nft.Family, name string) bool {
	if family != nft.FamilyIP && family != nft.FamilyIP6 {
		return false
	}
	for _, t := range sharedTables {
		if t == name {
			return true
		}
	}
	return false
}

// watched says whether a table is one whose changes may bring leftovers
// back: the tables of interest as "family name", as nft.Commit names them.
func watched(table string) bool {
	fam, name, ok := strings.Cut(table, " ")
	return ok && (isCalicoTable(nft.Family(fam), name) || isSharedTable(nft.Family(fam), name))
}

// Found is what a read found of Calico's leftovers: the removals, in the
// order one transaction must make them, and counts for the log.
type Found struct {
	// Ops remove everything below in one transaction.
	Ops []nft.ForeignOp
	// Tables are Felix's whole tables ("ip calico").
	Tables []string
	// Chains are the `cali-` chains in shared tables ("ip filter
	// cali-INPUT"); Rules counts the rules of other chains that jump to
	// them or carry Felix's comment.
	Chains []string
	Rules  int
}

// Empty says nothing was found.
func (f Found) Empty() bool { return len(f.Ops) == 0 }

// String summarises f for the log.
func (f Found) String() string {
	if f.Empty() {
		return "nothing"
	}
	var parts []string
	if len(f.Tables) > 0 {
		parts = append(parts, "tables "+strings.Join(f.Tables, ", "))
	}
	if len(f.Chains) > 0 {
		parts = append(parts, fmt.Sprintf("%d cali- chains", len(f.Chains)))
	}
	if f.Rules > 0 {
		parts = append(parts, fmt.Sprintf("%d rules in other chains", f.Rules))
	}
	return strings.Join(parts, ", ")
}

// plan decides what of tables (read with rules) is Calico's, under the
// ownership rules above, and orders the removals: whole tables; then, per
// shared table, the rules of other chains that jump to a `cali-` chain or
// carry a "cali:" comment, the `cali-` chains' rules (flush), and last the
// chains themselves, which nothing refers to by then. Nothing else is
// named, so every other table, chain, rule and set stays as it is.
func plan(tables []*nft.ForeignTable) Found {
	var f Found
	for _, t := range tables {
		if !isCalicoTable(t.Family, t.Name) {
			continue
		}
		f.Ops = append(f.Ops, nft.ForeignOp{Kind: nft.ForeignDeleteTable, Family: t.Family, Table: t.Name})
		f.Tables = append(f.Tables, string(t.Family)+" "+t.Name)
	}
	for _, t := range tables {
		if !isSharedTable(t.Family, t.Name) {
			continue
		}
		var chains []string
		for _, c := range t.Chains {
			if strings.HasPrefix(c.Name, chainPrefix) && !c.Base {
				chains = append(chains, c.Name)
				continue
			}
			for _, r := range c.Rules {
				if calicoRule(r) {
					f.Ops = append(f.Ops, nft.ForeignOp{Kind: nft.ForeignDeleteRule, Family: t.Family, Table: t.Name, Chain: c.Name, Handle: r.Handle})
					f.Rules++
				}
			}
		}
		for _, c := range chains {
			if len(t.Chain(c).Rules) > 0 {
				f.Ops = append(f.Ops, nft.ForeignOp{Kind: nft.ForeignFlushChain, Family: t.Family, Table: t.Name, Chain: c})
			}
		}
		for _, c := range chains {
			f.Ops = append(f.Ops, nft.ForeignOp{Kind: nft.ForeignDeleteChain, Family: t.Family, Table: t.Name, Chain: c})
			f.Chains = append(f.Chains, string(t.Family)+" "+t.Name+" "+c)
		}
	}
	return f
}

// calicoRule says whether a rule of a chain that is not Felix's is: it
// jumps or goes to a `cali-` chain, or carries Felix's rule comment (its
// base-chain rules that set or test the accept mark, such as `-A FORWARD
// -m mark --mark 0x10000/0x10000 -j ACCEPT`, jump nowhere).
func calicoRule(r nft.ForeignRule) bool {
	for _, t := range r.Targets {
		if strings.HasPrefix(t, chainPrefix) {
			return true
		}
	}
	for _, c := range r.Comments {
		if strings.HasPrefix(c, commentPrefix) {
			return true
		}
	}
	return false
}

// wanted selects the tables ReadForeign reads.
func wanted(family nft.Family, name string) bool {
	return isCalicoTable(family, name) || isSharedTable(family, name)
}
