package render

import (
	"sort"
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// Conventions of the render tests (the address plan and names every case
// uses, so that a golden reads without looking anything up):
//
//   - Marks come from the default mask 0xffff0000: accept 0x00010000, pass
//     0x00020000, (drop 0x00040000, reserved), scratch0 0x00080000, scratch1
//     0x00100000, endpoint field 0xffe00000, non-Cali 0x00200000.
//   - Workload interfaces start with "cali" ("tap" is the second prefix where
//     a case needs two); workload IDs are "k8s/<namespace>/<pod>/eth0".
//   - Host interfaces are eth0 (10.0.240.10/24, 2001:db8::10/64) and eth1.
//   - Pods live in 10.65.0.0/16 and fd00:65::/64; "8.8.8.8" is the spoofed
//     source.
//   - Policies are in tier "default" unless a case says otherwise; policy
//     chains are placeholders (see policyChains) whose body says what the
//     policy does: allow sets the accept mark and returns, deny drops, pass
//     sets the pass mark and returns.

// wlID is a workload endpoint ID in the conventions' form.
func wlID(ns, pod string) *proto.WorkloadEndpointID {
	return &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: ns + "/" + pod, EndpointId: "eth0"}
}

// gnp is a global network policy ID.
func gnp(name string) *proto.PolicyID {
	return &proto.PolicyID{Name: name, Kind: "GlobalNetworkPolicy"}
}

// staged is a staged global network policy ID.
func staged(name string) *proto.PolicyID {
	return &proto.PolicyID{Name: name, Kind: "StagedGlobalNetworkPolicy"}
}

// tier builds a TierInfo.
func tier(name string, in, out []*proto.PolicyID) *proto.TierInfo {
	return &proto.TierInfo{Name: name, IngressPolicies: in, EgressPolicies: out, DefaultAction: "Deny"}
}

func pols(ids ...*proto.PolicyID) []*proto.PolicyID { return ids }

// wep builds an active workload endpoint on iface with one IPv4 address.
func wep(iface, ip string, tiers ...*proto.TierInfo) *proto.WorkloadEndpoint {
	return &proto.WorkloadEndpoint{State: "active", Name: iface, Ipv4Nets: []string{ip + "/32"}, Tiers: tiers}
}

// policyBehaviour says what a placeholder policy or profile chain does.
type policyBehaviour string

const (
	allowPolicy policyBehaviour = "allow"
	denyPolicy  policyBehaviour = "deny"
	passPolicy  policyBehaviour = "pass"
	noMatch     policyBehaviour = "nomatch"
	// allowTCP80 and allowTCP8080 allow one TCP destination port.
	allowTCP80   policyBehaviour = "allow tcp 80"
	allowTCP8080 policyBehaviour = "allow tcp 8080"
	// allowTCPSport8080 allows replies from TCP port 8080.
	allowTCPSport8080 policyBehaviour = "allow tcp sport 8080"
)

// policyChain is a placeholder policy chain with the given behaviour.
func policyChain(cfg Config, name string, b policyBehaviour) *nft.Chain {
	c := &nft.Chain{Name: name}
	switch b {
	case allowPolicy:
		c.Rules = []*nft.Rule{
			rule("test policy: allow", setBits(cfg.Marks.Accept)),
			rule("test policy: return", ret),
		}
	case denyPolicy:
		c.Rules = []*nft.Rule{rule("test policy: deny", drop)}
	case allowTCPSport8080:
		c.Rules = []*nft.Rule{
			rule("test policy: allow replies from tcp port", setBits(cfg.Marks.Accept), l4(protoTCP), sport(8080)),
			rule("test policy: return", ret, markSet(cfg.Marks.Accept)),
		}
	case allowTCP80, allowTCP8080:
		port := uint16(80)
		if b == allowTCP8080 {
			port = 8080
		}
		c.Rules = []*nft.Rule{
			rule("test policy: allow tcp port", setBits(cfg.Marks.Accept), l4(protoTCP), dport(port)),
			rule("test policy: return", ret, markSet(cfg.Marks.Accept)),
		}
	case passPolicy:
		c.Rules = []*nft.Rule{
			rule("test policy: pass", setBits(cfg.Marks.Pass)),
			rule("test policy: return", ret),
		}
	}
	return c
}

// buildModel assembles the inet table from Static and the outputs, the way
// the endpoint manager does (shared chains once), and adds a placeholder
// chain for every referenced chain that nothing rendered: policies in
// behaviours get that behaviour, the rest match nothing.
func buildModel(t testing.TB, cfg Config, behaviours map[string]policyBehaviour, outs ...Output) *nft.Model {
	t.Helper()
	m := nft.NewModel(nft.FamilyINet, cfg.TableName)
	chains, sets := Static(cfg)
	for _, s := range sets {
		m.SetSet(s)
	}
	for _, c := range chains {
		m.SetChain(c)
	}
	for _, o := range outs {
		for _, c := range o.Chains {
			if m.Chain(c.Name) != nil {
				t.Fatalf("owned chain %q rendered twice", c.Name)
			}
			m.SetChain(c)
		}
		for _, c := range o.Shared {
			if old := m.Chain(c.Name); old != nil && rulesKey(old.Rules) != rulesKey(c.Rules) {
				t.Fatalf("shared chain %q rendered with two bodies", c.Name)
			}
			m.SetChain(c)
		}
		for _, e := range o.Elements {
			m.SetElement(e.Set, e.Elem)
		}
	}
	addPlaceholders(cfg, m, behaviours)
	return m
}

// addPlaceholders adds a chain for every jump or goto target that m lacks.
func addPlaceholders(cfg Config, m *nft.Model, behaviours map[string]policyBehaviour) {
	for _, name := range referencedChains(m) {
		if m.Chain(name) == nil {
			b := behaviours[name]
			if b == "" {
				b = noMatch
			}
			m.SetChain(policyChain(cfg, name, b))
		}
	}
}

// referencedChains lists the chains named by jumps, gotos and verdict-map
// elements of m, sorted.
func referencedChains(m *nft.Model) []string {
	seen := map[string]bool{}
	for _, n := range m.ChainNames() {
		for _, r := range m.Chain(n).Rules {
			if v, ok := r.Action.(nft.Verdict); ok && v.Chain != "" {
				seen[v.Chain] = true
			}
		}
	}
	for _, n := range m.SetNames() {
		for _, e := range m.Set(n).Elements {
			if e.Verdict != nil && e.Verdict.Chain != "" {
				seen[e.Verdict.Chain] = true
			}
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// buildARPModel assembles the arp table from ARPStatic and the outputs.
func buildARPModel(cfg Config, outs ...Output) *nft.Model {
	m := nft.NewModel(nft.FamilyARP, cfg.TableName)
	chains, sets := ARPStatic(cfg)
	for _, s := range sets {
		m.SetSet(s)
	}
	for _, c := range chains {
		m.SetChain(c)
	}
	for _, o := range outs {
		for _, e := range o.ARPElements {
			m.SetElement(e.Set, e.Elem)
		}
	}
	return m
}

// isPolicyPlaceholder reports whether name is a policy or profile chain
// (which tests render as placeholders).
func isPolicyPlaceholder(name string) bool {
	for _, k := range []string{KindPolicyIn, KindPolicyOut, KindProfileIn, KindProfileOut} {
		for _, l := range []Layer{LayerFilter, LayerMangle, LayerRaw} {
			if strings.HasPrefix(name, string(l)+"-"+k+"-") {
				return true
			}
		}
	}
	return false
}
