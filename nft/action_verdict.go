package nft

import (
	"fmt"

	"github.com/google/nftables/expr"
)

// VerdictKind is an nftables verdict.
type VerdictKind string

const (
	Accept VerdictKind = "accept"
	Drop   VerdictKind = "drop"
	Return VerdictKind = "return"
	Jump   VerdictKind = "jump"
	Goto   VerdictKind = "goto"
)

// Verdict ends rule evaluation: accept, drop, return, or jump/goto Chain.
type Verdict struct {
	Kind  VerdictKind
	Chain string // for Jump and Goto only
}

func (a Verdict) printAction(c *ruleContext) string {
	return a.String()
}

func (a Verdict) encodeAction(e *encoder) error {
	v, err := verdictExpr(a)
	if err != nil {
		return err
	}
	e.add(v)
	return nil
}

func (a Verdict) checkAction(rc *ruleCheck) error {
	return checkVerdict(rc.m, a)
}

func (a Verdict) inARP() bool { return true }

func (a Verdict) refs(chain, set func(string)) {
	if a.Kind == Jump || a.Kind == Goto {
		chain(a.Chain)
	}
}

// String returns the verdict as nft prints it: `accept`, `jump chain`.
func (v Verdict) String() string {
	if v.Kind == Jump || v.Kind == Goto {
		return string(v.Kind) + " " + v.Chain
	}
	return string(v.Kind)
}

func verdictExpr(v Verdict) (*expr.Verdict, error) {
	switch v.Kind {
	case Accept:
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	case Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case Return:
		return &expr.Verdict{Kind: expr.VerdictReturn}, nil
	case Jump:
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: v.Chain}, nil
	case Goto:
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: v.Chain}, nil
	}
	return nil, fmt.Errorf("unknown verdict %q", v.Kind)
}

// checkVerdict checks v and, when m is known, that a jump or goto target is
// a regular chain of m (the kernel refuses jumps to base chains with
// EOPNOTSUPP and to missing chains with ENOENT).
func checkVerdict(m *Model, v Verdict) error {
	switch v.Kind {
	case Accept, Drop, Return:
		if v.Chain != "" {
			return invalidf("%s verdict with a chain (%q)", v.Kind, v.Chain)
		}
		return nil
	case Jump, Goto:
		if err := checkName(v.Chain); err != nil {
			return fmt.Errorf("%s target: %w", v.Kind, err)
		}
		if m == nil {
			return nil
		}
		c := m.Chain(v.Chain)
		if c == nil {
			return invalidf("%s to unknown chain %q", v.Kind, v.Chain)
		}
		if c.Base != nil {
			return invalidf("%s to base chain %q", v.Kind, v.Chain)
		}
		return nil
	}
	return invalidf("unknown verdict %q", v.Kind)
}

// decodeVerdict reads a verdict immediate.
func decodeVerdict(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	v, ok := at[*expr.Verdict](xs, 0)
	if !ok || len(xs) != 1 {
		return nil, false
	}
	a, err := verdictFromExpr(v)
	return a, err == nil
}
