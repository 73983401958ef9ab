package explain

import (
	"slices"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/tracer"
)

// TestAlignMarksWhatOnlyOneSideHas: a rule only the kernel reports and one
// only the tracer computed each show as one line of their own, and the
// rules around them stay paired.
func TestAlignMarksWhatOnlyOneSideHas(t *testing.T) {
	kernel := []KernelStep{{Chain: "a", Index: 0}, {Chain: "a", Index: 1}, {Chain: "b", Index: 0}, {Chain: "a", Index: -1}}
	computed := []*tracer.Step{{Chain: "a", Index: 0}, {Chain: "b", Index: 0}, {Chain: "b", Index: 2}, {Chain: "a", Index: -1}}
	var got []string
	for _, l := range align(kernel, computed) {
		switch {
		case l.Agrees():
			got = append(got, "= "+l.Kernel.Chain)
		case l.Kernel != nil:
			got = append(got, "kernel "+l.Kernel.Chain)
		default:
			got = append(got, "computed "+l.Computed.Chain)
		}
	}
	want := []string{"= a", "kernel a", "= b", "computed b", "= a"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestKernelPathKeepsOnePacketOfOurTable: the events of other tables, of
// later packets (a retransmitted SYN) and implicit returns are left out;
// handles become chain and position.
func TestKernelPathKeepsOnePacketOfOurTable(t *testing.T) {
	m := nft.NewModel(nft.FamilyINet, "nftep")
	m.SetChain(&nft.Chain{Name: "c", Rules: []*nft.Rule{{Comment: "first"}, {Comment: "second"}}})
	kt := &nft.KernelTable{Model: m, Exists: true, Rules: map[string][]nft.KernelRule{"c": {{Handle: 7}, {Handle: 9}}}}
	events := []nft.TraceEvent{
		{ID: 1, Type: nft.TraceRule, Family: familyINet, Table: "nftep-trace", Chain: "prerouting", Handle: 2, Verdict: "continue"},
		{ID: 1, Type: nft.TraceRule, Family: familyINet, Table: "nftep", Chain: "c", Handle: 9, Verdict: "drop"},
		{ID: 1, Type: nft.TraceReturn, Family: familyINet, Table: "nftep", Chain: "c"},
		{ID: 1, Type: nft.TracePolicy, Family: familyINet, Table: "nftep", Chain: "base", Policy: "accept"},
		{ID: 2, Type: nft.TraceRule, Family: familyINet, Table: "nftep", Chain: "c", Handle: 7, Verdict: "continue"},
	}
	got, id, err := kernelPath(events, kt)
	if err != nil || id != 1 {
		t.Fatalf("kernelPath: id %d, %v", id, err)
	}
	want := []KernelStep{{Chain: "c", Index: 1, Verdict: "drop", Rule: m.Chain("c").Rules[1]}, {Chain: "base", Index: -1, Verdict: "accept"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, _, err := kernelPath(nil, kt); err == nil {
		t.Error("no events: no error")
	}
}
