package tracer

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
)

// node is a small table in nftep's shape: an input base chain that sends
// packets from cali* through a verdict map to an endpoint chain, whose
// policy sets the accept mark that the base chain turns into the verdict.
func node() *nft.Model {
	m := nft.NewModel(nft.FamilyINet, "t")
	m.SetSet(&nft.Set{Name: "wl", Key: []nft.KeyType{nft.TypeIfName}, Data: nft.DataVerdict})
	m.SetElement("wl", nft.Element{Key: "cali-a", Verdict: &nft.Verdict{Kind: nft.Goto, Chain: "ep-a"}})
	m.SetSet(&nft.Set{Name: "trusted", Key: []nft.KeyType{nft.TypeIPv4Addr}, Interval: true, Comment: "Felix IP set s:trusted"})
	m.SetElement("trusted", nft.Element{Key: "10.0.0.0/24"})
	accept := uint32(0x10000)
	m.SetChain(&nft.Chain{Name: "input", Base: &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: nft.HookInput, Priority: 0, Policy: nft.PolicyAccept},
		Rules: []*nft.Rule{
			{Match: []nft.Match{nft.IfName{Dir: nft.In, Name: "cali", Wildcard: true}}, Action: nft.Verdict{Kind: nft.Jump, Chain: "dispatch"}},
			{Match: []nft.Match{nft.Mark{Mask: accept, Value: accept}}, Action: nft.Verdict{Kind: nft.Accept}, Comment: "accepted"},
			{Match: []nft.Match{nft.IfName{Dir: nft.In, Name: "cali", Wildcard: true}}, Action: nft.Verdict{Kind: nft.Drop}, Comment: "default drop"},
		}})
	m.SetChain(&nft.Chain{Name: "dispatch", Rules: []*nft.Rule{
		{Action: nft.VMap{Key: nft.SelIIFName, Map: "wl"}},
		{Action: nft.Verdict{Kind: nft.Drop}, Comment: "unknown interface"},
	}})
	m.SetChain(&nft.Chain{Name: "ep-a", Rules: []*nft.Rule{
		{Match: []nft.Match{nft.Addr{Family: nft.IPv4, Dir: nft.In, Set: "trusted"}, nft.L4Proto{Protos: []uint8{ProtoTCP}}, nft.Port{Dir: nft.Out, Ranges: []nft.PortRange{{First: 22, Last: 22}}}},
			Action: nft.SetMark{And: ^accept, Xor: accept}, Comment: "policy ssh from trusted"},
	}})
	return m
}

func TestTraceDecidesAndExplains(t *testing.T) {
	m := node()
	pkt := func(src string, dport uint16, iif string) Packet {
		return Packet{Path: Input, IIF: iif, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("10.0.0.254"), Proto: ProtoTCP, SPort: 40000, DPort: dport}
	}
	for _, tc := range []struct {
		name          string
		p             Packet
		verdict, by   string
		cause, change string
	}{
		{"allowed by the policy", pkt("10.0.0.1", 22, "cali-a"), "accept", "accepted", "policy ssh from trusted", ""},
		{"untrusted source", pkt("10.9.0.1", 22, "cali-a"), "drop", "default drop", "", "accept if the source address were in @trusted (Felix IP set s:trusted)"},
		{"wrong port", pkt("10.0.0.1", 80, "cali-a"), "drop", "default drop", "", "accept if the destination port were 22"},
		{"unknown interface", pkt("10.0.0.1", 22, "cali-z"), "drop", "unknown interface", "", ""},
		{"not a workload", pkt("10.0.0.1", 22, "eth0"), "accept", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Trace(m, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.verdict {
				t.Errorf("verdict %s, want %s", res.Verdict, tc.verdict)
			}
			by := ""
			if d := res.Deciding(); d != nil && d.Rule != nil {
				by = d.Rule.Comment
			}
			if by != tc.by {
				t.Errorf("decided by %q, want %q", by, tc.by)
			}
			cause := ""
			if c := res.Causing(); c != nil {
				cause = c.Rule.Comment
			}
			if cause != tc.cause {
				t.Errorf("caused by %q, want %q", cause, tc.cause)
			}
			alts, err := Alternatives(m, tc.p, res)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range alts {
				got = append(got, a.Verdict+" if "+a.Condition)
			}
			if tc.change != "" && !strings.Contains(strings.Join(got, "\n"), tc.change) {
				t.Errorf("alternatives %q lack %q", got, tc.change)
			}
		})
	}
}

func TestTraceRefusesWhatItCannotEvaluate(t *testing.T) {
	m := node()
	m.Chain("ep-a").Rules = append([]*nft.Rule{{Match: []nft.Match{nft.Foreign{Text: "# unknown expression osf"}}, Action: nft.Verdict{Kind: nft.Accept}}}, m.Chain("ep-a").Rules...)
	_, err := Trace(m, Packet{Path: Input, IIF: "cali-a", Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.254"), Proto: ProtoTCP, DPort: 22})
	var e *Error
	if !errors.As(err, &e) || e.Chain != "ep-a" || e.Index != 0 || !strings.Contains(err.Error(), "cannot evaluate") {
		t.Fatalf("err = %v, want a cannot-evaluate error naming ep-a rule 1", err)
	}
	if _, err := Trace(m, Packet{Path: Input, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("fd00::1")}); err == nil {
		t.Error("a packet of two families traced")
	}
}
