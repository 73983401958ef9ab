package render

import (
	"github.com/nftep/nftep/nft"
)

// rule builds a rule from its why-comment, its action and its matches.
func rule(comment string, action nft.Action, matches ...nft.Match) *nft.Rule {
	return &nft.Rule{Match: matches, Action: action, Comment: safeComment(comment)}
}

// element builds a set or map element owned by who (the comment names the
// endpoint); verdict is nil for a plain set.
func element(set, key string, verdict *nft.Verdict, who string) SetElement {
	return SetElement{Set: set, Elem: nft.Element{Key: key, Verdict: verdict, Comment: safeComment(who)}}
}

// safeComment is every comment render writes (rules, elements, owned
// chains): comments quote endpoint IDs, tier, policy and profile names,
// which come from the datastore and may hold anything. nft.SanitizeComment
// replaces what nft cannot print back (quotes, backslashes, control bytes,
// invalid UTF-8) and clips to the length nft keeps, so no input can make a
// comment that fails validation and with it the whole transaction.
func safeComment(s string) string { return nft.SanitizeComment(s) }

// Verdicts.
var (
	accept = nft.Verdict{Kind: nft.Accept}
	drop   = nft.Verdict{Kind: nft.Drop}
	ret    = nft.Verdict{Kind: nft.Return}
)

func jump(chain string) nft.Verdict   { return nft.Verdict{Kind: nft.Jump, Chain: chain} }
func gotoV(chain string) nft.Verdict  { return nft.Verdict{Kind: nft.Goto, Chain: chain} }
func gotoP(chain string) *nft.Verdict { v := gotoV(chain); return &v }

// Mark matches and statements.

// markSet matches when all of bits are set.
func markSet(bits uint32) nft.Mark { return nft.Mark{Mask: bits, Value: bits} }

// markClear matches when none of bits is set.
func markClear(bits uint32) nft.Mark { return nft.Mark{Mask: bits} }

// markAny matches when any of bits is set.
func markAny(bits uint32) nft.Mark { return nft.Mark{Mask: bits, Negate: true} }

// setBits sets bits, keeping the rest of the mark.
func setBits(bits uint32) nft.SetMark { return nft.SetMark{And: ^bits, Xor: bits} }

// clearBits clears bits, keeping the rest of the mark.
func clearBits(bits uint32) nft.SetMark { return nft.SetMark{And: ^bits} }

// setField sets the field mask to value, keeping the rest of the mark.
func setField(mask, value uint32) nft.SetMark { return nft.SetMark{And: ^mask, Xor: value} }

// Conntrack matches.
var (
	ctEstablished = nft.CtStateMatch{States: nft.CtStateEstablished | nft.CtStateRelated}
	ctInvalid     = nft.CtStateMatch{States: nft.CtStateInvalid}
)

// Protocol numbers.
const (
	protoIPIP   = 4
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
)

func l4(p uint8) nft.L4Proto { return nft.L4Proto{Protos: []uint8{p}} }

func dport(p uint16) nft.Port {
	return nft.Port{Dir: nft.Out, Ranges: []nft.PortRange{{First: p, Last: p}}}
}

func sport(p uint16) nft.Port {
	return nft.Port{Dir: nft.In, Ranges: []nft.PortRange{{First: p, Last: p}}}
}

func iif(name string) nft.IfName { return nft.IfName{Dir: nft.In, Name: name} }
func oif(name string) nft.IfName { return nft.IfName{Dir: nft.Out, Name: name} }

func iifPrefix(p string) nft.IfName { return nft.IfName{Dir: nft.In, Name: p, Wildcard: true} }
func oifPrefix(p string) nft.IfName { return nft.IfName{Dir: nft.Out, Name: p, Wildcard: true} }

// denyAction is the configured deny. Raw and mangle always drop: `reject` is
// not allowed at postrouting, and before kernel 5.19 not at prerouting.
func (cfg Config) denyAction(layer Layer) nft.Action {
	if layer == LayerFilter && cfg.FilterDenyAction == ActionReject {
		return nft.Reject{}
	}
	return drop
}

// denyWord is how comments name the deny action (Felix's wording).
func (cfg Config) denyWord(layer Layer) string {
	if layer == LayerFilter && cfg.FilterDenyAction == ActionReject {
		return "Reject"
	}
	return "Drop"
}

// allowVerdict turns an ActionAccept/ActionReturn setting into a verdict.
func allowVerdict(action string) nft.Verdict {
	if action == ActionReturn {
		return ret
	}
	return accept
}
