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
	// One rule and one set for the whole node: the set holds each
	// workload interface with its IPv4 addresses, so an endpoint is one
	// element per address, and the table's size and the cost of a change
	// do not grow with the number of endpoints.
	chains := []*nft.Chain{{
		Name: ARPChainOutput,
		Base: &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: nft.HookOutput, Priority: nft.PriorityFilter, Policy: nft.PolicyAccept},
		Rules: []*nft.Rule{
			rule("Drop proxy-ARP reply claiming a workload's own address", drop,
				nft.ARPOperation{Op: nft.ARPOpReply},
				nft.Lookup{Keys: []nft.Selector{nft.SelOIFName, nft.SelARPSaddrIP}, Set: ARPSetOwn}),
		},
	}}
	sets := []*nft.Set{{
		Name: ARPSetOwn, Key: []nft.KeyType{nft.TypeIfName, nft.TypeIPv4Addr},
		Comment: "workload interface . its own IPv4 address",
	}}
	return chains, sets
}

// arpEndpoint renders a workload's ARP suppression, for endpoints with IPv4
// addresses: one element of the ARPSetOwn set per IPv4 net, `"<if>" .
// <addr>`, where addr is the net's address without its prefix length (not
// the masked network: 10.65.0.7/24 gives 10.65.0.7; felix.ParseCIDR keeps
// host bits for this). The output chain's rule then drops a reply ARP
// packet leaving through the interface with that sender address: it stops
// the host's proxy ARP from telling the workload that its own address is
// somewhere else. An address listed twice gives one element.
func arpEndpoint(iface string, v4nets []netip.Prefix, who string) []SetElement {
	var out []SetElement
	seen := map[netip.Addr]bool{}
	for _, n := range v4nets {
		a := n.Addr()
		if !a.Is4() || seen[a] {
			continue
		}
		seen[a] = true
		out = append(out, element(ARPSetOwn, iface+" . "+a.String(), nil, who))
	}
	return out
}
