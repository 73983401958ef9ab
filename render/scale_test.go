package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// dispatchCost is the number of rules a packet from workload iface to
// the outside evaluates between entering filter-forward and the first rule
// of its endpoint chain.
func dispatchCost(t *testing.T, m *nft.Model, iface string) int {
	t.Helper()
	ip := "10.65.0.1"
	res := tracePacket(t, m, packet{path: pathForward, iif: iface, oif: "eth1", src: ip, dst: "192.0.2.1", proto: protoTCP, dport: 80})
	start, ok := res.firstRuleOf[ChainFilterForward]
	if !ok {
		t.Fatalf("packet never reached %s:\n%s", ChainFilterForward, res)
	}
	var end = -1
	for name, i := range res.firstRuleOf {
		if strings.HasPrefix(name, "filter-fw-") {
			end = i
		}
	}
	if end < 0 {
		t.Fatalf("packet never reached an endpoint chain:\n%s", res)
	}
	return end - start
}

// TestDispatchCostConstant: per-packet dispatch cost does not grow with the
// number of endpoints (verdict maps, not rule lists or trees).
func TestDispatchCostConstant(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SharedEndpointChains = shared
			costs := map[int]int{}
			for _, n := range []int{1, 10000} {
				var outs []Output
				for i := 0; i < n; i++ {
					outs = append(outs, Workload(cfg, WorkloadInput{
						ID:       wlID("default", fmt.Sprintf("pod-%d", i)),
						Endpoint: wep(fmt.Sprintf("cali%d", i), "10.65.0.1"),
					}))
				}
				m := buildModel(t, cfg, nil, outs...)
				costs[n] = dispatchCost(t, m, fmt.Sprintf("cali%d", n-1))
			}
			if costs[1] != costs[10000] {
				t.Errorf("dispatch cost grows: %d rules with 1 endpoint, %d with 10,000", costs[1], costs[10000])
			}
		})
	}
}

// sharingScenario renders 1,000 endpoints spread over 10 policy
// combinations (endpoint i gets combination i%10).
func sharingScenario(cfg Config) []Output {
	var outs []Output
	for i := 0; i < 1000; i++ {
		outs = append(outs, Workload(cfg, sharingInput(i, i%10)))
	}
	return outs
}

func sharingInput(i, combo int) WorkloadInput {
	pol := gnp(fmt.Sprintf("policy-%d", combo))
	return WorkloadInput{
		ID:       wlID("default", fmt.Sprintf("pod-%d", i)),
		Endpoint: wep(fmt.Sprintf("cali%d", i), fmt.Sprintf("10.65.%d.%d", i/250, i%250+1), tier("default", pols(pol), pols(pol))),
	}
}

func endpointChains(m *nft.Model) []string {
	var out []string
	for _, n := range m.ChainNames() {
		if strings.HasPrefix(n, "filter-tw-") || strings.HasPrefix(n, "filter-fw-") {
			out = append(out, n)
		}
	}
	return out
}

// TestSharedEndpointChains: with sharing, 1,000 endpoints over 10
// combinations need 20 endpoint chains; changing one endpoint's policies
// moves only its map elements, and adds chains only for new bodies.
func TestSharedEndpointChains(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SharedEndpointChains = true
	outs := sharingScenario(cfg)
	m := buildModel(t, cfg, nil, outs...)
	if got := len(endpointChains(m)); got != 20 {
		t.Errorf("got %d endpoint chains, want 20", got)
	}
	for _, o := range outs {
		if len(o.Chains) != 0 {
			t.Fatalf("endpoint with sharing on owns chains %v", o.Chains)
		}
	}
	// Elements name the endpoint.
	if e := m.Set(MapToWorkload).Elements["cali7"]; e.Comment != "endpoint k8s/default/pod-7/eth0" {
		t.Errorf("element comment %q does not name the endpoint", e.Comment)
	}

	existing := map[string]bool{}
	for _, n := range endpointChains(m) {
		existing[n] = true
	}
	newChains := func(o Output) int {
		n := 0
		for _, c := range o.Shared {
			if !existing[c.Name] {
				n++
			}
		}
		return n
	}

	before := Workload(cfg, sharingInput(7, 7))
	// Endpoint 7 moves to an existing combination: its two dispatch
	// elements change, no chain is added.
	moved := Workload(cfg, sharingInput(7, 3))
	if n, d := newChains(moved), changedElements(before, moved); n != 0 || d != 2 {
		t.Errorf("move to an existing combination: %d new chains, %d changed elements; want 0, 2", n, d)
	}
	if got, want := moved.Elements[0].Elem.Verdict.Chain, Workload(cfg, sharingInput(3, 3)).Elements[0].Elem.Verdict.Chain; got != want {
		t.Errorf("moved endpoint goes to %s, not to the chain of its new combination %s", got, want)
	}
	// A new combination adds its two chains.
	fresh := Workload(cfg, sharingInput(7, 99))
	if n, d := newChains(fresh), changedElements(before, fresh); n != 2 || d != 2 {
		t.Errorf("move to a new combination: %d new chains, %d changed elements; want 2, 2", n, d)
	}

	// Stateful bodies (a packet-rate limit) are never shared.
	in := sharingInput(1, 1)
	in.Endpoint.QosControls = &proto.QoSControls{IngressPacketRate: 100, IngressPacketBurst: 10}
	o := Workload(cfg, in)
	if len(o.Chains) != 1 || o.Chains[0].Name != "filter-tw-cali1" {
		t.Errorf("rate-limited ingress chain: owned %v; want filter-tw-cali1 owned", chainNames(o.Chains))
	}
}

// changedElements counts the elements whose value differs between a and b
// or that exist on one side only.
func changedElements(a, b Output) int {
	key := func(e SetElement) string { return e.Set + "\x00" + e.Elem.Key }
	val := func(e SetElement) string { return fmt.Sprintf("%+v %q", e.Elem.Verdict, e.Elem.Comment) }
	am := map[string]string{}
	for _, e := range a.Elements {
		am[key(e)] = val(e)
	}
	n := 0
	for _, e := range b.Elements {
		if v, ok := am[key(e)]; !ok || v != val(e) {
			n++
		}
		delete(am, key(e))
	}
	return n + len(am)
}

func chainNames(cs []*nft.Chain) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// TestSharedChainsBehaveTheSame replays the packet flows with sharing on.
func TestSharedChainsBehaveTheSame(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SharedEndpointChains = true
	m := flowScenario(t, cfg)
	for _, tc := range flowTests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tracePacket(t, m, tc.p); got.verdict != tc.want {
				t.Errorf("got %s; want %s", got, tc.want)
			}
		})
	}
}
