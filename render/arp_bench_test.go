package render

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// BenchmarkARPTable compares the arp table's two shapes at 10,000 workloads,
// in one run: "set" is nftep's (one rule, an `ifname . ipv4_addr` element per
// address), "chains" the shape before it (as Felix: a chain per workload
// behind an ifname → verdict map). Each reports the cold start of the table
// and one workload added: the transaction's time, operations and messages.
func BenchmarkARPTable(b *testing.B) {
	const n = 10_000
	cfg := DefaultConfig()
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 64, byte(i >> 8), byte(i)}) }
	iface := func(i int) string { return fmt.Sprintf("cali%07x", i) }

	setShape := func(m *nft.Model, from, to int) {
		chains, sets := ARPStatic(cfg)
		for _, s := range sets {
			if m.Set(s.Name) == nil {
				m.SetSet(s)
			}
		}
		for _, c := range chains {
			m.SetChain(c)
		}
		for i := from; i < to; i++ {
			o := Workload(cfg, WorkloadInput{ID: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("ns/pod-%d", i), EndpointId: "eth0"},
				Endpoint: &proto.WorkloadEndpoint{State: "active", Name: iface(i), Ipv4Nets: []string{addr(i).String() + "/32"}}})
			for _, e := range o.ARPElements {
				m.SetElement(e.Set, e.Elem)
			}
		}
	}
	chainShape := func(m *nft.Model, from, to int) {
		if m.Set("filter-arp") == nil {
			m.SetSet(&nft.Set{Name: "filter-arp", Key: []nft.KeyType{nft.TypeIfName}, Data: nft.DataVerdict})
			m.SetChain(&nft.Chain{Name: "filter-arp-dispatch", Rules: []*nft.Rule{{Action: nft.VMap{Key: nft.SelOIFName, Map: "filter-arp"}}}})
			m.SetChain(&nft.Chain{Name: ARPChainOutput, Base: &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: nft.HookOutput, Priority: nft.PriorityFilter, Policy: nft.PolicyAccept},
				Rules: []*nft.Rule{{Action: nft.Verdict{Kind: nft.Jump, Chain: "filter-arp-dispatch"}}}})
		}
		for i := from; i < to; i++ {
			c := &nft.Chain{Name: "filter-arp-" + iface(i), Rules: []*nft.Rule{{
				Match:  []nft.Match{nft.IfName{Dir: nft.Out, Name: iface(i)}, nft.ARPOperation{Op: nft.ARPOpReply}, nft.ARPSenderIP{Addr: addr(i)}},
				Action: nft.Verdict{Kind: nft.Drop}, Comment: "endpoint: Drop proxy-ARP reply claiming its own address"}}}
			m.SetChain(c)
			m.SetElement("filter-arp", nft.Element{Key: iface(i), Verdict: &nft.Verdict{Kind: nft.Goto, Chain: c.Name}})
		}
	}
	for _, shape := range []struct {
		name  string
		build func(m *nft.Model, from, to int)
	}{{"set", setShape}, {"chains", chainShape}} {
		b.Run(shape.name, func(b *testing.B) {
			var cold, one nft.ApplyStats
			for range b.N {
				ns := netnstest.New(b)
				tbl, err := nft.NewTable(nft.TableConfig{Family: nft.FamilyARP, Name: "nftep", NetNSFd: ns.Fd()})
				if err != nil {
					b.Fatal(err)
				}
				shape.build(tbl.Desired(), 0, n)
				if cold, err = tbl.Apply(context.Background()); err != nil {
					b.Fatal(err)
				}
				shape.build(tbl.Desired(), n, n+1)
				if one, err = tbl.Apply(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(cold.Total.Seconds()*1000, "cold-ms")
			b.ReportMetric(float64(cold.Operations), "cold-ops")
			b.ReportMetric(one.Total.Seconds()*1000, "one-ms")
			b.ReportMetric(float64(one.Operations), "one-ops")
			b.ReportMetric(float64(one.Messages), "one-msgs")
		})
	}
}
