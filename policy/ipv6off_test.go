package policy

import (
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// ipv6Off is Ipv6Support false.
func ipv6Off(c *render.Config) { c.IPv6 = false }

// TestIPv6OffSets: with IPv6 off a Felix IP set is one nft set, "-v4", of
// its IPv4 members; IPv6 members, in the update or in deltas, are dropped
// without an error and change nothing, and the set's removal deletes the
// one set.
func TestIPv6OffSets(t *testing.T) {
	h := newHarness(t, ipv6Off)
	h.jumpTo(pi("p"))
	h.step(
		netSet("s:a", "10.0.1.0/24", "fd00:1::/64", "::ffff:10.0.2.1"),
		&proto.IPSetUpdate{Id: "i:a", Type: proto.IPSetUpdate_IP, Members: []string{"fd00:1::1", "10.0.1.1"}},
		&proto.IPSetUpdate{Id: "n:web", Type: proto.IPSetUpdate_IP_AND_PORT, Members: []string{"10.0.1.5,tcp:8080", "fd00:1::5,tcp:8080"}},
		&proto.IPSetUpdate{Id: "n:v6only", Type: proto.IPSetUpdate_IP_AND_PORT, Members: []string{"fd00:1::5,udp:53"}},
		policyUpdate(gnp("p"), "default", []*proto.Rule{
			{Action: "allow", SrcIpSetIds: []string{"s:a", "i:a"}},
			{Action: "allow", Protocol: tcp, DstNamedPortIpSetIds: []string{"n:web", "n:v6only"}},
		}, nil),
	)
	var sets strings.Builder
	for _, n := range h.model.SetNames() {
		sets.WriteString(h.set(n))
	}
	wantText(t, "sets", `
		set ipset-i.a-v4 {
			type ipv4_addr
			comment "Felix IP set i:a"
			elements = { 10.0.1.1 }
		}
		set ipset-n.v6only-v4 {
			type ipv4_addr . inet_proto . inet_service
			comment "Felix IP set n:v6only"
		}
		set ipset-n.web-v4 {
			type ipv4_addr . inet_proto . inet_service
			comment "Felix IP set n:web"
			elements = { 10.0.1.5 . tcp . 8080 }
		}
		set ipset-s.a-v4 {
			type ipv4_addr
			flags interval
			comment "Felix IP set s:a"
			elements = { 10.0.1.0/24, 10.0.2.1 }
		}
	`, sets.String())
	wantText(t, "chain", `
		chain filter-pi-default.p {
			ip saddr @ipset-s.a-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			ip saddr @ipset-i.a-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			ip daddr . meta l4proto . tcp dport @ipset-n.web-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
			ip daddr . meta l4proto . tcp dport @ipset-n.v6only-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
		}
	`, h.chain(pi("p")))

	// IPv6 deltas change nothing; IPv4 ones still work.
	before := h.model.Clone()
	h.step(&proto.IPSetDeltaUpdate{Id: "s:a", AddedMembers: []string{"fd00:2::/64"}, RemovedMembers: []string{"fd00:1::/64"}})
	if got, want := h.model.String(), before.String(); got != want {
		t.Errorf("an IPv6 delta changed the model:\n%s", got)
	}
	h.step(&proto.IPSetDeltaUpdate{Id: "s:a", AddedMembers: []string{"10.0.3.0/24", "fd00:3::1"}})
	if _, ok := h.model.Set(IPSetName("s:a", nft.IPv4)).Elements["10.0.3.0/24"]; !ok {
		t.Errorf("an IPv4 member added with an IPv6 one is missing")
	}
	noIPv6Sets(t, h.model)

	// Removal: the one set goes.
	h.jumpTo()
	h.step(&proto.ActivePolicyRemove{Id: gnp("p")}, &proto.IPSetRemove{Id: "s:a"})
	if h.model.Set(IPSetName("s:a", nft.IPv4)) != nil {
		t.Errorf("ipset-s.a-v4 survived its removal")
	}
	noIPv6Sets(t, h.model)
}

// noIPv6Sets fails if the model holds a set for IPv6: named "-v6" or keyed
// on IPv6 addresses.
func noIPv6Sets(t *testing.T, m *nft.Model) {
	t.Helper()
	for _, n := range m.SetNames() {
		if strings.HasSuffix(n, "-v6") {
			t.Errorf("IPv6 off: set %s exists", n)
		}
		for _, k := range m.Set(n).Key {
			if k == nft.TypeIPv6Addr {
				t.Errorf("IPv6 off: set %s is keyed on IPv6 addresses", n)
			}
		}
	}
}
