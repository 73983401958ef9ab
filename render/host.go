package render

import (
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// hostChain is one per-interface chain of a host endpoint (Felix's host
// endpoint chains, felix/rules/endpoints.go): where it lives, which tiers
// feed it and how it is reached.
type hostChain struct {
	layer    Layer
	kind     string
	typ      chainType
	dir      Dir
	tiers    func(*proto.HostEndpoint) []*proto.TierInfo
	profiles bool   // normal chains evaluate the endpoint's profiles
	failsafe string // failsafe chain, or "" (forward chains have none)
	allow    func(Config) string
	vmap     string // the dispatch map whose element leads here
	// when says whether the endpoint gets this chain at all.
	when func(ep *proto.HostEndpoint, star bool) bool
}

func always(*proto.HostEndpoint, bool) bool { return true }

func filterAllow(cfg Config) string { return cfg.FilterAllowAction }
func mangleAllow(cfg Config) string { return cfg.MangleAllowAction }
func returnAllow(Config) string     { return ActionReturn }
func acceptAllow(Config) string     { return ActionAccept }

func normalTiers(ep *proto.HostEndpoint) []*proto.TierInfo    { return ep.GetTiers() }
func forwardTiers(ep *proto.HostEndpoint) []*proto.TierInfo   { return ep.GetForwardTiers() }
func preDNATTiers(ep *proto.HostEndpoint) []*proto.TierInfo   { return ep.GetPreDnatTiers() }
func untrackedTiers(ep *proto.HostEndpoint) []*proto.TierInfo { return ep.GetUntrackedTiers() }

// hostChains is the chain set of a host endpoint, in the order they are
// rendered (and appear in Output).
var hostChains = []hostChain{
	// Filter: traffic to and from the host itself, with failsafes.
	{LayerFilter, KindToHost, typeNormal, Egress, normalTiers, true, ChainFailsafeOut, filterAllow, MapToHost, always},
	{LayerFilter, KindFromHost, typeNormal, Ingress, normalTiers, true, ChainFailsafeIn, filterAllow, MapFromHost, always},
	// Filter: forwarded traffic through the interface (apply-on-forward);
	// allowed by default until the endpoint has forward tiers.
	{LayerFilter, KindToHostForward, typeForward, Egress, forwardTiers, false, "", filterAllow, MapToHostForward, always},
	{LayerFilter, KindFromHostForward, typeForward, Ingress, forwardTiers, false, "", filterAllow, MapFromHostForward, always},
	// Mangle: egress policy for DNAT'd traffic leaving the host, which
	// filter OUTPUT skips; return-allow so that filter still runs.
	{LayerMangle, KindToHost, typeNormal, Egress, normalTiers, true, ChainMangleFailsafeOut, returnAllow, MapMangleToHost, always},
	// Mangle: pre-DNAT ingress policy, before the destination is rewritten.
	{LayerMangle, KindFromHost, typePreDNAT, Ingress, preDNATTiers, false, ChainMangleFailsafeIn, mangleAllow, MapMangleFromHost,
		func(ep *proto.HostEndpoint, _ bool) bool { return len(ep.GetPreDnatTiers()) > 0 }},
	// Raw: untracked policy; "*" does not support it (Felix ignores the
	// untracked policy of a "*" host endpoint).
	{LayerRaw, KindToHost, typeUntracked, Egress, untrackedTiers, false, ChainRawFailsafeOut, acceptAllow, MapRawToHost,
		func(ep *proto.HostEndpoint, star bool) bool { return !star && len(ep.GetUntrackedTiers()) > 0 }},
	{LayerRaw, KindFromHost, typeUntracked, Ingress, untrackedTiers, false, ChainRawFailsafeIn, acceptAllow, MapRawFromHost,
		func(ep *proto.HostEndpoint, star bool) bool { return !star && len(ep.GetUntrackedTiers()) > 0 }},
}

func renderHost(cfg Config, in HostInput) Output {
	ep := in.Endpoint
	star := in.Interface == AnyInterface
	who := "host endpoint " + in.ID
	var out Output
	seen := map[string]bool{}

	for _, hc := range hostChains {
		if !hc.when(ep, star) {
			continue
		}
		s := chainSpec{
			layer:     hc.layer,
			typ:       hc.typ,
			dir:       hc.dir,
			tiers:     hc.tiers(ep),
			failsafe:  hc.failsafe,
			allow:     hc.allow(cfg),
			selectors: in.Selectors,
		}
		if hc.profiles {
			s.profiles = ep.GetProfileIds()
		}
		b := cfg.render(s)
		for _, g := range b.groups {
			if !seen[g.Name] {
				seen[g.Name] = true
				out.Shared = append(out.Shared, g)
			}
		}
		c := &nft.Chain{Name: chainName(hc.layer, hc.kind, in.Interface), Rules: withEndpoint(who, b.rules)}
		out.Chains = append(out.Chains, c)
		if !star {
			out.Elements = append(out.Elements, element(hc.vmap, in.Interface, gotoP(c.Name), who))
		}
	}

	if cfg.EndpointMarks && !star {
		sm := &nft.Chain{Name: chainName(LayerFilter, KindSetMark, in.Interface)}
		if in.Mark != 0 {
			sm.Rules = []*nft.Rule{rule(who+": Set endpoint mark", setField(cfg.Marks.Endpoint, in.Mark))}
			out.Elements = append(out.Elements, element(MapFromEndpointMark, markKey(in.Mark),
				gotoP(chainName(LayerFilter, KindFromHostForward, in.Interface)), who))
		}
		out.Chains = append(out.Chains, sm)
		out.Elements = append(out.Elements, element(MapEndpointMark, in.Interface, gotoP(sm.Name), who))
	}
	return out
}
