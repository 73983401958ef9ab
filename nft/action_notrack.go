package nft

import "github.com/google/nftables/expr"

// Notrack exempts the packet from connection tracking (raw layer only).
type Notrack struct{}

func (a Notrack) printAction(c *ruleContext) string {
	return "notrack"
}

func (a Notrack) encodeAction(e *encoder) error {
	e.add(&expr.Notrack{})
	return nil
}

func (a Notrack) checkAction(rc *ruleCheck) error {
	return nil
}

func (a Notrack) inARP() bool { return false }

func (a Notrack) refs(chain, set func(string)) {}

// decodeNotrack reads `notrack`.
func decodeNotrack(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	_, ok := at[*expr.Notrack](xs, 0)
	return Notrack{}, ok && len(xs) == 1
}
