package render

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// TestBodyCache: with shared endpoint chains, rendering through a
// BodyCache gives what rendering each endpoint alone gives, and endpoints
// of the same policies and profiles get the same chain objects. Endpoints
// whose bodies cannot be shared (a packet-rate limit) and admin-down ones
// are rendered as without a cache.
func TestBodyCache(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SharedEndpointChains = true
	sel := func(id *proto.PolicyID) (string, bool) {
		return map[string]string{"p0": "all()", "p1": "all()", "p2": "role == 'db'"}[id.GetName()], true
	}
	ep := func(i int) *proto.WorkloadEndpoint {
		e := &proto.WorkloadEndpoint{State: "active", Name: fmt.Sprintf("cali%d", i), Ipv4Nets: []string{fmt.Sprintf("10.0.0.%d/32", i)},
			ProfileIds: []string{fmt.Sprintf("kns.ns%d", i%2)},
			Tiers: []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: fmt.Sprintf("p%d", i%3)}},
				EgressPolicies: []*proto.PolicyID{{Name: "p2"}}}}}
		switch i {
		case 7:
			e.QosControls = &proto.QoSControls{IngressPacketRate: 100, IngressPacketBurst: 5}
		case 8:
			e.State = "down"
		}
		return e
	}
	bodies := NewBodyCache()
	var outs []Output
	for i := range 12 {
		in := WorkloadInput{ID: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("ns/pod-%d", i), EndpointId: "eth0"},
			Endpoint: ep(i), Selectors: sel}
		want := Workload(cfg, in)
		in.Bodies = bodies
		got := Workload(cfg, in)
		if diff := cmp.Diff(bodyCacheText(want), bodyCacheText(got)); diff != "" {
			t.Errorf("endpoint %d: with the cache (-without +with):\n%s", i, diff)
		}
		outs = append(outs, got)
	}
	// Endpoints i and i+6 have the same policies and profiles (but for
	// 7, limited, and 8, admin down).
	for i := range 6 {
		if i == 1 || i == 2 {
			continue
		}
		a, b := sharedChains(outs[i]), sharedChains(outs[i+6])
		for name, c := range a {
			if b[name] != c {
				t.Errorf("endpoints %d and %d: shared chain %s rendered twice, want the cached object", i, i+6, name)
			}
		}
	}
	if len(bodies.bodies) == 0 {
		t.Error("nothing cached")
	}
}

// bodyCacheText prints an Output for comparison.
func bodyCacheText(o Output) string {
	s := ""
	for _, c := range o.Chains {
		s += "chain " + c.String()
	}
	for _, c := range o.Shared {
		s += "shared " + c.String()
	}
	for _, e := range o.Elements {
		s += fmt.Sprintf("element %s %+v\n", e.Set, e.Elem)
	}
	for _, e := range o.ARPElements {
		s += fmt.Sprintf("arp element %s %+v\n", e.Set, e.Elem)
	}
	return s
}

func sharedChains(o Output) map[string]*nft.Chain {
	m := map[string]*nft.Chain{}
	for _, c := range o.Shared {
		m[c.Name] = c
	}
	return m
}
