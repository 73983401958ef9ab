package nft

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"

	"github.com/nftep/nftep/internal/netnstest"
)

// The node-shaped table of the scale test and the benchmarks: what nftep
// renders for a node with W workloads, in the rule shapes Felix uses.
//
//   - maps filter-from-wl and filter-to-wl: ifname → goto the workload's
//     from-workload (fw) or to-workload (tw) chain, W elements each;
//   - base chains filter-input, filter-forward, filter-output dispatching
//     through them, and dropping unknown cali* interfaces (fail closed);
//   - 2W endpoint chains of 12 rules: conntrack, clearing the policy mark
//     bits, policy jumps each followed by "return if accepted", profile
//     jumps, and the final drop; every rule with a comment naming the
//     endpoint;
//   - P policy chains of 4 rules (address, protocol and port matches that
//     set the accept mark, and a return).
const (
	markAccept = 0x00010000
	markPass   = 0x00020000
)

// workloadIface is the interface of workload i, shaped like Calico's
// (cali + 11 hex digits = 15 bytes, IFNAMSIZ-1).
func workloadIface(i int) string { return fmt.Sprintf("cali%011x", i) }

func policyChain(p int) string { return fmt.Sprintf("filter-pi-default.policy-%03d", p) }

// nodeModel fills m with the node-shaped table for the given numbers of
// workloads and policies.
func nodeModel(m *Model, workloads, policies int) {
	m.SetSet(&Set{Name: "filter-from-wl", Key: []KeyType{TypeIfName}, Data: DataVerdict, Comment: "dispatch from workload interfaces"})
	m.SetSet(&Set{Name: "filter-to-wl", Key: []KeyType{TypeIfName}, Data: DataVerdict, Comment: "dispatch to workload interfaces"})
	unknownIn := rule("unknown workload interface: drop", drop, IfName{Dir: In, Name: "cali", Wildcard: true})
	unknownOut := rule("unknown workload interface: drop", drop, IfName{Dir: Out, Name: "cali", Wildcard: true})
	setFilterBase(m, "filter-input", HookInput,
		rule("from workloads", VMap{Key: SelIIFName, Map: "filter-from-wl"}), unknownIn)
	setFilterBase(m, "filter-forward", HookForward,
		rule("from workloads", VMap{Key: SelIIFName, Map: "filter-from-wl"}), unknownIn,
		rule("to workloads", VMap{Key: SelOIFName, Map: "filter-to-wl"}), unknownOut)
	setFilterBase(m, "filter-output", HookOutput,
		rule("to workloads", VMap{Key: SelOIFName, Map: "filter-to-wl"}), unknownOut)

	for p := 0; p < policies; p++ {
		src := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(p), 0, 0}), 16)
		setAccept := SetMark{And: ^uint32(markAccept), Xor: markAccept}
		accepted := Mark{Mask: markAccept, Value: markAccept}
		m.SetChain(regular(policyChain(p),
			rule(fmt.Sprintf("policy default/policy-%03d rule 1: allow tcp/%d", p, 8000+p), setAccept,
				Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{src}}, L4Proto{Protos: []uint8{6}}, Port{Dir: Out, Ranges: []PortRange{{8000 + uint16(p), 8000 + uint16(p)}}}),
			rule("return if policy accepted", ret, accepted),
			rule(fmt.Sprintf("policy default/policy-%03d rule 2: allow dns", p), setAccept,
				L4Proto{Protos: []uint8{17}}, Port{Dir: Out, Ranges: []PortRange{{53, 53}}}),
			rule("return if policy accepted", ret, accepted)))
	}
	for i := 0; i < workloads; i++ {
		addWorkload(m, i, policies, 0)
	}
}

// setFilterBase sets a filter base chain at hook, policy accept, holding
// rules.
func setFilterBase(m *Model, name string, hook Hook, rules ...*Rule) {
	m.SetChain(&Chain{Name: name, Base: &BaseChain{Type: ChainTypeFilter, Hook: hook, Priority: PriorityFilter, Policy: PolicyAccept}, Rules: rules})
}

// endpointChain is the 12-rule chain of one direction of workload i;
// variant changes one policy jump (a policy update of that endpoint).
func endpointChain(name string, i, policies int, pol [3]int, variant int) *Chain {
	who := fmt.Sprintf("endpoint k8s/default/pod-%d/eth0", i)
	passClear := Mark{Mask: markPass, Value: 0}
	accepted := Mark{Mask: markAccept, Value: markAccept}
	pa, pb, prof := policyChain(pol[0]%policies), policyChain((pol[1]+variant)%policies), policyChain(pol[2]%policies)
	return regular(name,
		rule(who+": established", accept, CtStateMatch{States: CtStateEstablished | CtStateRelated}),
		rule(who+": invalid", drop, CtStateMatch{States: CtStateInvalid}),
		rule(who+": start of policies", SetMark{And: ^uint32(markAccept | markPass)}),
		rule(who+": tier default policy "+pa, jump(pa), passClear),
		rule(who+": return if policy accepted", ret, accepted),
		rule(who+": tier default policy "+pb, jump(pb), passClear),
		rule(who+": return if policy accepted", ret, accepted),
		rule(who+": drop if no policies passed packet", drop, passClear),
		rule(who+": profile kns.default", jump(prof)),
		rule(who+": return if profile accepted", ret, accepted),
		rule(who+": profile ksa.default.default", jump(policyChain((pol[2]+1)%policies))),
		rule(who+": drop if no profiles matched", drop))
}

// addWorkload adds workload i's two chains and map elements.
func addWorkload(m *Model, i, policies, variant int) {
	ifc := workloadIface(i)
	tw, fw := "filter-tw-"+ifc, "filter-fw-"+ifc
	m.SetChain(endpointChain(tw, i, policies, [3]int{i, i + 1, i + 2}, variant))
	m.SetChain(endpointChain(fw, i, policies, [3]int{i + 3, i + 4, i + 5}, variant))
	m.SetElement("filter-to-wl", Element{Key: ifc, Verdict: &Verdict{Kind: Goto, Chain: tw}})
	m.SetElement("filter-from-wl", Element{Key: ifc, Verdict: &Verdict{Kind: Goto, Chain: fw}})
}

// removeWorkload removes workload i's chains and map elements.
func removeWorkload(m *Model, i int) {
	ifc := workloadIface(i)
	m.DeleteElement("filter-to-wl", ifc)
	m.DeleteElement("filter-from-wl", ifc)
	m.DeleteChain("filter-tw-" + ifc)
	m.DeleteChain("filter-fw-" + ifc)
}

// TestKernelScaleCold applies the node-shaped table of 10,000 workloads
// (20,000 chains of 12 rules, two 10,000-element goto maps, 100 policy
// chains) cold, in one transaction, and checks that every chain and every
// element is in the kernel: nothing lost to ENOBUFS, EMSGSIZE or the 64 KiB
// element-list limit.
func TestKernelScaleCold(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test: skipped in -short mode")
	}
	const workloads, policies = 10000, 100
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	nodeModel(tbl.Desired(), workloads, policies)
	g0 := gen(t, ns)
	st := mustApply(t, tbl)
	if g := gen(t, ns); g != g0+uint32(st.Batches) {
		t.Errorf("cold apply took %d transactions, want %d", g-g0, st.Batches)
	}
	t.Logf("cold apply: %d operations, %d messages, %d bytes in %d batches; plan %v, encode %v, kernel %v, total %v",
		st.Operations, st.Messages, st.Bytes, st.Batches, st.Plan, st.Encode, st.Kernel, st.Total)

	c := ns.NFTConn(t)
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatalf("list chains: %v", err)
	}
	if want := 2*workloads + policies + 3; len(chains) != want {
		t.Errorf("kernel has %d chains, want %d", len(chains), want)
	}
	ours := &nftables.Table{Name: testTable, Family: nftables.TableFamilyINet}
	for _, name := range []string{"filter-from-wl", "filter-to-wl"} {
		es, err := c.GetSetElements(&nftables.Set{Table: ours, Name: name})
		if err != nil {
			t.Fatalf("GetSetElements %q: %v", name, err)
		}
		if len(es) != workloads {
			t.Errorf("map %q has %d elements in the kernel, want %d", name, len(es), workloads)
		}
	}
	// Every rule, by the read-back the resync uses.
	tbl.genKnown = false
	rs, err := tbl.Resync(context.Background())
	if err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if want := workloads*2*12 + policies*4 + 8; rs.Rules != want || rs.Drift.Any() {
		t.Errorf("resync read %d rules (want %d), drift %s", rs.Rules, want, rs.Drift)
	}
	t.Logf("resync without drift: read %v, total %v", rs.Read, rs.Total)
}
