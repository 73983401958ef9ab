package render

import (
	"encoding/binary"
	"net/netip"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
)

// workloadStateActive is the WorkloadEndpoint.State of an admin-up endpoint.
const workloadStateActive = "active"

func renderWorkload(cfg Config, in WorkloadInput) Output {
	ep := in.Endpoint
	parsed := in.Parsed
	if parsed == nil {
		// Render what parses; the endpoint manager refuses the whole
		// endpoint instead, and passes Parsed.
		parsed, _ = felix.ParseWorkload(ep, cfg.IPv6)
	}
	iface := ep.GetName()
	who := "endpoint " + workloadID(in.ID)
	var out Output

	adminDown := ep.GetState() != workloadStateActive
	base := chainSpec{
		layer:     LayerFilter,
		typ:       typeNormal,
		tiers:     ep.GetTiers(),
		profiles:  ep.GetProfileIds(),
		allow:     cfg.FilterAllowAction,
		qos:       ep.GetQosControls(),
		adminDown: adminDown,
		selectors: in.Selectors,
	}
	groups := map[string]bool{}
	addGroups := func(cs []*nft.Chain) {
		for _, c := range cs {
			if !groups[c.Name] {
				groups[c.Name] = true
				out.Shared = append(out.Shared, c)
			}
		}
	}

	var fromChain string
	// One chain per direction: tw (to the workload: its ingress policy),
	// then fw (from the workload: egress policy plus the encap drops).
	for _, d := range []struct {
		kind   string
		dir    Dir
		encap  bool
		vmap   string
		ifname func(string) nft.IfName
	}{
		{KindToWorkload, Ingress, false, MapToWorkload, oif},
		{KindFromWorkload, Egress, true, MapFromWorkload, iif},
	} {
		s := base
		s.dir, s.encap = d.dir, d.encap
		var key string
		if cfg.SharedEndpointChains && in.Bodies != nil {
			key = in.Bodies.keyOf(d.kind, s)
			if cb, ok := in.Bodies.bodies[key]; ok {
				addGroups(cb.groups)
				out.Shared = append(out.Shared, cb.chain)
				out.Elements = append(out.Elements, element(d.vmap, iface, gotoP(cb.chain.Name), who))
				fromChain = cb.chain.Name
				continue
			}
		}
		b := cfg.render(s)
		addGroups(b.groups)
		var c *nft.Chain
		if cfg.SharedEndpointChains && !b.stateful {
			c = &nft.Chain{Name: contentName(LayerFilter, d.kind, b.rules), Rules: b.rules}
			out.Shared = append(out.Shared, c)
			if key != "" {
				in.Bodies.bodies[key] = cachedBody{chain: c, groups: b.groups}
			}
		} else {
			c = &nft.Chain{Name: chainName(LayerFilter, d.kind, iface), Rules: withEndpoint(who, b.rules)}
			out.Chains = append(out.Chains, c)
		}
		out.Elements = append(out.Elements, element(d.vmap, iface, gotoP(c.Name), who))
		fromChain = c.Name
	}

	// Endpoint marks: a one-rule chain that puts the endpoint's mark into
	// the endpoint field, and the reverse mark → from-chain lookup.
	if cfg.EndpointMarks {
		sm := &nft.Chain{Name: chainName(LayerFilter, KindSetMark, iface)}
		if in.Mark != 0 {
			sm.Rules = []*nft.Rule{rule(who+": Set endpoint mark", setField(cfg.Marks.Endpoint, in.Mark))}
			out.Elements = append(out.Elements, element(MapFromEndpointMark, markKey(in.Mark), gotoP(fromChain), who))
		}
		out.Chains = append(out.Chains, sm)
		out.Elements = append(out.Elements, element(MapEndpointMark, iface, gotoP(sm.Name), who))
	}

	// The interface is a known workload interface (see SetWorkloadIfaces).
	out.Elements = append(out.Elements, element(SetWorkloadIfaces, iface, nil, who))

	// Spoofing allowances: this interface may send from these prefixes.
	out.Elements = append(out.Elements, rpfSkipElements(iface, parsed.AllowSpoofed, who, cfg.IPv6)...)

	// ARP reply suppression, for endpoints with IPv4 addresses.
	if cfg.ARPSuppression {
		out.ARPElements = arpEndpoint(iface, parsed.Nets[felix.IPv4], who)
	}
	return out
}

// rpfSkipElements returns the RPF-skip set elements of an interface, in the
// set of each prefix's family; IPv6 prefixes only with ipv6 (without it
// there is no IPv6 set). The prefixes are felix.Workload.AllowSpoofed
// (masked: the kernel keeps interval sets by their masked bounds). The elements of one interface must not overlap:
// the sets are concatenated interval sets, where the kernel refuses an
// element that overlaps another (EEXIST, failing the whole transaction), so
// each family's prefixes are reduced to disjoint ones first: repeats go,
// and a prefix inside another is covered by it (10.1.0.0/16 by 10.0.0.0/8).
// The set matches the same sources either way.
func rpfSkipElements(iface string, prefixes []netip.Prefix, who string, ipv6 bool) []SetElement {
	var fams [2][]netip.Prefix
	for _, p := range prefixes {
		f := felix.FamilyOf(p.Addr())
		fams[f] = append(fams[f], p)
	}
	if !ipv6 {
		fams[1] = nil
	}
	var out []SetElement
	for fam, set := range [2]string{SetRPFSkipV4, SetRPFSkipV6} {
		for _, p := range nft.DisjointPrefixes(fams[fam]) {
			out = append(out, element(set, iface+" . "+prefixKey(p), nil, who))
		}
	}
	return out
}

// prefixKey writes a prefix as nft prints it in a set: a host prefix as
// the bare address.
func prefixKey(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// markKey is a mark as a map key.
func markKey(m uint32) string { return "0x" + hex8(m) }

func hex8(v uint32) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
	return string(b)
}

// keyOf is the cache key of the chain of kind rendered from s: every
// field of s that render reads but the selectors (fixed for the cache's
// life), the protobuf messages in their deterministic encoding, each part
// preceded by its length.
func (bc *BodyCache) keyOf(kind string, s chainSpec) string {
	k := bc.key[:0]
	str := func(v string) {
		k = binary.AppendUvarint(k, uint64(len(v)))
		k = append(k, v...)
	}
	msg := func(m gproto.Message) {
		n := len(k)
		k = append(k, 0, 0, 0, 0)
		k, _ = gproto.MarshalOptions{Deterministic: true}.MarshalAppend(k, m)
		binary.LittleEndian.PutUint32(k[n:], uint32(len(k)-n-4))
	}
	str(kind)
	str(string(s.layer))
	k = binary.AppendUvarint(k, uint64(s.typ))
	k = binary.AppendUvarint(k, uint64(s.dir))
	str(s.failsafe)
	str(s.allow)
	k = append(k, boolByte(s.encap), boolByte(s.adminDown), boolByte(s.qos != nil))
	k = binary.AppendUvarint(k, uint64(len(s.tiers)))
	for _, t := range s.tiers {
		msg(t)
	}
	k = binary.AppendUvarint(k, uint64(len(s.profiles)))
	for _, p := range s.profiles {
		str(p)
	}
	if s.qos != nil {
		msg(s.qos)
	}
	bc.key = k
	return string(k)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
