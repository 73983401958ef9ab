package nft

import "github.com/google/nftables/expr"

// RPF matches packets that fail a strict reverse-path check: `fib saddr .
// mark . iif oif 0` — no route back to the source through the input
// interface (taking the mark into account).
type RPF struct{}

func (m RPF) printMatch(c *ruleContext) string {
	return "fib saddr . mark . iif oif 0"
}

func (m RPF) encodeMatch(e *encoder) error {
	e.add(&expr.Fib{Register: reg1, FlagSADDR: true, FlagMARK: true, FlagIIF: true, ResultOIF: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: u32(0)})
	return nil
}

func (m RPF) checkMatch(rc *ruleCheck) error {
	return nil
}

func (m RPF) arp() arpUse { return arpNo }

func (m RPF) sets(fn func(string)) {}

// decodeRPF reads `fib saddr . mark . iif oif 0`.
func decodeRPF(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	if _, ok := at[*expr.Fib](xs, 0); !ok {
		return nil, 0
	}
	return RPF{}, 2
}
