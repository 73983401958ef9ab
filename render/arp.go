package render

import (
	"github.com/nftep/nftep/nft"
)

// The arp-family table exists because the inet family cannot see ARP: it
// suppresses proxy-ARP replies that would claim a workload's own address to
// the workload itself (spec §2.9).

func arpStatic(cfg Config) ([]*nft.Chain, []*nft.Set) {
	if !cfg.ARPSuppression {
		return nil, nil
	}
	chains := []*nft.Chain{
		{
			Name: ARPChainOutput,
			Base: &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: nft.HookOutput, Priority: nft.PriorityFilter, Policy: nft.PolicyAccept},
			Rules: []*nft.Rule{
				rule("ARP reply suppression", jump(ARPChainDispatch)),
			},
		},
		{
			Name: ARPChainDispatch,
			Rules: []*nft.Rule{
				rule("Dispatch to endpoint chain by interface", nft.VMap{Key: nft.SelOIFName, Map: ARPMapDispatch}),
			},
		},
	}
	sets := []*nft.Set{{
		Name: ARPMapDispatch, Key: []nft.KeyType{nft.TypeIfName}, Data: nft.DataVerdict,
		Comment: "workload interface → ARP suppression chain",
	}}
	return chains, sets
}

// arpEndpoint renders a workload's ARP chain and dispatch element, for
// endpoints with at least one IPv4 address.
//
// The chain should hold one rule per address, `arp operation reply arp
// saddr ip <addr> drop`; nft.types has no ARP matches yet, so the chain is
// rendered empty (dispatch and lifecycle in place) until it does.
func arpEndpoint(iface string, v4nets []string, who string) ([]*nft.Chain, []SetElement) {
	var addrs int
	for _, n := range v4nets {
		if p, ok := parsePrefix(n); ok && p.Addr().Is4() {
			addrs++
		}
	}
	if addrs == 0 {
		return nil, nil
	}
	c := &nft.Chain{Name: chainName(LayerFilter, KindARP, iface), Comment: who}
	return []*nft.Chain{c}, []SetElement{{Set: ARPMapDispatch, Elem: nft.Element{
		Key: iface, Verdict: gotoP(c.Name), Comment: clipComment(who),
	}}}
}
