package nft

import (
	"fmt"
	"slices"

	"github.com/google/nftables/expr"
)

// RejectWith selects what a reject sends back.
type RejectWith string

const (
	// RejectTCPReset answers with a TCP RST (`reject with tcp reset`); the
	// rule must match TCP.
	RejectTCPReset RejectWith = "tcp reset"
	// RejectICMPPortUnreachable answers with the family's port-unreachable
	// (`reject`, nft's default).
	RejectICMPPortUnreachable RejectWith = ""
	// RejectICMPAdminProhibited answers with the family's
	// administratively-prohibited code (`reject with icmpx admin-prohibited`).
	RejectICMPAdminProhibited RejectWith = "icmpx admin-prohibited"
)

// Reject drops the packet and tells the sender.
type Reject struct {
	With RejectWith
}

func (a Reject) printAction(c *ruleContext) string {
	switch a.With {
	case RejectTCPReset:
		return "reject with tcp reset"
	case RejectICMPAdminProhibited:
		return "reject with icmpx admin-prohibited"
	}
	return "reject"
}

func (a Reject) encodeAction(e *encoder) error {
	switch a.With {
	case RejectTCPReset:
		e.add(&expr.Reject{Type: rejectTCPReset, Code: 0})
	case RejectICMPPortUnreachable:
		e.add(&expr.Reject{Type: rejectICMPX, Code: icmpxPortUnreach})
	case RejectICMPAdminProhibited:
		e.add(&expr.Reject{Type: rejectICMPX, Code: icmpxAdminProhibited})
	default:
		return fmt.Errorf("unknown reject type %q", a.With)
	}
	return nil
}

func (a Reject) checkAction(rc *ruleCheck) error {
	switch a.With {
	case RejectTCPReset:
		if !slices.Equal(rc.l4, []uint8{6}) {
			return invalidf("reject with tcp reset needs an earlier `meta l4proto tcp` match")
		}
	case RejectICMPPortUnreachable, RejectICMPAdminProhibited:
	default:
		return invalidf("unknown reject type %q", a.With)
	}
	return nil
}

func (a Reject) inARP() bool { return false }

func (a Reject) refs(chain, set func(string)) {}

// Reject types and codes (nf_tables.h enum nft_reject_types and
// nft_reject_inet_code). nft uses the family-independent icmpx codes in an
// inet table when the rule does not pin the family.
const (
	rejectTCPReset       = 1 // NFT_REJECT_TCP_RST
	rejectICMPX          = 2 // NFT_REJECT_ICMPX_UNREACH
	icmpxPortUnreach     = 1 // NFT_REJECT_ICMPX_PORT_UNREACH
	icmpxAdminProhibited = 3 // NFT_REJECT_ICMPX_ADMIN_PROHIBITED
)

// decodeReject reads the rejects nftep emits.
func decodeReject(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	r, ok := at[*expr.Reject](xs, 0)
	if !ok || len(xs) != 1 {
		return nil, false
	}
	switch {
	case r.Type == rejectTCPReset && r.Code == 0:
		return Reject{With: RejectTCPReset}, true
	case r.Type == rejectICMPX && r.Code == icmpxPortUnreach:
		return Reject{With: RejectICMPPortUnreachable}, true
	case r.Type == rejectICMPX && r.Code == icmpxAdminProhibited:
		return Reject{With: RejectICMPAdminProhibited}, true
	}
	return nil, false
}
