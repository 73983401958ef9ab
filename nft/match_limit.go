package nft

import (
	"fmt"

	"github.com/google/nftables/expr"
)

// Limit matches while the packet rate is over Rate per second (with Burst
// packets of slack): `limit rate over 100/second burst 5 packets`.
type Limit struct {
	Rate  uint64
	Burst uint32
}

func (m Limit) printMatch(c *ruleContext) string {
	s := fmt.Sprintf("limit rate over %d/second", m.Rate)
	// nft leaves out its default burst of 5 packets.
	if b := limitBurst(m); b != 5 {
		s += fmt.Sprintf(" burst %d packets", b)
	}
	return s
}

func (m Limit) encodeMatch(e *encoder) error {
	e.add(&expr.Limit{Type: expr.LimitTypePkts, Rate: m.Rate, Over: true, Unit: expr.LimitTimeSecond, Burst: limitBurst(m)})
	return nil
}

func (m Limit) checkMatch(rc *ruleCheck) error {
	if m.Rate == 0 {
		return invalidf("limit rate 0")
	}
	return nil
}

func (m Limit) arp() arpUse { return arpAlso }

func (m Limit) sets(fn func(string)) {}

// limitBurst returns the burst to program: nft's default of 5 packets when
// unset, as the kernel would substitute anyway (nft_limit_init).
func limitBurst(l Limit) uint32 {
	if l.Burst == 0 {
		return 5
	}
	return l.Burst
}

// decodeLimit reads `limit rate over N/second [burst B packets]`. nft's
// default burst of 5 decodes as Burst 0, which prints and encodes alike.
func decodeLimit(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	l, ok := at[*expr.Limit](xs, 0)
	if !ok {
		return nil, 0
	}
	m := Limit{Rate: l.Rate, Burst: l.Burst}
	if m.Burst == 5 {
		m.Burst = 0
	}
	return m, 1
}
