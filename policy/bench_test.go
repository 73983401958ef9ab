package policy

import (
	"fmt"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
)

// BenchmarkOneEndpointChange measures one endpoint chain rewritten with
// other policy jumps (UseChain and ReleaseChain, as the endpoint manager
// calls them) and the CompleteDeferredWork that follows, in a table of N
// endpoints (two chains each, ten rules, two policy jumps) over 200
// policies: the policy manager's cost of a one-endpoint batch, which must
// not grow with N.
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("%d_endpoints", n), func(b *testing.B) {
			h := newHarness(b)
			for p := range 200 {
				h.m.OnUpdate(policyUpdate(gnp(fmt.Sprint("p", p)), "default", allowTCP80, allowTCP80))
			}
			endpoint := func(i, variant int) *nft.Chain {
				c := &nft.Chain{Name: fmt.Sprintf("filter-tw-cali%d", i)}
				for r := range 8 {
					c.Rules = append(c.Rules, &nft.Rule{Action: nft.SetMark{And: ^uint32(1 << r)}})
				}
				for _, p := range []int{i % 200, (i + variant) % 200} {
					c.Rules = append(c.Rules, &nft.Rule{Action: nft.Verdict{Kind: nft.Jump, Chain: pi(fmt.Sprint("p", p))}})
				}
				return c
			}
			for i := range n {
				h.setChain(endpoint(i, 1))
				h.setChain(&nft.Chain{Name: fmt.Sprintf("filter-fw-cali%d", i), Rules: []*nft.Rule{
					{Action: nft.Verdict{Kind: nft.Jump, Chain: render.PolicyChainName(render.LayerFilter, render.Egress, "default", gnp(fmt.Sprint("p", i%200)))}},
				}})
			}
			if err := h.m.CompleteDeferredWork(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				h.setChain(endpoint(7, 2+i%50))
				if err := h.m.CompleteDeferredWork(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
