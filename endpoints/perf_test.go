package endpoints

// Cost: a batch of N pending workloads is linear in N, and one further
// update renders and rewrites only that endpoint.

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

func benchIface(i int) string { return fmt.Sprintf("cali%06d", i) }

func benchEndpoint(i int) *proto.WorkloadEndpointUpdate {
	ep := workloadEp(benchIface(i), tier("default", "policy1", "policy2"))
	ep.Ipv4Nets = []string{fmt.Sprintf("10.%d.%d.%d/32", i>>16&0xff, i>>8&0xff, i&0xff)}
	ep.Ipv6Nets = []string{fmt.Sprintf("2001:db8::%x/128", i)}
	ep.ProfileIds = []string{"kns.default"}
	return &proto.WorkloadEndpointUpdate{
		Id:       &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("default/pod-%d", i), EndpointId: "eth0"},
		Endpoint: ep,
	}
}

func TestOneUpdateRendersOneEndpoint(t *testing.T) {
	const n = 1000
	h := newHarness(t)
	var msgs []any
	for i := range n {
		msgs = append(msgs, benchEndpoint(i))
	}
	// 1. n endpoints in one batch: n renders.
	h.step(append(hostIfaces(), msgs...)...)
	if h.renders.total != n {
		t.Fatalf("1: %d renders for %d endpoints", h.renders.total, n)
	}
	before := map[string]*nft.Chain{}
	for _, name := range h.table.ChainNames() {
		before[name] = h.table.Chain(name)
	}
	routeCalls := h.routes.calls

	// 2. One endpoint changes (a new policy in its tier).
	u := benchEndpoint(42)
	u.Endpoint.Tiers = []*proto.TierInfo{tier("default", "policy1", "policy3")}
	h.step(u)
	if h.renders.total != 1 || h.renders.count[benchIface(42)] != 1 {
		t.Errorf("2: renders = %v, want exactly one of %s", h.renders.count, benchIface(42))
	}
	// Only that endpoint's chains were replaced in the model.
	var changed []string
	for _, name := range h.table.ChainNames() {
		if before[name] != h.table.Chain(name) {
			changed = append(changed, name)
		}
	}
	for name := range before {
		if h.table.Chain(name) == nil {
			changed = append(changed, name+" (deleted)")
		}
	}
	// The endpoint's own three chains, plus the group chains of its new
	// policy run, which did not exist before; no chain the others share.
	want := []string{fwName(42), smName(42), twName(42)}
	for _, c := range []string{twName(42), fwName(42)} {
		for _, j := range jumps(h.chain(c)) {
			if isGroupChain(j) && before[j] == nil {
				want = append(want, j)
			}
		}
	}
	if diff := cmp.Diff(want, changed, sortStrings); diff != "" {
		t.Errorf("2: chains replaced (-want +got):\n%s", diff)
	}
	if got := h.routes.calls - routeCalls; got != 1 {
		t.Errorf("2: %d SetRoutes calls, want 1", got)
	}
	h.wantReports(fmt.Sprintf("wl k8s/default/pod-%d/eth0 down", 42))
}

func twName(i int) string { return "filter-tw-" + benchIface(i) }
func fwName(i int) string { return "filter-fw-" + benchIface(i) }
func smName(i int) string { return "filter-sm-" + benchIface(i) }

// BenchmarkCompleteDeferredWork_N_Endpoints times one CompleteDeferredWork
// that processes N pending workload updates into an empty manager.
func BenchmarkCompleteDeferredWork_1000_Endpoints(b *testing.B)  { benchCold(b, 1000) }
func BenchmarkCompleteDeferredWork_10000_Endpoints(b *testing.B) { benchCold(b, 10000) }

func benchCold(b *testing.B, n int) {
	msgs := make([]any, n)
	for i := range msgs {
		msgs[i] = benchEndpoint(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		// Endpoint marks off (nftep's default): their space, 2^11 marks
		// with the default mask, cannot hold 10,000 endpoints anyway.
		h := newHarness(b, noEndpointMarks)
		h.step(hostIfaces()...)
		for _, msg := range msgs {
			h.m.OnUpdate(msg)
		}
		if err := h.m.ResolveUpdateBatch(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := h.m.CompleteDeferredWork(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/endpoint")
}

// BenchmarkOneEndpointChange_10000_Endpoints times a batch with one workload
// update on a manager holding 10,000.
func BenchmarkOneEndpointChange_10000_Endpoints(b *testing.B) {
	const n = 10000
	h := newHarness(b, noEndpointMarks)
	msgs := hostIfaces()
	for i := range n {
		// Up, as on a running node: no interface stays pending in the
		// sysctl writer.
		msgs = append(msgs, benchEndpoint(i), ifaceUp(benchIface(i)))
	}
	h.step(msgs...)
	a, c := benchEndpoint(7), benchEndpoint(7)
	c.Endpoint.Tiers = []*proto.TierInfo{tier("default", "policy3")}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		u := a
		if i%2 == 1 {
			u = c
		}
		i++
		h.m.OnUpdate(u)
		if err := h.m.ResolveUpdateBatch(); err != nil {
			b.Fatal(err)
		}
		if err := h.m.CompleteDeferredWork(); err != nil {
			b.Fatal(err)
		}
	}
}
