package render

import (
	"net/netip"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// baseChain is one hooked chain of the inet table and the rules it holds.
type baseChain struct {
	name     string
	hook     nft.Hook
	priority int
	// rules returns the chain's rules. Base chains only jump into our own
	// regular chains and turn the accept mark into a verdict afterwards.
	rules func(Config) []*nft.Rule
}

// baseChains are the base chains at iptables' hooks and priorities (raw -300,
// mangle -150, filter 0; the table is laid out in docs/architecture.md). All
// are `type filter` with policy accept: enforcement comes from explicit
// drops, and an accept in one base chain does not stop the next, so
// cross-layer decisions travel in the accept mark.
var baseChains = []baseChain{
	// Raw prerouting runs before conntrack: the RPF check and untracked
	// host policy (which may notrack).
	{ChainRawPrerouting, nft.HookPrerouting, nft.PriorityRaw, jumpOnly(ChainRawPreroutingEP)},
	// Raw output: untracked host policy for locally sent traffic.
	{ChainRawOutput, nft.HookOutput, nft.PriorityRaw, jumpOnly(ChainRawOutputEP)},
	// Mangle prerouting runs before nat prerouting (-100): pre-DNAT policy
	// sees the original destination.
	{ChainManglePrerouting, nft.HookPrerouting, nft.PriorityMangle, jumpOnly(ChainManglePreroutingEP)},
	// Mangle postrouting: host egress policy for DNAT'd traffic, which
	// filter output does not see as host traffic.
	{ChainManglePostrouting, nft.HookPostrouting, nft.PriorityMangle, jumpOnly(ChainManglePostroutingEP)},
	// Filter input: workload→host traffic and host ingress policy.
	{ChainFilterInput, nft.HookInput, nft.PriorityFilter, jumpOnly(ChainFilterInputEP)},
	// Filter forward: workload policy in both directions and forward host
	// policy. Afterwards, an accepted packet is accepted here, and every
	// forwarded packet gets the accept mark, which tells mangle
	// postrouting "forwarded: not host egress".
	{ChainFilterForward, nft.HookForward, nft.PriorityFilter, func(cfg Config) []*nft.Rule {
		return []*nft.Rule{
			rule("Workload and host endpoint policy", jump(ChainFilterForwardEP)),
			rule("Policy explicitly accepted packet", allowVerdict(cfg.FilterAllowAction), markSet(cfg.Marks.Accept)),
			rule("Tell mangle postrouting the packet was forwarded", setBits(cfg.Marks.Accept)),
		}
	}},
	// Filter output: host egress policy (traffic to workloads is exempt).
	{ChainFilterOutput, nft.HookOutput, nft.PriorityFilter, jumpOnly(ChainFilterOutputEP)},
}

func jumpOnly(chain string) func(Config) []*nft.Rule {
	return func(Config) []*nft.Rule {
		return []*nft.Rule{rule("Workload and host endpoint policy", jump(chain))}
	}
}

// dispatchPoint is one verdict-map dispatch: a chain holding one vmap rule
// and the default that applies when the interface is not in the map.
type dispatchPoint struct {
	chain string
	vmap  string
	key   nft.Selector
	// star is the kind of the "*" host endpoint's chain the default goes
	// to when there is one ("" for workload dispatch and for raw, where
	// "*" has no untracked policy).
	star string
	// starLayer is the layer of that chain.
	starLayer Layer
	// starWhen says whether this "*" endpoint is the default here.
	starWhen func(*proto.HostEndpoint) bool
	// workload marks workload dispatch: the default is to drop.
	workload bool
	// skipWorkloads puts `oifname "<prefix>*" return` before the "*" default:
	// no "*" egress policy for traffic to local workloads (as Felix's host
	// endpoint dispatch, felix/rules/dispatch.go).
	skipWorkloads bool
}

func anyStar(*proto.HostEndpoint) bool        { return true }
func starPreDNAT(ep *proto.HostEndpoint) bool { return len(ep.GetPreDnatTiers()) > 0 }

// dispatchPoints are every dispatch of the table. The packet cost of each
// is one map lookup whatever the number of endpoints.
var dispatchPoints = []dispatchPoint{
	// Workloads, both directions: an unknown workload interface fails closed.
	{chain: ChainFromWorkload, vmap: MapFromWorkload, key: nft.SelIIFName, workload: true},
	{chain: ChainToWorkload, vmap: MapToWorkload, key: nft.SelOIFName, workload: true},
	// Host endpoints, filter layer: host ingress, host egress, forwarded.
	// Filter output already returned for traffic to workloads, so no skip.
	{chain: ChainFromHost, vmap: MapFromHost, key: nft.SelIIFName, star: KindFromHost, starLayer: LayerFilter, starWhen: anyStar},
	{chain: ChainToHost, vmap: MapToHost, key: nft.SelOIFName, star: KindToHost, starLayer: LayerFilter, starWhen: anyStar},
	{chain: ChainFromHostForward, vmap: MapFromHostForward, key: nft.SelIIFName, star: KindFromHostForward, starLayer: LayerFilter, starWhen: anyStar},
	{chain: ChainToHostForward, vmap: MapToHostForward, key: nft.SelOIFName, star: KindToHostForward, starLayer: LayerFilter, starWhen: anyStar},
	// Mangle: pre-DNAT ingress ("*" only if it has pre-DNAT tiers), and
	// egress of DNAT'd traffic, where traffic to local workloads must skip
	// the "*" egress policy.
	{chain: ChainMangleFromHost, vmap: MapMangleFromHost, key: nft.SelIIFName, star: KindFromHost, starLayer: LayerMangle, starWhen: starPreDNAT},
	{chain: ChainMangleToHost, vmap: MapMangleToHost, key: nft.SelOIFName, star: KindToHost, starLayer: LayerMangle, starWhen: anyStar, skipWorkloads: true},
	// Raw: untracked policy; "*" never applies.
	{chain: ChainRawFromHost, vmap: MapRawFromHost, key: nft.SelIIFName},
	{chain: ChainRawToHost, vmap: MapRawToHost, key: nft.SelOIFName},
}

// chain renders the dispatch chain for the given "*" endpoint (nil: none).
func (d dispatchPoint) render(cfg Config, star *proto.HostEndpoint) *nft.Chain {
	c := &nft.Chain{Name: d.chain, Rules: []*nft.Rule{
		rule("Dispatch to endpoint chain by interface", nft.VMap{Key: d.key, Map: d.vmap}),
	}}
	switch {
	case d.workload:
		c.Rules = append(c.Rules, rule("Unknown interface", cfg.denyAction(LayerFilter)))
	case d.star != "" && star != nil && d.starWhen(star):
		if d.skipWorkloads {
			for _, p := range cfg.InterfacePrefixes {
				c.Rules = append(c.Rules, rule("Skip egress WHEP policy for traffic to local workload", ret, oifPrefix(p)))
			}
		}
		c.Rules = append(c.Rules, rule("Host endpoint *", gotoV(chainName(d.starLayer, d.star, AnyInterface))))
	}
	// Otherwise the chain ends: an interface without a host endpoint is
	// not policed, and the packet returns to the caller.
	return c
}

func hostDispatch(cfg Config, star *proto.HostEndpoint) []*nft.Chain {
	var out []*nft.Chain
	for _, d := range dispatchPoints {
		if !d.workload {
			out = append(out, d.render(cfg, star))
		}
	}
	return out
}

func staticChains(cfg Config) []*nft.Chain {
	var out []*nft.Chain
	for _, b := range baseChains {
		out = append(out, &nft.Chain{
			Name:  b.name,
			Base:  &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: b.hook, Priority: b.priority, Policy: nft.PolicyAccept},
			Rules: b.rules(cfg),
		})
	}
	out = append(out,
		cfg.rawPrerouting(), cfg.rawOutput(),
		cfg.manglePrerouting(), cfg.manglePostrouting(),
		cfg.filterInput(), cfg.filterForward(), cfg.filterOutput(),
		cfg.workloadToHost())
	for _, d := range dispatchPoints {
		out = append(out, d.render(cfg, nil))
	}
	out = append(out, cfg.failsafeChains()...)
	if cfg.EndpointMarks {
		out = append(out, cfg.endpointMarkChains()...)
	}
	return append(out, clusterStatic()...)
}

// staticSets are the dispatch maps (empty: Workload and Host fill them) and
// the RPF-skip sets.
func staticSets(cfg Config) []*nft.Set {
	var out []*nft.Set
	for _, d := range dispatchPoints {
		out = append(out, &nft.Set{
			Name: d.vmap, Key: []nft.KeyType{nft.TypeIfName}, Data: nft.DataVerdict,
			Comment: "interface → endpoint chain",
		})
	}
	out = append(out,
		&nft.Set{Name: SetWorkloadIfaces, Key: []nft.KeyType{nft.TypeIfName},
			Comment: "workload interfaces in the dispatch maps"},
		&nft.Set{Name: SetRPFSkipV4, Key: []nft.KeyType{nft.TypeIfName, nft.TypeIPv4Addr}, Interval: true,
			Comment: "workload interface . allowed spoofed IPv4 source"})
	if cfg.IPv6 {
		out = append(out,
			&nft.Set{Name: SetRPFSkipV6, Key: []nft.KeyType{nft.TypeIfName, nft.TypeIPv6Addr}, Interval: true,
				Comment: "workload interface . allowed spoofed IPv6 source"})
	}
	if cfg.EndpointMarks {
		out = append(out,
			&nft.Set{Name: MapEndpointMark, Key: []nft.KeyType{nft.TypeIfName}, Data: nft.DataVerdict,
				Comment: "interface → set-endpoint-mark chain"},
			&nft.Set{Name: MapFromEndpointMark, Key: []nft.KeyType{nft.TypeMark}, Data: nft.DataVerdict,
				Comment: "endpoint mark → from-endpoint chain"},
		)
	}
	return out
}

// The top-level chains, Felix's cali-PREROUTING/INPUT/…
// (felix/rules/static.go).

func (cfg Config) rawPrerouting() *nft.Chain {
	m := cfg.Marks
	c := &nft.Chain{Name: ChainRawPreroutingEP}
	c.Rules = append(c.Rules,
		rule("Clear nftep marks", clearBits(m.All())),
		rule("Tunnel traffic", jump(ChainRawTunnelPrerouting)))
	for _, p := range cfg.InterfacePrefixes {
		c.Rules = append(c.Rules, rule("Mark packets from workloads", setBits(m.Scratch0), iifPrefix(p)))
	}
	c.Rules = append(c.Rules,
		// Allowed spoofing: accept ends raw for the packet, skipping both
		// the RPF drop and (not needed for workloads) host dispatch. The
		// nfproto match keeps `ip saddr` from reading an IPv6 header in
		// the inet family (nft adds it implicitly; the model says it).
		rule("Allowed spoofed IPv4 source", accept,
			markSet(m.Scratch0), nft.NFProto{Family: nft.IPv4},
			nft.Lookup{Keys: []nft.Selector{nft.SelIIFName, nft.SelIPSaddr}, Set: SetRPFSkipV4}))
	if cfg.IPv6 {
		c.Rules = append(c.Rules,
			rule("Allowed spoofed IPv6 source", accept,
				markSet(m.Scratch0), nft.NFProto{Family: nft.IPv6},
				nft.Lookup{Keys: []nft.Selector{nft.SelIIFName, nft.SelIP6Saddr}, Set: SetRPFSkipV6}))
	}
	c.Rules = append(c.Rules,
		// Without IPv6 the fib check still applies to IPv6 packets from
		// workloads: family-agnostic, it drops the ones that fail it.
		rule("Drop packets from workloads that fail the strict RPF check", drop, markSet(m.Scratch0), nft.RPF{}),
		rule("Untracked host endpoint policy", jump(ChainRawFromHost), markClear(m.Scratch0)),
		rule("Untracked policy accepted packet", accept, markSet(m.Accept)),
	)
	return c
}

func (cfg Config) rawOutput() *nft.Chain {
	m := cfg.Marks
	return &nft.Chain{Name: ChainRawOutputEP, Rules: []*nft.Rule{
		rule("Clear nftep marks", clearBits(m.All())),
		rule("Untracked host endpoint policy", jump(ChainRawToHost)),
		rule("Tunnel traffic", jump(ChainRawTunnelOutput)),
		rule("Untracked policy accepted packet", accept, markSet(m.Accept)),
	}}
}

func (cfg Config) manglePrerouting() *nft.Chain {
	m := cfg.Marks
	allow := allowVerdict(cfg.MangleAllowAction)
	return &nft.Chain{Name: ChainManglePreroutingEP, Rules: []*nft.Rule{
		rule("Allow established and related", allow, ctEstablished),
		rule("Untracked policy accepted packet", allow, markSet(m.Accept)),
		rule("Pre-DNAT host endpoint policy", jump(ChainMangleFromHost)),
		rule("Pre-DNAT policy accepted packet", allow, markSet(m.Accept)),
	}}
}

func (cfg Config) manglePostrouting() *nft.Chain {
	m := cfg.Marks
	c := &nft.Chain{Name: ChainManglePostroutingEP}
	c.Rules = append(c.Rules, rule("Forwarded or already accepted", ret, markSet(m.Accept)))
	if cfg.EndpointMarks {
		c.Rules = append(c.Rules, rule("Forwarded by IPVS", ret, markAny(m.Endpoint)))
	}
	c.Rules = append(c.Rules,
		rule("Clear nftep marks", clearBits(m.All())),
		rule("Host endpoint egress policy for DNAT'd traffic", jump(ChainMangleToHost),
			nft.CtStatusMatch{Status: nft.CtStatusDNAT}),
		rule("Host endpoint policy accepted packet", ret, markSet(m.Accept)),
	)
	return c
}

func (cfg Config) filterInput() *nft.Chain {
	m := cfg.Marks
	allow := allowVerdict(cfg.FilterAllowAction)
	c := &nft.Chain{Name: ChainFilterInputEP, Rules: []*nft.Rule{
		// Before everything, as Felix: tunnel packets from Calico hosts
		// are accepted before host endpoint policy, others dropped.
		rule("Tunnel traffic from Calico hosts", jump(ChainFilterTunnelInput)),
	}}
	if cfg.EndpointMarks {
		c.Rules = append(c.Rules,
			rule("Clear endpoint mark", clearBits(m.Endpoint)),
			rule("Kubernetes services forwarded by IPVS", jump(ChainForwardCheck)),
			rule("Forwarded by IPVS: policed in filter output", ret, markAny(m.Endpoint)))
	}
	for _, p := range cfg.InterfacePrefixes {
		c.Rules = append(c.Rules, rule("From workload to host", gotoV(ChainWorkloadToHost), iifPrefix(p)))
	}
	c.Rules = append(c.Rules,
		rule("Untracked or pre-DNAT policy accepted packet", allow, markSet(m.Accept)),
		rule("Clear nftep marks", clearBits(m.All())),
		rule("Host endpoint ingress policy", jump(ChainFromHost)),
		rule("Host endpoint policy accepted packet", allow, markSet(m.Accept)),
	)
	return c
}

func (cfg Config) filterForward() *nft.Chain {
	m := cfg.Marks
	c := &nft.Chain{Name: ChainFilterForwardEP}
	// Unknown workload interfaces first, in both directions. Host forward
	// policy runs before workload dispatch (Felix's order), and its chains
	// accept established flows outright, so without these rules such a
	// flow of a removed or rejected workload would never reach the
	// dispatch's "Unknown interface" deny: fail closed instead.
	deny := cfg.denyAction(LayerFilter)
	for _, p := range cfg.InterfacePrefixes {
		c.Rules = append(c.Rules,
			rule("Unknown workload interface", deny, iifPrefix(p),
				nft.Lookup{Keys: []nft.Selector{nft.SelIIFName}, Set: SetWorkloadIfaces, Negate: true}),
			rule("Unknown workload interface", deny, oifPrefix(p),
				nft.Lookup{Keys: []nft.Selector{nft.SelOIFName}, Set: SetWorkloadIfaces, Negate: true}))
	}
	c.Rules = append(c.Rules,
		// Keep accept: it says raw or mangle policy already allowed the
		// packet, so forward host policy is skipped.
		rule("Clear nftep marks except accept", clearBits(m.All()&^m.Accept)),
		rule("Host endpoint forward ingress policy", jump(ChainFromHostForward), markClear(m.Accept)),
	)
	for _, p := range cfg.InterfacePrefixes {
		c.Rules = append(c.Rules,
			rule("From workload", jump(ChainFromWorkload), iifPrefix(p)),
			rule("To workload", jump(ChainToWorkload), oifPrefix(p)))
	}
	c.Rules = append(c.Rules, rule("Host endpoint forward egress policy", jump(ChainToHostForward)))
	return c
}

func (cfg Config) filterOutput() *nft.Chain {
	m := cfg.Marks
	allow := allowVerdict(cfg.FilterAllowAction)
	c := &nft.Chain{Name: ChainFilterOutputEP, Rules: []*nft.Rule{
		rule("Untracked policy accepted packet", allow, markSet(m.Accept)),
	}}
	if cfg.EndpointMarks {
		c.Rules = append(c.Rules, rule("Forwarded by IPVS", gotoV(ChainForwardEndpointMk), markAny(m.Endpoint)))
	}
	for _, p := range cfg.InterfacePrefixes {
		c.Rules = append(c.Rules, rule("Host to local workload is not policed here", ret, oifPrefix(p)))
	}
	c.Rules = append(c.Rules,
		rule("Tunnel traffic to Calico hosts", jump(ChainFilterTunnelOutput)),
		rule("Clear nftep marks", clearBits(m.All())),
		// DNAT'd traffic is policed in mangle postrouting, after the
		// rewrite, where the real output interface is known.
		rule("Host endpoint egress policy", jump(ChainToHost),
			nft.CtStatusMatch{Status: nft.CtStatusDNAT, Negate: true}),
		rule("Host endpoint policy accepted packet", allow, markSet(m.Accept)),
	)
	return c
}

// icmpv6HostTypes are the ICMPv6 types a workload may always send to its
// host: multicast listener query/report/done (130-132), router solicitation
// (133), neighbour solicitation and advertisement (135, 136). Only with
// IPv6 on: Felix renders them into its IPv6 tables alone.
var icmpv6HostTypes = []uint8{130, 131, 132, 133, 135, 136}

func (cfg Config) workloadToHost() *nft.Chain {
	allow := allowVerdict(cfg.FilterAllowAction)
	c := &nft.Chain{Name: ChainWorkloadToHost}
	if cfg.IPv6 {
		for _, t := range icmpv6HostTypes {
			c.Rules = append(c.Rules, rule("Allow IPv6 neighbour discovery and MLD to the host", allow,
				l4(protoICMPv6), nft.ICMP{Family: nft.IPv6, Type: t}))
		}
	}
	c.Rules = append(c.Rules, rule("Workload egress policy", jump(ChainFromWorkload)))
	var final nft.Action
	switch cfg.DefaultEndpointToHostAction {
	case ActionAccept:
		final = allow
	case ActionReturn:
		final = ret
	default:
		final = cfg.denyAction(LayerFilter)
	}
	c.Rules = append(c.Rules, rule("Configured DefaultEndpointToHostAction", final))
	return c
}

// failsafeChain is one failsafe chain: the ports it lets through as
// destination ports, and (raw and mangle only) as source ports, so that the
// replies of failsafe connections the host opened are not caught by
// untracked or pre-DNAT policy.
type failsafeChain struct {
	name  string
	layer Layer
	// dir is Ingress for the "in" chains: inbound entries match the
	// destination port and the peer as source address.
	dir     Dir
	replies bool
}

var failsafeChains = []failsafeChain{
	{ChainFailsafeIn, LayerFilter, Ingress, false},
	{ChainFailsafeOut, LayerFilter, Egress, false},
	{ChainMangleFailsafeIn, LayerMangle, Ingress, true},
	{ChainMangleFailsafeOut, LayerMangle, Egress, true},
	{ChainRawFailsafeIn, LayerRaw, Ingress, true},
	{ChainRawFailsafeOut, LayerRaw, Egress, true},
}

func (cfg Config) failsafeChains() []*nft.Chain {
	var out []*nft.Chain
	for _, f := range failsafeChains {
		var allow nft.Action
		switch f.layer {
		case LayerFilter:
			allow = allowVerdict(cfg.FilterAllowAction)
		case LayerMangle:
			allow = allowVerdict(cfg.MangleAllowAction)
		default:
			allow = accept
		}
		own, other := cfg.FailsafeInbound, cfg.FailsafeOutbound
		peerDir, word, otherWord := nft.In, "inbound", "outbound"
		if f.dir == Egress {
			own, other = other, own
			peerDir, word, otherWord = nft.Out, "outbound", "inbound"
		}
		c := &nft.Chain{Name: f.name}
		for _, pp := range own {
			if cfg.renders(pp) {
				c.Rules = append(c.Rules, rule("Failsafe "+word+" "+pp.String(), allow, failsafeMatch(pp, peerDir, dport(pp.Port))...))
			}
		}
		if f.replies {
			for _, pp := range other {
				if cfg.renders(pp) {
					c.Rules = append(c.Rules, rule("Failsafe "+otherWord+" reply "+pp.String(), allow, failsafeMatch(pp, peerDir, sport(pp.Port))...))
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// renders reports whether a failsafe entry is rendered: one limited to an
// IPv6 net is not when IPv6 is off (Felix renders it into its IPv6 tables
// only).
func (cfg Config) renders(pp ProtoPort) bool {
	return cfg.IPv6 || !pp.Net.IsValid() || !pp.Net.Addr().Is6()
}

func failsafeMatch(pp ProtoPort, peerDir nft.Direction, port nft.Port) []nft.Match {
	p := uint8(protoTCP)
	if pp.Proto == "udp" {
		p = protoUDP
	}
	ms := []nft.Match{l4(p), port}
	if pp.Net.IsValid() {
		fam := nft.IPv4
		if pp.Net.Addr().Is6() {
			fam = nft.IPv6
		}
		ms = append([]nft.Match{nft.Addr{Family: fam, Dir: peerDir, Prefixes: []netip.Prefix{pp.Net}}}, ms...)
	}
	return ms
}
