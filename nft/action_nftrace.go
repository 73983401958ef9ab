package nft

import "github.com/google/nftables/expr"

// SetNftrace sets the packet's nftrace bit (`meta nftrace set 1`): from
// then on, every rule the packet matches, in every table, and the policy
// that ends a base chain are reported to NFNLGRP_NFTRACE listeners (see
// ListenTrace). nftep's own table never holds it; `nftep explain --confirm`
// puts it in a temporary table of its own for one flow.
type SetNftrace struct{}

func (a SetNftrace) printAction(c *ruleContext) string { return "meta nftrace set 1" }

func (a SetNftrace) encodeAction(e *encoder) error {
	// The nftrace bit is one byte wide (nft_meta_set_init's length for
	// NFT_META_NFTRACE), so is the immediate nft loads into it.
	e.add(&expr.Immediate{Register: reg1, Data: []byte{1}},
		&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: reg1})
	return nil
}

func (a SetNftrace) checkAction(rc *ruleCheck) error { return nil }

func (a SetNftrace) inARP() bool { return true }

func (a SetNftrace) refs(chain, set func(string)) {}

// decodeSetNftrace reads `meta nftrace set 1`.
func decodeSetNftrace(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	imm, ok1 := at[*expr.Immediate](xs, 0)
	m, ok2 := at[*expr.Meta](xs, 1)
	ok := ok1 && ok2 && len(xs) == 2 && imm.Register == reg1 && len(imm.Data) == 1 && imm.Data[0] == 1 &&
		m.Key == expr.MetaKeyNFTRACE && m.SourceRegister && m.Register == reg1
	return SetNftrace{}, ok
}
