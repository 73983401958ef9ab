package dataplane

// Named bad-input cases from Felix: each is refused with a reason that
// names the object and the field, and everything valid beside it is
// applied in the same transaction (the fake kernel checks the transaction
// as nf_tables would). The state file's own cases are in
// statefile_test.go: a state file is refused whole, so the running
// ruleset stays as it was.

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// badInputEngine is an engine over a fake kernel with the default Felix
// configuration.
func badInputEngine(t *testing.T) (*engine, *fakeKernel) {
	t.Helper()
	k := newFakeKernel()
	cfg, err := ParseConfig(map[string]string{"InterfacePrefix": "cali"}, "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(cfg, k, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, k
}

// applyBatch hands msgs to e as one batch and programs it: the
// transaction must be accepted.
func (e *engine) applyBatch(t *testing.T, msgs ...*proto.ToDataplane) applyResult {
	t.Helper()
	for _, m := range msgs {
		e.update(Payload(m))
	}
	if err := e.compute(); err != nil {
		t.Fatal(err)
	}
	r, err := e.program(context.Background(), false, true)
	if err != nil {
		t.Fatalf("the kernel refused the batch: %v", err)
	}
	return r
}

func TestBadFelixInputStaysWithItsObject(t *testing.T) {
	e, k := badInputEngine(t)
	badCIDR := wepUpdate("ns/b", "cali2", "10.0.0.2")
	badCIDR.GetWorkloadEndpointUpdate().Endpoint.Ipv4Nets = []string{"10.0.0.300/32"}
	badMAC := wepUpdate("ns/c", "cali3", "10.0.0.3")
	badMAC.GetWorkloadEndpointUpdate().Endpoint.Mac = "zz"
	badName := wepUpdate("ns/d", `cali"4`, "10.0.0.4")
	longName := wepUpdate("ns/h", "cali0123456789abcdef", "10.0.0.8")
	sameIface := wepUpdate("ns/e", "cali1", "10.0.0.5") // cali1 is ns/a's
	neverSent := wepUpdate("ns/f", "cali6", "10.0.0.6")
	neverSent.GetWorkloadEndpointUpdate().Endpoint.Tiers = []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: "never-sent"}}}}
	neverSent.GetWorkloadEndpointUpdate().Endpoint.ProfileIds = []string{"never-sent-profile"}
	overlapping := &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: "s:o", Type: proto.IPSetUpdate_NET,
		Members: []string{"10.1.2.3/32", "10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "fd00::/64", "fd00::1"}}}}
	usesSet := &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{Id: &proto.PolicyID{Name: "uses-o"},
		Policy: &proto.Policy{InboundRules: []*proto.Rule{{Action: "allow", SrcIpSetIds: []string{"s:o"}}}}}}}
	usesSetEp := wepUpdate("ns/i", "cali9", "10.0.0.9")
	usesSetEp.GetWorkloadEndpointUpdate().Endpoint.Tiers = []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: "uses-o"}}}}

	e.applyBatch(t,
		wepUpdate("ns/a", "cali1", "10.0.0.1"),
		badCIDR, badMAC, badName, longName, sameIface, neverSent,
		// The same ID twice: an update replaces the endpoint, as in Felix.
		wepUpdate("ns/g", "cali7", "10.0.0.7"), wepUpdate("ns/g", "cali8", "10.0.0.7"),
		overlapping, usesSet, usesSetEp,
	)

	status := map[string]endpoints.EndpointStatus{}
	for _, s := range e.eps.Statuses() {
		status[s.ID] = s
	}
	for id, want := range map[string]string{
		"k8s/ns/b/eth0": `error: ipv4Nets[0]: "10.0.0.300/32" is not an IPv4 CIDR or address`,
		"k8s/ns/c/eth0": `error: mac: "zz" is not a MAC address`,
		"k8s/ns/d/eth0": `error: name: interface name "cali\"4" has character '"': nftables cannot match it`,
		"k8s/ns/h/eth0": `error: name: interface name "cali0123456789abcdef" is longer than 15 bytes`,
		"k8s/ns/e/eth0": `error: interface cali1 belongs to workload endpoint k8s/ns/a/eth0`,
	} {
		s := status[id]
		if got := s.Status + ": " + s.Reason; got != want {
			t.Errorf("%s: status %q, want %q", id, got, want)
		}
	}
	for _, id := range []string{"k8s/ns/a/eth0", "k8s/ns/f/eth0", "k8s/ns/g/eth0", "k8s/ns/i/eth0"} {
		if s := status[id]; s.Status == endpoints.StatusError {
			t.Errorf("%s: %s %s, want it programmed", id, s.Status, s.Reason)
		}
	}

	table := k.nft.DumpTable(nft.FamilyINet, "nftep")
	m := e.inet.Desired()
	fromWL := m.Set("filter-from-wl")
	var ifaces []string
	for _, el := range fromWL.SortedElements() {
		ifaces = append(ifaces, el.Key)
	}
	if got, want := strings.Join(ifaces, " "), "cali1 cali6 cali8 cali9"; got != want {
		t.Errorf("workload dispatch map holds %q, want %q (the valid endpoints, ns/g on its latest interface)", got, want)
	}
	// A policy or profile Felix never sent is a chain that drops.
	for _, c := range []string{"filter-pi-default.never-sent", "filter-pro-never-sent-profile", "filter-pri-never-sent-profile"} {
		if !strings.Contains(table, "chain "+c+" {\n\t\tdrop comment \"unknown policy or profile: fail closed\"\n\t}") {
			t.Errorf("chain %s is not a fail-closed placeholder:\n%s", c, table)
		}
	}
	// Overlapping members collapse into the widest, per family.
	for set, want := range map[string]string{"ipset-s.o-v4": "10.0.0.0/8", "ipset-s.o-v6": "fd00::/64"} {
		var got []string
		for _, el := range m.Set(set).SortedElements() {
			got = append(got, el.Key)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("set %s holds %q, want %q", set, got, want)
		}
	}
}

// TestMillionMemberIPSet: an IP set of 1,000,000 members is programmed
// (one transaction the fake kernel accepts, with every member), and a
// one-member change to it afterwards is one element operation. Under the
// race detector it takes 100,000 members (a million take minutes there);
// hack/test.sh runs it once more without the detector, at a million. With
// -short it makes the same checks at 10,000 members.
func TestMillionMemberIPSet(t *testing.T) {
	size := 1_000_000
	switch {
	case testing.Short():
		size = 10_000
	case raceDetector:
		size = 100_000
	}
	e, k := badInputEngine(t)
	k.nft.OnCommit(func() {}) // no per-commit history: a dump of a million elements each time
	members := make([]string, 0, size)
	for i := range size {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		members = append(members, a.String())
	}
	big := &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: "s:big", Type: proto.IPSetUpdate_NET, Members: members}}}
	pol := &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{Id: &proto.PolicyID{Name: "big"},
		Policy: &proto.Policy{InboundRules: []*proto.Rule{{Action: "allow", SrcIpSetIds: []string{"s:big"}}}}}}}
	ep := wepUpdate("ns/a", "cali1", "10.200.0.1")
	ep.GetWorkloadEndpointUpdate().Endpoint.Tiers = []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: "big"}}}}
	start := time.Now()
	r := e.applyBatch(t, big, pol, ep)
	t.Logf("%d members programmed in %v: %d operations, %d messages, %d MB", size, time.Since(start).Round(time.Millisecond),
		r.inet.Operations, r.inet.Messages, r.inet.Bytes>>20)
	if n := len(e.inet.Desired().Set("ipset-s.big-v4").SortedElements()); n != size {
		t.Errorf("the set holds %d members, want %d", n, size)
	}
	if r.inet.Operations < size {
		t.Errorf("the transaction has %d operations, fewer than the members", r.inet.Operations)
	}
	r = e.applyBatch(t, &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{Id: "s:big", AddedMembers: []string{"192.0.2.1"}}}})
	if r.inet.Operations != 1 {
		t.Errorf("a one-member change: %d operations, want one element operation", r.inet.Operations)
	}
	_ = k
}

// TestStateFileTooLarge: a state file of 200 MB is refused before it is
// read, with an error naming the file and the limit.
func TestStateFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: 200 MB that take no disk.
	if err := f.Truncate(200 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = LoadStateFile(path)
	want := fmt.Sprintf("state file %q: 200 MiB, more than the 64 MiB a state file may hold", path)
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestARPAndIPSetChangesAreConstant: whatever the number of endpoints, one
// endpoint added, changed or removed is the same few operations in the arp
// table (one element per IPv4 address: the table has no per-endpoint
// chain), and one IP-set member added or removed is one element operation
// in the inet table.
func TestARPAndIPSetChangesAreConstant(t *testing.T) {
	type sizes struct{ add, change, remove, member, arpChains int }
	measure := func(n int) sizes {
		e, _ := badInputEngine(t)
		set := &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: "s:x", Type: proto.IPSetUpdate_NET, Members: []string{"10.99.0.1/32"}}}}
		pol := &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{Id: &proto.PolicyID{Name: "p"},
			Policy: &proto.Policy{InboundRules: []*proto.Rule{{Action: "allow", SrcIpSetIds: []string{"s:x"}}}}}}}
		msgs := []*proto.ToDataplane{set, pol}
		ep := func(i int, addr string) *proto.ToDataplane {
			m := wepUpdate(fmt.Sprintf("ns/pod-%d", i), fmt.Sprintf("cali%07x", i), addr)
			m.GetWorkloadEndpointUpdate().Endpoint.Tiers = []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: "p"}}}}
			return m
		}
		for i := range n {
			msgs = append(msgs, ep(i, netip.AddrFrom4([4]byte{10, 64, byte(i >> 8), byte(i)}).String()))
		}
		e.applyBatch(t, msgs...)
		var s sizes
		s.add = e.applyBatch(t, ep(n, "10.200.0.1")).arp.Operations
		s.change = e.applyBatch(t, ep(n, "10.200.0.2")).arp.Operations
		s.remove = e.applyBatch(t, wepRemove(fmt.Sprintf("ns/pod-%d", n))).arp.Operations
		s.member = e.applyBatch(t, &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{Id: "s:x", AddedMembers: []string{"10.99.0.2"}}}}).inet.Operations
		s.arpChains = len(e.arp.Desired().ChainNames())
		return s
	}
	// 10,000 endpoints; under the race detector 1,000 (hack/test.sh runs
	// the test again without it).
	n := 10_000
	if raceDetector {
		n = 1_000
	}
	small, large := measure(100), measure(n)
	if small != large {
		t.Errorf("operations at 100 endpoints %+v, at %d %+v: want equal", small, n, large)
	}
	want := sizes{add: 1, change: 2, remove: 1, member: 1, arpChains: 1}
	if large != want {
		t.Errorf("operations %+v, want %+v (arp: an element per address; a member: one element)", large, want)
	}
}
