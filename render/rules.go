package render

import (
	"unicode/utf8"

	"github.com/nftep/nftep/nft"
)

// maxCommentLen is the longest rule or element comment nftables keeps
// (NFT_USERDATA_MAXLEN leaves 128 bytes for the comment TLV in nft's CLI).
const maxCommentLen = 128

// rule builds a rule from its why-comment, its action and its matches.
func rule(comment string, action nft.Action, matches ...nft.Match) *nft.Rule {
	return &nft.Rule{Match: matches, Action: action, Comment: clipComment(comment)}
}

// clipComment shortens s to maxCommentLen bytes without splitting a UTF-8
// sequence.
func clipComment(s string) string {
	if len(s) <= maxCommentLen {
		return s
	}
	s = s[:maxCommentLen]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

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
