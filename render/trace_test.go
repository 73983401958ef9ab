package render

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/tracer"
)

// The render tests walk packets through rendered models with package tracer
// (the walker behind `nftep explain`); these are their shorthands.

// path is the sequence of hooks a packet crosses.
type path string

const (
	pathInput   path = "input"   // arrives at the host: prerouting, input
	pathForward path = "forward" // routed through: prerouting, forward, postrouting
	pathOutput  path = "output"  // sent by the host: output, postrouting
)

// packet is the part of a packet and its kernel context the rules look at.
type packet struct {
	path     path
	iif, oif string
	src, dst string // addresses; the family follows from src
	proto    uint8  // 6 tcp, 17 udp, 58 icmpv6, 4 ipip
	sport    uint16
	dport    uint16
	icmpType uint8
	ct       nft.CtState // conntrack state; 0 means new
	dnat     bool        // conntrack status has dnat
	rpfFail  bool        // the strict reverse-path check fails
	mark     uint32      // the mark on arrival
}

// traceResult is where a packet ended up.
type traceResult struct {
	verdict string   // "accept" (passed every hook), "drop" or "reject"
	mark    uint32   // the final mark
	notrack bool     // a notrack statement ran
	decider string   // the deciding rule, "chain[i] comment", or the policy, "chain policy"
	steps   []string // every rule evaluated, "chain[i] comment (matched)"
	// firstRuleOf maps a chain to the step index at which its first rule
	// was evaluated (for dispatch-cost assertions).
	firstRuleOf map[string]int
}

func (r traceResult) String() string {
	return fmt.Sprintf("%s (mark %#x) decided by %s\n  %s", r.verdict, r.mark, r.decider, strings.Join(r.steps, "\n  "))
}

// tracePacket runs p through m with package tracer and fails the test on
// anything the tracer cannot evaluate, so a new rule shape cannot silently
// pass.
func tracePacket(t testing.TB, m *nft.Model, p packet) traceResult {
	t.Helper()
	src, err := netip.ParseAddr(p.src)
	if err != nil {
		t.Fatalf("tracer: packet source %q: %v", p.src, err)
	}
	dst, err := netip.ParseAddr(p.dst)
	if err != nil {
		t.Fatalf("tracer: packet destination %q: %v", p.dst, err)
	}
	res, err := tracer.Trace(m, tracer.Packet{
		Path: tracer.Path(p.path), IIF: p.iif, OIF: p.oif, Src: src, Dst: dst,
		Proto: p.proto, SPort: p.sport, DPort: p.dport, ICMPType: p.icmpType,
		Ct: p.ct, DNAT: p.dnat, RPFFail: p.rpfFail, Mark: p.mark,
	})
	if err != nil {
		t.Fatalf("tracer: %v", err)
	}
	out := traceResult{verdict: res.Verdict, mark: res.Mark, notrack: res.Notrack, firstRuleOf: map[string]int{}}
	if d := res.Deciding(); d != nil && d.Index < 0 {
		out.decider = d.Chain + " policy"
	} else if d != nil {
		out.decider = fmt.Sprintf("%s[%d] %s", d.Chain, d.Index, d.Rule.Comment)
	}
	for _, st := range res.Steps {
		if st.Index < 0 {
			continue // a base chain's policy
		}
		if _, seen := out.firstRuleOf[st.Chain]; !seen && st.Index == 0 {
			out.firstRuleOf[st.Chain] = len(out.steps)
		}
		step := fmt.Sprintf("%s[%d] %s", st.Chain, st.Index, st.Rule.Comment)
		if st.Matched {
			step += " (matched)"
		}
		out.steps = append(out.steps, step)
	}
	return out
}
