package nft

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/netnstest"
)

// natModel is a nat base chain with every form of the NAT actions and the
// fib address-type matches, as the pools manager renders them.
func natModel() *Model {
	m := NewModel(FamilyINet, testTable)
	m.SetSet(&Set{Name: "pools-v4", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	tcp, udp := L4Proto{Protos: []uint8{6}}, L4Proto{Protos: []uint8{17}}
	src := Addr{Family: IPv4, Dir: In, Set: "pools-v4"}
	addr := netip.MustParseAddr("192.168.60.11")
	m.SetChain(&Chain{Name: "nat-postrouting", Base: &BaseChain{Type: ChainTypeNAT, Hook: HookPostrouting, Priority: PrioritySrcNAT + 10, Policy: PolicyAccept},
		Rules: []*Rule{rule("to nat", jump("nat-x"))}})
	m.SetChain(regular("nat-x",
		rule("a", Masquerade{Ports: &PortRange{32768, 65535}, FullyRandom: true}, src, tcp),
		rule("b", ret, src, tcp),
		rule("c", SNAT{Addr: addr, Ports: &PortRange{32768, 65535}, FullyRandom: true}, src, udp),
		rule("d", SNAT{Addr: addr, FullyRandom: true}, src),
		rule("e", Masquerade{}, IfName{Dir: Out, Name: "vxlan.calico"}, FibLocal{Dir: In, OIF: true, Negate: true}, FibLocal{Dir: In}),
		rule("f", Masquerade{FullyRandom: true}, Addr{Family: IPv6, Dir: In, Prefixes: []netip.Prefix{netip.MustParsePrefix("fd00:65::/64")}}),
	))
	return m
}

// TestNATKernel applies natModel through Table (nftep's own batch writer,
// which keeps the flags of a masquerade with ports that google/nftables'
// encoder drops) and checks that nft lists Model.String, that the kernel's
// expressions decode back to the same rules, and that a resync finds no
// drift.
func TestNATKernel(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := natModel()
	require.NoError(t, m.Validate())
	for _, n := range m.SetNames() {
		tbl.Desired().SetSet(m.Set(n))
	}
	for _, n := range m.ChainNames() {
		tbl.Desired().SetChain(m.Chain(n))
	}
	mustApply(t, tbl)
	got := ns.Run(t, "nft", "list", "table", "inet", testTable)
	if diff := cmp.Diff(trimmedLines(m.String()), trimmedLines(got)); diff != "" {
		t.Fatalf("nft list differs from Model.String (-want +got):\n%s", diff)
	}
	kt, err := ReadKernelTable(context.Background(), ns.Fd(), FamilyINet, testTable)
	require.NoError(t, err)
	require.Empty(t, kt.Problems)
	require.Equal(t, m.Chain("nat-x").String(), kt.Model.Chain("nat-x").String(), "decoded from the kernel")
	require.Equal(t, m.Chain("nat-postrouting").String(), kt.Model.Chain("nat-postrouting").String())
	tbl.genKnown = false
	rs, err := tbl.Resync(context.Background())
	require.NoError(t, err)
	require.False(t, rs.Drift.Any(), "drift after a cold apply: %s", rs.Drift)
}
