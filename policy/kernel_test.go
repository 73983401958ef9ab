package policy

// Kernel tests: rendered policies and IP sets programmed by the nft engine
// into a network namespace of their own, listed with the real nft CLI and
// exercised with real packets.
//
// Topology of TestKernelTrafficAndDeltas:
//
//	[client] eth0 10.0.0.1/24 fd00::1/64 ── eth0 10.0.0.2/24 fd00::2/64 [server]
//
// The server's input base chain stands in for an endpoint chain: accept
// established, clear the marks, jump to policy "p", accept if the Accept
// mark is set, drop other TCP.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/tracer"
)

func newKernelTable(t *testing.T, ns *netnstest.NS, name string) *nft.Table {
	t.Helper()
	table, err := nft.NewTable(nft.TableConfig{Family: nft.FamilyINet, Name: name, NetNSFd: ns.Fd()})
	if err != nil {
		t.Fatalf("table %s: %v", name, err)
	}
	return table
}

// traceAgrees runs the packet tracer behind `nftep explain` on the table as
// the server's kernel holds it (read back and decoded), for a TCP SYN to
// addr between the client and the server over their eth0, and checks that
// its verdict is what the real packet met (connected or not), and that it
// names a deciding rule.
func traceAgrees(t *testing.T, server *netnstest.NS, table string, toServer bool, addr string, connected bool) {
	t.Helper()
	k, err := nft.ReadKernelTable(context.Background(), server.Fd(), nft.FamilyINet, table)
	if err != nil {
		t.Fatalf("read the kernel's table: %v", err)
	}
	ap := netip.MustParseAddrPort(addr)
	peer := map[string]string{"10.0.0.2": "10.0.0.1", "10.0.0.1": "10.0.0.2", "fd00::2": "fd00::1", "fd00::1": "fd00::2"}[ap.Addr().String()]
	p := tracer.Packet{Path: tracer.Output, OIF: "eth0", Src: netip.MustParseAddr(peer), Dst: ap.Addr(), Proto: tracer.ProtoTCP, SPort: 40000, DPort: ap.Port()}
	if toServer {
		p.Path, p.OIF, p.IIF = tracer.Input, "", "eth0"
	}
	res, err := tracer.Trace(k.Model, p)
	if err != nil {
		t.Fatalf("trace %s: %v", p.String(), err)
	}
	want := "drop"
	if connected {
		want = "accept"
	}
	if res.Verdict != want {
		t.Errorf("tracer: %s: %s, the real packet: %s", p.String(), res.Verdict, want)
	}
	if d := res.Deciding(); want == "drop" && d == nil {
		t.Errorf("tracer: %s: dropped, but no deciding rule named", p.String())
	}
}

func apply(t *testing.T, table *nft.Table) nft.ApplyStats {
	t.Helper()
	st, err := table.Apply(context.Background())
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return st
}

// TestKernelRuleShapes programs every golden rule case and family case (one
// table each) and
// checks that `nft list table` prints exactly what the model's printer
// prints: the kernel accepted every shape, and the goldens are what an
// operator sees.
func TestKernelRuleShapes(t *testing.T) {
	ns := netnstest.New(t)
	for i, tc := range append(slices.Clip(ruleCases), familyRuleCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("case%d", i)
			table := newKernelTable(t, ns, name)
			tc.run(t, table.Desired())
			apply(t, table)
			got := ns.Run(t, "nft", "list", "table", "inet", name)
			if diff := cmp.Diff(table.Desired().String(), got); diff != "" {
				t.Errorf("nft list table inet %s (-model +kernel):\n%s", name, diff)
			}
		})
	}
}

func TestKernelTrafficAndDeltas(t *testing.T) {
	client, server := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, client, "eth0", server, "eth0")
	// Duplicate address detection would keep the v6 addresses tentative
	// (unusable) for a second or two.
	for _, ns := range []*netnstest.NS{client, server} {
		ns.Run(t, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0")
	}
	client.AddAddr(t, "eth0", "10.0.0.1/24")
	client.AddAddr(t, "eth0", "fd00::1/64")
	server.AddAddr(t, "eth0", "10.0.0.2/24")
	server.AddAddr(t, "eth0", "fd00::2/64")

	cfg := render.DefaultConfig()
	table := newKernelTable(t, server, cfg.TableName)
	model := table.Desired()
	acc, pass := cfg.Marks.Accept, cfg.Marks.Pass
	model.SetChain(&nft.Chain{
		Name: "test-input",
		Base: &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: nft.HookInput, Priority: nft.PriorityFilter, Policy: nft.PolicyAccept},
		Rules: []*nft.Rule{
			{Match: []nft.Match{nft.CtStateMatch{States: nft.CtStateEstablished | nft.CtStateRelated}}, Action: nft.Verdict{Kind: nft.Accept}},
			{Match: []nft.Match{nft.IfName{Dir: nft.In, Name: "lo"}}, Action: nft.Verdict{Kind: nft.Accept}},
			{Action: nft.SetMark{And: ^(acc | pass)}},
			{Action: nft.Verdict{Kind: nft.Jump, Chain: pi("p")}},
			{Match: []nft.Match{nft.Mark{Mask: acc, Value: acc}}, Action: nft.Verdict{Kind: nft.Accept}},
			{Match: []nft.Match{nft.L4Proto{Protos: []uint8{protoTCP}}}, Action: nft.Verdict{Kind: nft.Drop}},
		},
	})
	m := New(cfg, model, nil)
	m.UseChain(pi("p")) // the stand-in endpoint chain jumps to it
	step := func(msgs ...any) nft.ApplyStats {
		t.Helper()
		for _, msg := range msgs {
			m.OnUpdate(msg)
		}
		if err := m.CompleteDeferredWork(); err != nil {
			t.Fatal(err)
		}
		return apply(t, table)
	}
	reach := func(addr string) bool {
		t.Helper()
		ok := testutil.Connect(t, client, server, addr, 700*time.Millisecond) == nil
		traceAgrees(t, server, cfg.TableName, true, addr, ok)
		return ok
	}
	v4, v6 := "10.0.0.2:8080", "[fd00::2]:8080"

	// 1. Policy: deny tcp 9999, allow from the trusted set. The client's
	//    v4 address is in it twice (a /28 and a /32, which collapse), its
	//    v6 address not at all.
	step(netSet("s:trusted", "10.0.0.0/28", "10.0.0.1/32", "192.168.50.0/24"),
		policyUpdate(gnp("p"), "default", []*proto.Rule{
			{Action: "deny", Protocol: tcp, DstPorts: ports(9999, 9999)},
			{Action: "allow", Protocol: tcp, SrcIpSetIds: []string{"s:trusted"}},
		}, nil))
	if got := server.Run(t, "nft", "list", "table", "inet", cfg.TableName); got != model.String() {
		t.Errorf("nft list table (-model +kernel):\n%s", cmp.Diff(model.String(), got))
	}
	if !reach(v4) {
		t.Errorf("step 1: trusted v4 client cannot reach %s", v4)
	}
	if reach("10.0.0.2:9999") {
		t.Errorf("step 1: port 9999 is reachable despite the deny")
	}
	if reach(v6) {
		t.Errorf("step 1: untrusted v6 client reached %s", v6)
	}

	// 2. The v6 address joins: elements only, no rule is sent.
	st := step(&proto.IPSetDeltaUpdate{Id: "s:trusted", AddedMembers: []string{"fd00::1/128"}})
	wantOnlyElementOps(t, "step 2", table, st)
	if !reach(v6) {
		t.Errorf("step 2: v6 client added to the trusted set cannot reach %s", v6)
	}

	// 3. The /28 goes; the /32 it hid is programmed in its place.
	st = step(&proto.IPSetDeltaUpdate{Id: "s:trusted", RemovedMembers: []string{"10.0.0.0/28"}})
	wantOnlyElementOps(t, "step 3", table, st)
	if got := server.Run(t, "nft", "list", "set", "inet", cfg.TableName, IPSetName("s:trusted", nft.IPv4)); !strings.Contains(got, "elements = { 10.0.0.1, 192.168.50.0/24 }") {
		t.Errorf("step 3: kernel set:\n%s", got)
	}
	if !reach(v4) {
		t.Errorf("step 3: client (still a /32 member) cannot reach %s", v4)
	}

	// 4. The /32 goes too.
	step(&proto.IPSetDeltaUpdate{Id: "s:trusted", RemovedMembers: []string{"10.0.0.1/32"}})
	if reach(v4) {
		t.Errorf("step 4: client removed from the trusted set still reaches %s", v4)
	}

	// 5. The policy goes while the input chain still jumps to it: the
	//    placeholder drops everything that reaches it, v6 included.
	step(&proto.ActivePolicyRemove{Id: gnp("p")}, &proto.IPSetRemove{Id: "s:trusted"})
	if reach(v6) {
		t.Errorf("step 5: traffic passed a removed (fail-closed) policy")
	}
	if got := model.SetNames(); len(got) != 0 {
		t.Errorf("step 5: sets left in the model: %v", got)
	}
}

// wantOnlyElementOps checks that the last transaction only added and
// deleted set elements: an IP set delta never rewrites a chain.
func wantOnlyElementOps(t *testing.T, step string, table *nft.Table, st nft.ApplyStats) {
	t.Helper()
	tx := table.LastTransaction()
	if tx == nil || st.Operations == 0 {
		t.Fatalf("%s: nothing was sent", step)
	}
	for _, op := range tx.Ops {
		if op.Kind != nft.OpAddElements && op.Kind != nft.OpDeleteElements {
			t.Errorf("%s: transaction has %s %s; want element changes only", step, op.Kind, op.Name)
		}
	}
}

// TestKernelNegatedNetsPerFamily sends real packets over both families
// and in both directions through per-family rules written with negated
// CIDRs only, the way Calico users write "anywhere but the uplink": each
// rule exists in the family of its list and nowhere else. Rendering a
// rule for the other family without its address match would allow that
// family from anywhere (fail open).
//
//	[client] eth0 10.0.0.1/24 fd00::1/64 ── eth0 10.0.0.2/24 fd00::2/64 [server]
//
// The server's input chain stands in for its ingress endpoint chain and
// its output chain for its egress one; policy "p" allows TCP except from
// (to) the client's subnets, and port 7070 from (to) anywhere.
func TestKernelNegatedNetsPerFamily(t *testing.T) {
	client, server := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, client, "eth0", server, "eth0")
	for _, ns := range []*netnstest.NS{client, server} {
		ns.Run(t, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0")
	}
	client.AddAddr(t, "eth0", "10.0.0.1/24")
	client.AddAddr(t, "eth0", "fd00::1/64")
	server.AddAddr(t, "eth0", "10.0.0.2/24")
	server.AddAddr(t, "eth0", "fd00::2/64")

	cfg := render.DefaultConfig()
	table := newKernelTable(t, server, cfg.TableName)
	model := table.Desired()
	acc, pass := cfg.Marks.Accept, cfg.Marks.Pass
	po := render.PolicyChainName(render.LayerFilter, render.Egress, "default", gnp("p"))
	endpointChain := func(name string, hook nft.Hook, lo nft.Direction, policy string) *nft.Chain {
		return &nft.Chain{
			Name: name,
			Base: &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: hook, Priority: nft.PriorityFilter, Policy: nft.PolicyAccept},
			Rules: []*nft.Rule{
				{Match: []nft.Match{nft.CtStateMatch{States: nft.CtStateEstablished | nft.CtStateRelated}}, Action: nft.Verdict{Kind: nft.Accept}},
				{Match: []nft.Match{nft.IfName{Dir: lo, Name: "lo"}}, Action: nft.Verdict{Kind: nft.Accept}},
				{Action: nft.SetMark{And: ^(acc | pass)}},
				{Action: nft.Verdict{Kind: nft.Jump, Chain: policy}},
				{Match: []nft.Match{nft.Mark{Mask: acc, Value: acc}}, Action: nft.Verdict{Kind: nft.Accept}},
				{Match: []nft.Match{nft.L4Proto{Protos: []uint8{protoTCP}}}, Action: nft.Verdict{Kind: nft.Drop}},
			},
		}
	}
	model.SetChain(endpointChain("test-ingress", nft.HookInput, nft.In, pi("p")))
	model.SetChain(endpointChain("test-egress", nft.HookOutput, nft.Out, po))

	m := New(cfg, model, nil)
	m.UseChain(pi("p"))
	m.UseChain(po)
	m.OnUpdate(policyUpdate(gnp("p"), "default",
		[]*proto.Rule{
			{Action: "allow", Protocol: tcp, NotSrcNet: []string{"10.0.0.0/24"}},
			{Action: "allow", Protocol: tcp, NotSrcNet: []string{"fd00::/64"}},
			{Action: "allow", Protocol: tcp, DstPorts: ports(7070, 7070)},
		},
		[]*proto.Rule{
			{Action: "allow", Protocol: tcp, NotDstNet: []string{"10.0.0.0/24"}},
			{Action: "allow", Protocol: tcp, NotDstNet: []string{"fd00::/64"}},
			{Action: "allow", Protocol: tcp, DstPorts: ports(7070, 7070)},
		}))
	if err := m.CompleteDeferredWork(); err != nil {
		t.Fatal(err)
	}
	apply(t, table)

	for _, c := range []struct {
		what     string
		from, to *netnstest.NS
		addr     string
		want     bool
	}{
		{"ingress IPv4 from the excluded subnet", client, server, "10.0.0.2:8080", false},
		{"ingress IPv6 from the excluded subnet", client, server, "[fd00::2]:8080", false},
		{"egress IPv4 to the excluded subnet", server, client, "10.0.0.1:8080", false},
		{"egress IPv6 to the excluded subnet", server, client, "[fd00::1]:8080", false},
		{"ingress IPv4 to the open port", client, server, "10.0.0.2:7070", true},
		{"ingress IPv6 to the open port", client, server, "[fd00::2]:7070", true},
		{"egress IPv4 to the open port", server, client, "10.0.0.1:7070", true},
		{"egress IPv6 to the open port", server, client, "[fd00::1]:7070", true},
	} {
		got := testutil.Connect(t, c.from, c.to, c.addr, 700*time.Millisecond) == nil
		if got != c.want {
			t.Errorf("%s (%s): connected %v, want %v", c.what, c.addr, got, c.want)
		}
		traceAgrees(t, server, cfg.TableName, c.to == server, c.addr, got)
	}
	if t.Failed() {
		t.Logf("ruleset:\n%s", server.Run(t, "nft", "list", "table", "inet", cfg.TableName))
	}
}
