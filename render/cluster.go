package render

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/nftep/nftep/nft"
)

// Cluster networking in the inet table: natOutgoing (Felix's masquerade
// manager, felix/rules/nat.go) and the rules that depend on the
// encapsulation (felix/rules/static.go): IPIP and VXLAN accepted only from
// Calico hosts, VXLAN untracked, host traffic into a tunnel masqueraded to
// the tunnel address. Static writes the chains empty, with the jumps that
// place them; the pools manager fills them (NATOutgoing, Tunnel) and the
// sets (ClusterSets, PrefixElements).

// The nat base chain and the cluster networking chains.
const (
	// ChainNATPostrouting is the nat base chain: postrouting, priority
	// srcnat + 10 (after kube-proxy's srcnat), type nat. It sees the first
	// packet of each connection only.
	ChainNATPostrouting = "nat-postrouting"
	// ChainNATOutgoing holds natOutgoing: empty in a family without a
	// natOutgoing pool.
	ChainNATOutgoing = "nat-outgoing"
	// ChainNATTunnelSource masquerades host traffic that leaves through a
	// tunnel device with a host address to the tunnel's address.
	ChainNATTunnelSource = "nat-tunnel-source"
	// ChainFilterTunnelInput accepts IPIP and VXLAN from Calico hosts and
	// drops it from others, before workload and host endpoint policy.
	ChainFilterTunnelInput = "filter-tunnel-input"
	// ChainFilterTunnelOutput accepts IPIP and VXLAN to Calico hosts before
	// host endpoint egress policy.
	ChainFilterTunnelOutput = "filter-tunnel-output"
	// ChainRawTunnelPrerouting and ChainRawTunnelOutput take VXLAN out of
	// conntrack.
	ChainRawTunnelPrerouting = "raw-tunnel-prerouting"
	ChainRawTunnelOutput     = "raw-tunnel-output"
)

// The cluster sets, one per family (name + "-v4" / "-v6"), all interval
// sets of addresses.
const (
	// SetAllPools holds every IP pool but LoadBalancer-only ones (Felix's
	// network-ip-pools): natOutgoing leaves traffic to them alone.
	SetAllPools = "all-pools"
	// SetMasqPools holds the natOutgoing pools (masq-ipam-pools).
	SetMasqPools = "masq-pools"
	// SetAllHosts holds every Calico node's address (all-hosts-net) and,
	// in IPv4, ExternalNodesCIDRList.
	SetAllHosts = "all-hosts"
	// SetVXLANSources holds every remote VTEP's parent address and
	// ExternalNodesCIDRList (all-vxlan-net).
	SetVXLANSources = "vxlan-sources"
)

// FamilySet returns the name of the family's set of a cluster set kind.
func FamilySet(kind string, f nft.IPFamily) string {
	if f == nft.IPv6 {
		return kind + "-v6"
	}
	return kind + "-v4"
}

// Encap is the encapsulation Felix decided (proto.Encapsulation): which
// tunnel rules exist. The first Encapsulation message of a process decides
// it; Felix restarts the driver when it changes.
type Encap struct {
	IPIP, VXLAN, VXLANV6 bool
}

// ClusterSets returns the cluster sets, empty, for the families cfg renders.
func ClusterSets(cfg Config) []*nft.Set {
	var out []*nft.Set
	for _, f := range cfg.Families() {
		key := []nft.KeyType{nft.TypeIPv4Addr}
		if f == nft.IPv6 {
			key = []nft.KeyType{nft.TypeIPv6Addr}
		}
		for _, s := range []struct{ kind, comment string }{
			{SetAllPools, "IP pools except LoadBalancer-only ones"},
			{SetMasqPools, "IP pools with natOutgoing"},
			{SetAllHosts, "Calico hosts' addresses"},
			{SetVXLANSources, "remote VTEPs' parent addresses and external nodes"},
		} {
			out = append(out, &nft.Set{Name: FamilySet(s.kind, f), Key: key, Interval: true, Comment: s.comment})
		}
	}
	return out
}

// PrefixElements returns the elements of an interval set holding every
// address of ps: the networks, with a network inside another one dropped
// (the kernel refuses overlapping intervals) and duplicates merged.
func PrefixElements(ps []netip.Prefix) map[string]nft.Element {
	ms := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		ms = append(ms, p.Masked())
	}
	// Shortest first: a prefix is kept only if no kept one contains it.
	slices.SortFunc(ms, func(a, b netip.Prefix) int {
		if a.Bits() != b.Bits() {
			return a.Bits() - b.Bits()
		}
		return a.Addr().Compare(b.Addr())
	})
	var kept []netip.Prefix
	out := map[string]nft.Element{}
	for _, p := range ms {
		if slices.ContainsFunc(kept, func(k netip.Prefix) bool { return k.Contains(p.Addr()) }) {
			continue
		}
		kept = append(kept, p)
		k := prefixKey(p)
		out[k] = nft.Element{Key: k}
	}
	return out
}

// natPortProtos are the protocols of Felix's ported natOutgoing rules.
var natPortProtos = []uint8{protoTCP, protoUDP}

// NATOutgoing returns the natOutgoing chain: for each family with a
// natOutgoing pool (active[0] IPv4, active[1] IPv6; IPv6 only with
// cfg.IPv6), traffic from a natOutgoing pool to an address in no pool (and,
// with NATOutgoingExclusions=IPPoolsAndHostIPs, to no Calico host), leaving
// through the filtered interface if there is a filter, is masqueraded (or in
// IPv4 SNATed to NATOutgoingAddress). With NATPortRange that is Felix's five
// rules: TCP and UDP get the port range and return, the rest is translated
// without one.
func NATOutgoing(cfg Config, active [2]bool) *nft.Chain {
	c := &nft.Chain{Name: ChainNATOutgoing}
	for _, f := range cfg.Families() {
		if !active[familyIndex(f)] {
			continue
		}
		m := []nft.Match{
			nft.Addr{Family: f, Dir: nft.In, Set: FamilySet(SetMasqPools, f)},
			nft.Addr{Family: f, Dir: nft.Out, Set: FamilySet(SetAllPools, f), Negate: true},
		}
		if cfg.NATExcludeHosts {
			m = append(m, nft.Addr{Family: f, Dir: nft.Out, Set: FamilySet(SetAllHosts, f), Negate: true})
		}
		if cfg.NATInterface != "" {
			m = append(m, nft.IfName{Dir: nft.Out, Name: cfg.NATInterface, Wildcard: cfg.NATInterfaceWildcard})
		}
		action := func(ports *nft.PortRange) nft.Action {
			if f == nft.IPv4 && cfg.NATOutgoingAddress.IsValid() {
				return nft.SNAT{Addr: cfg.NATOutgoingAddress, Ports: ports, FullyRandom: cfg.NATFullyRandom}
			}
			return nft.Masquerade{Ports: ports, FullyRandom: cfg.NATFullyRandom}
		}
		what := "Masquerade"
		if f == nft.IPv4 && cfg.NATOutgoingAddress.IsValid() {
			what = "SNAT"
		}
		why := fmt.Sprintf("natOutgoing: %s IPv%d traffic from a natOutgoing pool leaving the pools", what, f)
		if r := cfg.NATPortRange; r != nil {
			for _, p := range natPortProtos {
				pm := append(slices.Clone(m), l4(p))
				c.Rules = append(c.Rules,
					rule(fmt.Sprintf("%s, %s source ports %d-%d", why, protoWord(p), r.First, r.Last), action(r), pm...),
					rule(fmt.Sprintf("natOutgoing: %s done", protoWord(p)), ret, pm...))
			}
		}
		c.Rules = append(c.Rules, rule(why, action(nil), m...))
	}
	return c
}

func familyIndex(f nft.IPFamily) int {
	if f == nft.IPv6 {
		return 1
	}
	return 0
}

func protoWord(p uint8) string {
	if p == protoTCP {
		return "TCP"
	}
	return "UDP"
}

// Tunnel returns the chains of the encapsulation rules (Felix's
// felix/rules/static.go, §8 of the cluster networking spec), in the order
// Felix gives them. An accept there is the filter layer's accept: it ends
// our base chain, where FilterAllowAction=RETURN would also have ended it
// (the base chain holds nothing after the jump), and other tables still
// see the packet.
func Tunnel(cfg Config, e Encap) []*nft.Chain {
	vx := [2]bool{e.VXLAN, e.VXLANV6 && cfg.IPv6}
	port := nft.Port{Dir: nft.Out, Ranges: []nft.PortRange{{First: cfg.VXLANPort, Last: cfg.VXLANPort}}}
	udp := l4(protoUDP)
	in := &nft.Chain{Name: ChainFilterTunnelInput}
	out := &nft.Chain{Name: ChainFilterTunnelOutput}
	if e.IPIP {
		ipip := l4(protoIPIP)
		v4 := nft.NFProto{Family: nft.IPv4}
		in.Rules = append(in.Rules,
			rule("Allow IPIP packets from Calico hosts", accept,
				ipip, nft.Addr{Family: nft.IPv4, Dir: nft.In, Set: FamilySet(SetAllHosts, nft.IPv4)}, nft.FibLocal{Dir: nft.Out}),
			rule(cfg.denyWord(LayerFilter)+" IPIP packets from non-Calico hosts", cfg.denyAction(LayerFilter), v4, ipip))
		out.Rules = append(out.Rules,
			rule("Allow IPIP packets to other Calico hosts", accept,
				ipip, nft.Addr{Family: nft.IPv4, Dir: nft.Out, Set: FamilySet(SetAllHosts, nft.IPv4)}, nft.FibLocal{Dir: nft.In}))
	}
	for _, f := range []nft.IPFamily{nft.IPv4, nft.IPv6} {
		if !vx[familyIndex(f)] {
			continue
		}
		set := FamilySet(SetVXLANSources, f)
		// Felix drops unknown IPv4 VXLAN whatever FilterDenyAction says
		// (a quirk kept here); IPv6 uses the configured deny.
		deny, word := nft.Action(drop), "Drop"
		if f == nft.IPv6 {
			deny, word = cfg.denyAction(LayerFilter), cfg.denyWord(LayerFilter)
		}
		in.Rules = append(in.Rules,
			rule(fmt.Sprintf("Allow IPv%d VXLAN packets from allowed hosts", f), accept,
				nft.Addr{Family: f, Dir: nft.In, Set: set}, udp, port, nft.FibLocal{Dir: nft.Out}),
			rule(fmt.Sprintf("%s IPv%d VXLAN packets from non-allowed hosts", word, f), deny,
				nft.NFProto{Family: f}, udp, port, nft.FibLocal{Dir: nft.Out}))
		out.Rules = append(out.Rules,
			rule(fmt.Sprintf("Allow IPv%d VXLAN packets to other allowed hosts", f), accept,
				nft.Addr{Family: f, Dir: nft.Out, Set: set}, udp, port, nft.FibLocal{Dir: nft.In}))
	}
	rawPre := &nft.Chain{Name: ChainRawTunnelPrerouting}
	rawOut := &nft.Chain{Name: ChainRawTunnelOutput}
	if vx[0] || vx[1] {
		// VXLAN uses different source ports each way: conntrack would
		// only see unreplied flows.
		m := []nft.Match{udp, port}
		if vx[0] != vx[1] {
			f := nft.IPv4
			if vx[1] {
				f = nft.IPv6
			}
			m = append([]nft.Match{nft.NFProto{Family: f}}, m...)
		}
		rawPre.Rules = append(rawPre.Rules, rule("Do not track VXLAN", nft.Notrack{}, m...))
		rawOut.Rules = append(rawOut.Rules, rule("Do not track VXLAN", nft.Notrack{}, m...))
	}
	nat := &nft.Chain{Name: ChainNATTunnelSource}
	for _, d := range []struct {
		dev  string
		on   bool
		addr netip.Addr
		// vxlan says whether the device's family has VXLAN on: then a
		// masqueraded UDP source port must not be the VXLAN port.
		vxlan bool
	}{
		{"tunl0", e.IPIP, cfg.TunnelAddrIPIP, vx[0]},
		{"vxlan.calico", vx[0], cfg.TunnelAddrVXLAN, vx[0]},
		{"vxlan-v6.calico", vx[1], cfg.TunnelAddrVXLANV6, vx[1]},
	} {
		if !d.on || !d.addr.IsValid() {
			continue
		}
		m := []nft.Match{
			nft.IfName{Dir: nft.Out, Name: d.dev},
			nft.FibLocal{Dir: nft.In, OIF: true, Negate: true},
			nft.FibLocal{Dir: nft.In},
		}
		why := "Masquerade host traffic into " + d.dev + " to the tunnel address"
		if r, ok := masqPortRangeExcluding(cfg.VXLANPort); ok && d.vxlan {
			nat.Rules = append(nat.Rules, rule(fmt.Sprintf("%s, UDP source ports %d-%d (not the VXLAN port)", why, r.First, r.Last),
				nft.Masquerade{Ports: &r, FullyRandom: cfg.NATFullyRandom}, append(slices.Clone(m), udp)...))
		}
		nat.Rules = append(nat.Rules, rule(why, nft.Masquerade{FullyRandom: cfg.NATFullyRandom}, m...))
	}
	return []*nft.Chain{in, out, rawPre, rawOut, nat}
}

// masqPortRangeExcluding is the wider of 1024..port-1 and port+1..65535
// (Felix's masqPortRangeExcluding): a masqueraded source port equal to the
// VXLAN port would make the reply look like VXLAN and be dropped.
func masqPortRangeExcluding(port uint16) (nft.PortRange, bool) {
	low := int(port) - 1024   // size of 1024..port-1
	high := 65535 - int(port) // size of port+1..65535
	switch {
	case low <= 0 && high <= 0: // cannot happen for a 16-bit port
		return nft.PortRange{}, false
	case low > high:
		return nft.PortRange{First: 1024, Last: port - 1}, true
	case high > 0 && int(port)+1 < 65535:
		return nft.PortRange{First: port + 1, Last: 65535}, true
	}
	return nft.PortRange{}, false
}

// clusterStatic returns the cluster chains as Static writes them: empty
// until the pools manager fills them, and the nat base chain.
func clusterStatic() []*nft.Chain {
	return []*nft.Chain{
		{Name: ChainNATPostrouting,
			Base: &nft.BaseChain{Type: nft.ChainTypeNAT, Hook: nft.HookPostrouting, Priority: nft.PrioritySrcNAT + 10, Policy: nft.PolicyAccept},
			Rules: []*nft.Rule{
				rule("natOutgoing", jump(ChainNATOutgoing)),
				rule("Host traffic into a tunnel", jump(ChainNATTunnelSource)),
			}},
		{Name: ChainNATOutgoing},
		{Name: ChainNATTunnelSource},
		{Name: ChainFilterTunnelInput},
		{Name: ChainFilterTunnelOutput},
		{Name: ChainRawTunnelPrerouting},
		{Name: ChainRawTunnelOutput},
	}
}
