package render

import (
	"net/netip"

	"github.com/nftep/nftep/nft"
)

// The arp-family table exists because the inet family cannot see ARP: it
// suppresses proxy-ARP replies that would claim a workload's own address to
// the workload itself (Felix's ARP-suppression chains, cali-arp-<if>, in
// felix/dataplane/linux/endpoint_mgr.go).

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
// endpoints with at least one IPv4 address: one rule per IPv4 net, in order,
// `oifname "<if>" arp operation reply arp saddr ip <addr> drop`, where addr
// is the net's address without its prefix length (not the masked network:
// 10.65.0.7/24 gives 10.65.0.7; felix.ParseCIDR keeps host bits for this).
// It stops the host's proxy ARP from telling the workload that its own
// address is somewhere else. An address listed twice gets one rule.
func arpEndpoint(iface string, v4nets []netip.Prefix, who string) ([]*nft.Chain, []SetElement) {
	var rules []*nft.Rule
	seen := map[netip.Addr]bool{}
	for _, n := range v4nets {
		a := n.Addr()
		if !a.Is4() || seen[a] {
			continue
		}
		seen[a] = true
		rules = append(rules, rule("Drop proxy-ARP reply claiming its own address", drop,
			nft.IfName{Dir: nft.Out, Name: iface},
			nft.ARPOperation{Op: nft.ARPOpReply},
			nft.ARPSenderIP{Addr: a}))
	}
	if len(rules) == 0 {
		return nil, nil
	}
	c := &nft.Chain{Name: chainName(LayerFilter, KindARP, iface), Comment: safeComment(who), Rules: withEndpoint(who, rules)}
	return []*nft.Chain{c}, []SetElement{element(ARPMapDispatch, iface, gotoP(c.Name), who)}
}
