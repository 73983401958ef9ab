package render

import (
	"strconv"

	"github.com/nftep/nftep/nft"
)

// DefaultNodePortRange is Kubernetes' default NodePort range (Felix's
// KubeNodePortRanges default, "30000:32767"), where the endpoint-mark chains
// look for IPVS NodePort traffic.
var DefaultNodePortRange = nft.PortRange{First: 30000, Last: 32767}

// endpointMarkChains are the static chains of the endpoint-mark feature
// (kube-proxy in IPVS mode, spec §7.2), with map dispatch instead of
// Felix's prefix trees.
func (cfg Config) endpointMarkChains() []*nft.Chain {
	m := cfg.Marks
	allow := allowVerdict(cfg.FilterAllowAction)
	deny := cfg.denyAction(LayerFilter)

	set := &nft.Chain{Name: ChainSetEndpointMark, Rules: []*nft.Rule{
		rule("Set the endpoint mark of the input interface", nft.VMap{Key: nft.SelIIFName, Map: MapEndpointMark}),
	}}
	for _, p := range cfg.InterfacePrefixes {
		set.Rules = append(set.Rules, rule("Unknown endpoint", deny, iifPrefix(p)))
	}
	set.Rules = append(set.Rules, rule("Non-Cali endpoint mark", setField(m.Endpoint, m.NonCali)))

	from := &nft.Chain{Name: ChainFromEndpointMark, Rules: []*nft.Rule{
		// The lookup keys on the whole mark (nft.VMap has no mask), so the
		// caller clears our other bits first; foreign bits would miss.
		rule("Dispatch to endpoint chain by endpoint mark", nft.VMap{Key: nft.SelMark, Map: MapFromEndpointMark}),
		rule("Unknown interface", deny),
	}}

	// INPUT sees IPVS traffic before IPVS forwards it; mark it with the
	// endpoint it came from, so filter output can apply that endpoint's
	// policy once IPVS has chosen a backend.
	check := &nft.Chain{Name: ChainForwardCheck, Rules: []*nft.Rule{
		rule("Established IPVS connections were checked on their first packet", ret, ctEstablished),
	}}
	r := nft.Port{Dir: nft.Out, Ranges: []nft.PortRange{DefaultNodePortRange}}
	check.Rules = append(check.Rules,
		rule("To kubernetes NodePort service", gotoV(ChainSetEndpointMark), l4(protoTCP), r),
		rule("To kubernetes NodePort service", gotoV(ChainSetEndpointMark), l4(protoUDP), r),
	)

	fwd := &nft.Chain{Name: ChainForwardEndpointMk, Rules: []*nft.Rule{
		rule("Clear nftep marks but the endpoint mark", clearBits(m.All())),
		rule("From endpoint policy", jump(ChainFromEndpointMark), nft.Mark{Mask: m.Endpoint, Value: m.NonCali, Negate: true}),
	}}
	for _, p := range cfg.InterfacePrefixes {
		fwd.Rules = append(fwd.Rules, rule("To workload", jump(ChainToWorkload), oifPrefix(p)))
	}
	fwd.Rules = append(fwd.Rules,
		rule("To host endpoint forward policy", jump(ChainToHostForward)),
		rule("Clear endpoint mark", clearBits(m.Endpoint)),
		rule("Policy explicitly accepted packet", allow, markSet(m.Accept)),
	)
	return []*nft.Chain{set, from, check, fwd}
}

// String returns the entry as Felix writes it: "tcp:22" or "tcp:10.0.0.0/8:22".
func (pp ProtoPort) String() string {
	if pp.Net.IsValid() {
		return pp.Proto + ":" + pp.Net.String() + ":" + strconv.Itoa(int(pp.Port))
	}
	return pp.Proto + ":" + strconv.Itoa(int(pp.Port))
}
