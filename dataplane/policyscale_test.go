package dataplane

// The policy dimension: a node shaped like Calico's own nftables benchmark
// (felix/nftables/bench_test.go: N chains of 10 `tcp saddr @set dport P`
// rules, N IP sets), built through nftep's managers and engine. The same
// scenario feeds the kernel benchmarks (BenchmarkPolicyVsCalico,
// BenchmarkPolicyScale in policyscale_bench_test.go) and the test below,
// which runs on the Fake.

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// policyScale is one size of the scenario.
type policyScale struct {
	// policies is the number of policies, each with its own IP set.
	policies int
	// members is the number of members of each IP set.
	members int
}

// The fixed parts of the scenario's shape.
const (
	// scaleRulesPerPolicy is the rules of each policy chain, as in Calico's
	// benchmark (10 rules a chain).
	scaleRulesPerPolicy = 10
	// scalePoliciesPerEndpoint: each endpoint applies this many policies
	// (inbound), and each policy is applied by one endpoint, so every
	// policy chain is reached once from the base chains, as every chain of
	// Calico's benchmark is jumped to once from filter-FORWARD.
	scalePoliciesPerEndpoint = 10
	scaleNamespaces          = 10
)

func (s policyScale) endpoints() int {
	return max(1, (s.policies+scalePoliciesPerEndpoint-1)/scalePoliciesPerEndpoint)
}

func (s policyScale) String() string {
	return fmt.Sprintf("%d policies, %d IP sets of %d members (%d members), %d endpoints",
		s.policies, s.policies, s.members, s.policies*s.members, s.endpoints())
}

// scaleConfig is the scenario's configuration: IPv4 only, as Calico's
// benchmark table (`ip calico-bench`) is; everything else Felix's defaults.
func scaleConfig(tb testing.TB) Config {
	tb.Helper()
	cfg, err := ParseConfig(map[string]string{"Ipv6Support": "false"}, "")
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

func scaleSetID(p int) string { return fmt.Sprintf("s:scale-%05d", p) }

// scaleMember is the k-th address handed out (k from 0): 10.0.0.1 onwards,
// distinct over the whole node.
func scaleMember(k int) string {
	return netip.AddrFrom4([4]byte{10, byte((k + 1) >> 16), byte((k + 1) >> 8), byte(k + 1)}).String()
}

func scalePolicyID(p int) *proto.PolicyID {
	return &proto.PolicyID{Name: fmt.Sprintf("scale-%05d", p), Namespace: fmt.Sprintf("ns-%d", p%scaleNamespaces), Kind: "NetworkPolicy"}
}

// scalePolicy is policy p: scaleRulesPerPolicy inbound rules, each allowing
// TCP from the policy's IP set to one port; the first rule's port is
// firstPort (the rule a change edits).
func scalePolicy(p int, firstPort int32) *proto.ActivePolicyUpdate {
	id := scalePolicyID(p)
	tcp := &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}}
	rules := make([]*proto.Rule, scaleRulesPerPolicy)
	for r := range rules {
		port := int32(1000 + r)
		if r == 0 {
			port = firstPort
		}
		rules[r] = &proto.Rule{Action: "allow", Protocol: tcp, SrcIpSetIds: []string{scaleSetID(p)},
			DstPorts: []*proto.PortRange{{First: port, Last: port}}, RuleId: fmt.Sprintf("scale-%05d-%d", p, r)}
	}
	return &proto.ActivePolicyUpdate{Id: id, Policy: &proto.Policy{Namespace: id.Namespace, Tier: "default", InboundRules: rules}}
}

// scaleEndpoint is endpoint e, applying policies e*10 … e*10+9 inbound (no
// interface exists: it reports down, and its chains are programmed all
// the same).
func scaleEndpoint(s policyScale, e int) *proto.WorkloadEndpointUpdate {
	var pols []*proto.PolicyID
	for p := e * scalePoliciesPerEndpoint; p < min(s.policies, (e+1)*scalePoliciesPerEndpoint); p++ {
		pols = append(pols, scalePolicyID(p))
	}
	addr := netip.AddrFrom4([4]byte{10, 250, byte(e >> 8), byte(e)}).String()
	return &proto.WorkloadEndpointUpdate{
		Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("ns-%d/pod-%d", e%scaleNamespaces, e), EndpointId: "eth0"},
		Endpoint: &proto.WorkloadEndpoint{
			State: "active", Name: fmt.Sprintf("calis%010d", e), Ipv4Nets: []string{addr + "/32"},
			Tiers: []*proto.TierInfo{{Name: "default", IngressPolicies: pols, DefaultAction: "Deny"}},
		},
	}
}

// scaleNode is the whole node as messages: IP sets, policies, endpoints.
func scaleNode(s policyScale) []any {
	var msgs []any
	for p := range s.policies {
		members := make([]string, s.members)
		for j := range members {
			members[j] = scaleMember(p*s.members + j)
		}
		msgs = append(msgs, &proto.IPSetUpdate{Id: scaleSetID(p), Type: proto.IPSetUpdate_IP, Members: members})
	}
	for p := range s.policies {
		msgs = append(msgs, scalePolicy(p, 1000))
	}
	for e := range s.endpoints() {
		msgs = append(msgs, scaleEndpoint(s, e))
	}
	return msgs
}

// scaleNode's changes. Each kind is numbered by k so that repeated changes
// differ: a new member (past every member of the node), another port.

func scaleMemberAdd(s policyScale, k int) *proto.IPSetDeltaUpdate {
	return &proto.IPSetDeltaUpdate{Id: scaleSetID(0), AddedMembers: []string{scaleMember(s.policies*s.members + k)}}
}

func scaleMemberRemove(s policyScale, k int) *proto.IPSetDeltaUpdate {
	return &proto.IPSetDeltaUpdate{Id: scaleSetID(0), RemovedMembers: []string{scaleMember(s.policies*s.members + k)}}
}

func scaleRuleChange(k int) *proto.ActivePolicyUpdate {
	return scalePolicy(0, int32(2000+k%30000))
}

// scaleEngine is the engine of the scenario over kernel k.
type scaleEngine struct {
	tb testing.TB
	e  *engine
}

func newScaleEngine(tb testing.TB, k Kernel) *scaleEngine {
	tb.Helper()
	e, err := newEngine(scaleConfig(tb), k, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &scaleEngine{tb: tb, e: e}
}

// step hands msgs to the managers, computes and programs the tables (no
// routes: the scenario has no interfaces), and returns the inet table's
// apply.
func (s *scaleEngine) step(msgs ...any) nft.ApplyStats {
	s.tb.Helper()
	for _, m := range msgs {
		s.e.update(m)
	}
	if err := s.e.compute(); err != nil {
		s.tb.Fatal(err)
	}
	r, err := s.e.program(context.Background(), false, false)
	if err != nil {
		s.tb.Fatal(err)
	}
	return r.inet
}

// lastOps describes the inet table's last transaction as "kind name"
// lines, elements and rules counted.
func (s *scaleEngine) lastOps() string {
	tx := s.e.inet.(*nft.Table).LastTransaction()
	var lines []string
	for _, op := range tx.Ops {
		lines = append(lines, fmt.Sprintf("%s %s (%d)", op.Kind, op.Name, op.NumOperations()))
	}
	return strings.Join(lines, "; ")
}

// fakeTablesKernel is a dry kernel whose tables are on one nft.Fake that
// encodes every batch, so that ApplyStats.Messages is the real batch size.
type fakeTablesKernel struct {
	dryKernel
	f *nft.Fake
}

func (k fakeTablesKernel) NewTable(family nft.Family, name string) (Table, error) {
	return nft.NewTable(nft.TableConfig{Family: family, Name: name, Transport: k.f})
}

// TestPolicyScaleChangeBatchConstant builds Calico's scale-test dimension on
// one node, 10,000 policies and 250,000 IP-set members (10,000 sets of 25),
// through the managers and the engine on the Fake, and checks that one
// member added, one member removed and one rule changed each send exactly
// the batch they send on a node of 100 policies: the same operations on
// the same objects, the same number of netlink messages. Under the race
// detector and with -short the large node is 1,000 policies and 25,000
// members (the full size takes minutes there); hack/test.sh runs it once
// more without the detector, at full size (about 10 s of CPU).
func TestPolicyScaleChangeBatchConstant(t *testing.T) {
	small := policyScale{policies: 100, members: 25}
	large := policyScale{policies: 10000, members: 25}
	if raceDetector || testing.Short() {
		large.policies = 1000
	}
	type change struct {
		ops      string
		st       nft.ApplyStats
		sizeWord string
	}
	run := func(s policyScale) map[string]change {
		e := newScaleEngine(t, fakeTablesKernel{f: nft.NewFake()})
		cold := e.step(scaleNode(s)...)
		t.Logf("%v: cold start %d operations, %d messages, %.1f MB", s, cold.Operations, cold.Messages, float64(cold.Bytes)/1e6)
		got := map[string]change{}
		for _, c := range []struct {
			name string
			msg  any
		}{
			{"member added", scaleMemberAdd(s, 0)},
			{"member removed", scaleMemberRemove(s, 0)},
			{"rule changed", scaleRuleChange(1)},
		} {
			st := e.step(c.msg)
			got[c.name] = change{ops: e.lastOps(), st: st}
		}
		return got
	}
	a, b := run(small), run(large)
	for _, name := range []string{"member added", "member removed", "rule changed"} {
		x, y := a[name], b[name]
		t.Logf("%s: %d operations, %d messages, %d bytes: %s", name, y.st.Operations, y.st.Messages, y.st.Bytes, y.ops)
		if y.st.Operations == 0 {
			t.Errorf("%s at %v: nothing sent", name, large)
		}
		if x.ops != y.ops || x.st.Messages != y.st.Messages || x.st.Operations != y.st.Operations {
			t.Errorf("%s: the batch grows with the node:\n  %v: %d operations, %d messages: %s\n  %v: %d operations, %d messages: %s",
				name, small, x.st.Operations, x.st.Messages, x.ops, large, y.st.Operations, y.st.Messages, y.ops)
		}
	}
}
