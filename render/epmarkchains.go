package render

import (
	"slices"
	"strconv"

	"github.com/nftep/nftep/nft"
)

// endpointMarkChains are the static chains of the endpoint-mark feature
// (kube-proxy in IPVS mode; Felix's cali-set-endpoint-mark,
// cali-from-endpoint-mark, cali-forward-check and cali-forward-endpoint-mark
// in felix/rules/static.go and felix/rules/dispatch.go), with map dispatch
// instead of Felix's prefix trees.
func (cfg Config) endpointMarkChains() []*nft.Chain {
	m := cfg.Marks
	allow := allowVerdict(cfg.FilterAllowAction)
	deny := cfg.denyAction(LayerFilter)

	// ifname → verdict map to a one-rule filter-sm-<if> chain, not an
	// ifname : mark map: `meta mark set iifname map @m` replaces the whole
	// mark (kube-proxy's 0x4000 masquerade bit included), and the masked
	// form `meta mark set meta mark & ~field | iifname map @m` is refused
	// by nft 1.0.6 ("Right hand side of binary operation (|) must be
	// constant"). A kernel with NFTA_BITWISE_SREG2 could run it if encoded
	// by hand, but nft 1.0.6 could not list it, so nftep stays with what
	// nft can show (see nft.SetMarkFromMap).
	set := &nft.Chain{Name: ChainSetEndpointMark, Rules: []*nft.Rule{
		rule("Set the endpoint mark of the input interface", nft.VMap{Key: nft.SelIIFName, Map: MapEndpointMark}),
	}}
	for _, p := range cfg.InterfacePrefixes {
		set.Rules = append(set.Rules, rule("Unknown endpoint", deny, iifPrefix(p)))
	}
	set.Rules = append(set.Rules, rule("Non-Cali endpoint mark", setField(m.Endpoint, m.NonCali)))

	from := &nft.Chain{Name: ChainFromEndpointMark, Rules: []*nft.Rule{
		// The lookup keys on the endpoint field only, so neither our other
		// bits nor foreign ones (kube-proxy's 0x4000) make it miss.
		rule("Dispatch to endpoint chain by endpoint mark", nft.VMap{Key: nft.SelMark, Map: MapFromEndpointMark, Mask: m.Endpoint}),
		rule("Unknown interface", deny),
	}}

	// INPUT sees IPVS traffic before IPVS forwards it; mark it with the
	// endpoint it came from, so filter output can apply that endpoint's
	// policy once IPVS has chosen a backend.
	check := &nft.Chain{Name: ChainForwardCheck, Rules: []*nft.Rule{
		rule("Established IPVS connections were checked on their first packet", ret, ctEstablished),
	}}
	r := nft.Port{Dir: nft.Out, Ranges: slices.Clone(cfg.NodePortRanges)}
	check.Rules = append(check.Rules,
		rule("To kubernetes NodePort service", gotoV(ChainSetEndpointMark), l4(protoTCP), r),
		rule("To kubernetes NodePort service", gotoV(ChainSetEndpointMark), l4(protoUDP), r),
	)

	// As Felix's cali-forward-endpoint-mark: no clearing first. The masked
	// dispatch ignores the other bits, the endpoint chains clear accept and
	// pass themselves, and filter output has already let packets with the
	// accept bit go before it sends them here.
	fwd := &nft.Chain{Name: ChainForwardEndpointMk, Rules: []*nft.Rule{
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
