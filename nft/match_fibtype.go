package nft

import "github.com/google/nftables/expr"

// FibLocal matches on whether an address of the packet is local, by the
// kernel's route lookup: `fib daddr type local` (Dir Out: the destination is
// one of the host's addresses), `fib saddr type local` (Dir In), and with
// OIF `fib saddr . oif type != local` (the source is not an address of the
// output interface). Felix's `-m addrtype --dst-type LOCAL` and
// `--src-type LOCAL --limit-iface-out`.
type FibLocal struct {
	Dir    Direction
	OIF    bool
	Negate bool
}

// rtnLocal is RTN_LOCAL, the address type `local` (linux/rtnetlink.h).
const rtnLocal = 2

func (m FibLocal) printMatch(c *ruleContext) string {
	s := "fib " + dirWord(m.Dir, "saddr", "daddr")
	if m.OIF {
		s += " . oif"
	}
	return s + " type " + neq(m.Negate) + "local"
}

func (m FibLocal) fib() *expr.Fib {
	return &expr.Fib{Register: reg1, ResultADDRTYPE: true, FlagSADDR: m.Dir == In, FlagDADDR: m.Dir == Out, FlagOIF: m.OIF}
}

func (m FibLocal) encodeMatch(e *encoder) error {
	e.add(m.fib(), &expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: u32(rtnLocal)})
	return nil
}

func (m FibLocal) checkMatch(rc *ruleCheck) error { return checkDir(m.Dir) }

func (m FibLocal) arp() arpUse { return arpNo }

func (m FibLocal) sets(fn func(string)) {}

// decodeFibType reads `fib saddr|daddr [. oif] type [!=] local`.
func decodeFibType(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	f, ok := at[*expr.Fib](xs, 0)
	if !ok || !f.ResultADDRTYPE || f.FlagSADDR == f.FlagDADDR {
		return nil, 0
	}
	c, ok := cmpAt(xs, 1)
	if !ok {
		return nil, 0
	}
	neg, ok := negateOf(c.Op)
	if !ok {
		return nil, 0
	}
	m := FibLocal{Dir: Out, OIF: f.FlagOIF, Negate: neg}
	if f.FlagSADDR {
		m.Dir = In
	}
	return m, 2
}
