package policy

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// TestNetSetSplitAndMerged: a NET set's members are split by family and
// reduced to the prefixes no other member contains (duplicates, a /32 in a
// /28, a /24 in a /16), so the kernel never sees overlapping intervals.
func TestNetSetSplitAndMerged(t *testing.T) {
	h := newHarness(t)
	h.step(netSet("s:q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA",
		"10.65.0.0/28", "192.168.50.0/24", "10.65.0.2/32", "10.65.0.2/32", "10.65.0.16/28",
		"172.16.0.0/16", "172.16.5.0/24", "10.1.2.3", "10.1.2.99/24",
		"fd00:65::3/128", "fd00::/16", "fd01::1", "::ffff:10.200.0.1/128"))
	wantText(t, "v4", `
		set ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v4 {
			type ipv4_addr
			flags interval
			comment "Felix IP set s:q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA"
			elements = { 10.1.2.0/24, 10.65.0.0/28,
				     10.65.0.16/28, 10.200.0.1,
				     172.16.0.0/16, 192.168.50.0/24 }
		}
	`, h.set("ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v4"))
	wantText(t, "v6", `
		set ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v6 {
			type ipv6_addr
			flags interval
			comment "Felix IP set s:q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA"
			elements = { fd00::/16,
				     fd01::1 }
		}
	`, h.set("ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v6"))
}

// TestNetSetDeltas: members are remembered as Felix sent them, so removing
// a covering prefix brings back the members it hid, and adding a covered
// one changes no element.
func TestNetSetDeltas(t *testing.T) {
	h := newHarness(t)
	elems := func() []string {
		var out []string
		for _, f := range []nft.IPFamily{nft.IPv4, nft.IPv6} {
			for k := range h.model.Set(IPSetName("s:x", f)).Elements {
				out = append(out, k)
			}
		}
		return sortedStrings(out)
	}
	for i, step := range []struct {
		msg  any
		want []string
	}{
		{netSet("s:x", "10.0.0.0/24"), []string{"10.0.0.0/24"}},
		{&proto.IPSetDeltaUpdate{Id: "s:x", AddedMembers: []string{"10.0.0.7/32", "fd00::7/128"}}, []string{"10.0.0.0/24", "fd00::7"}},
		{&proto.IPSetDeltaUpdate{Id: "s:x", RemovedMembers: []string{"10.0.0.0/24"}}, []string{"10.0.0.7", "fd00::7"}},
		// Removing a member that is not there, and a malformed one.
		{&proto.IPSetDeltaUpdate{Id: "s:x", RemovedMembers: []string{"10.9.9.9/32", "junk"}}, []string{"10.0.0.7", "fd00::7"}},
		// Remove and add the same member in one delta: Felix applies
		// removals first, so it stays.
		{&proto.IPSetDeltaUpdate{Id: "s:x", RemovedMembers: []string{"fd00::7/128"}, AddedMembers: []string{"fd00::7/128"}}, []string{"10.0.0.7", "fd00::7"}},
		{&proto.IPSetDeltaUpdate{Id: "s:x", AddedMembers: []string{"10.0.0.0/8"}}, []string{"10.0.0.0/8", "fd00::7"}},
	} {
		h.step(step.msg)
		if diff := cmp.Diff(step.want, elems()); diff != "" {
			t.Errorf("step %d: elements (-want +got):\n%s", i+1, diff)
		}
	}
}

func TestIPAndPortAndIPSets(t *testing.T) {
	var logs bytes.Buffer
	h := newHarness(t)
	h.m.log = slog.New(slog.NewTextHandler(&logs, nil))
	h.step(
		&proto.IPSetUpdate{Id: "n:Xb1", Type: proto.IPSetUpdate_IP_AND_PORT, Members: []string{
			"10.65.0.1,tcp:8080", "10.65.0.1,udp:8080", "10.65.0.2,sctp:9", "fd00::1,tcp:80",
			"10.65.0.3,icmp:1", "10.65.0.4/24,tcp:80", "10.65.0.5", "10.65.0.6,tcp:99999",
		}},
		&proto.IPSetUpdate{Id: "s:all", Type: proto.IPSetUpdate_IP, Members: []string{"10.65.0.1", "10.65.0.2/32", "fd00::2", "10.0.0.0/8"}},
	)
	got := h.set("ipset-n.Xb1-v4") + h.set("ipset-n.Xb1-v6") + h.set("ipset-s.all-v4") + h.set("ipset-s.all-v6")
	wantText(t, "sets", `
		set ipset-n.Xb1-v4 {
			type ipv4_addr . inet_proto . inet_service
			comment "Felix IP set n:Xb1"
			elements = { 10.65.0.2 . sctp . 9,
				     10.65.0.1 . tcp . 8080,
				     10.65.0.1 . udp . 8080 }
		}
		set ipset-n.Xb1-v6 {
			type ipv6_addr . inet_proto . inet_service
			comment "Felix IP set n:Xb1"
			elements = { fd00::1 . tcp . 80 }
		}
		set ipset-s.all-v4 {
			type ipv4_addr
			comment "Felix IP set s:all"
			elements = { 10.65.0.1, 10.65.0.2 }
		}
		set ipset-s.all-v6 {
			type ipv6_addr
			comment "Felix IP set s:all"
			elements = { fd00::2 }
		}
	`, got)
	// Each bad member is logged by value; the good ones are all there.
	for _, bad := range []string{"10.65.0.3,icmp:1", "10.65.0.4/24,tcp:80", "10.65.0.5", "10.65.0.6,tcp:99999", "10.0.0.0/8"} {
		if !strings.Contains(logs.String(), bad) {
			t.Errorf("bad member %q not logged; log:\n%s", bad, logs.String())
		}
	}
}

func TestIPSetNames(t *testing.T) {
	long := "s:" + strings.Repeat("A", 239)
	for _, tc := range []struct {
		id   string
		fam  nft.IPFamily
		want string
	}{
		{"s:q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA", nft.IPv4, "ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA-v4"},
		{"n:abc_-", nft.IPv6, "ipset-n.abc_--v6"},
		{"svcnoport:x:y", nft.IPv4, "ipset-svcnoport.x.y-v4"},
		// Not of Felix's shape: hashed.
		{"plain", nft.IPv4, "ipset-x_oRbJ7UbWIHc0pDMX0w_Yj1KshjTDfZBLv05B2GX5BHU-v4"},
		{"s:has.dot", nft.IPv4, "ipset-x_RE1PMMEJS5Ym5b7XDluURoa70zHRgXwS2fCPVBCm5DY-v4"},
		{"s:quote\"", nft.IPv4, "ipset-x_PRGgDuBA587S-294CleY3D73OpGVwALXGDuYOFHjQSY-v4"},
		{long, nft.IPv4, "ipset-x_vJ6La1jYbYzZF6oJaUo42claPoUMSgeHr8zPwzRD3IU-v4"},
		{long[:240], nft.IPv4, "ipset-" + strings.ReplaceAll(long[:240], ":", ".") + "-v4"},
	} {
		got := IPSetName(tc.id, tc.fam)
		if got != tc.want {
			t.Errorf("IPSetName(%q, %d) = %q, want %q", tc.id, tc.fam, got, tc.want)
		}
		if len(got) > maxNameLen {
			t.Errorf("IPSetName(%q) = %q: %d bytes, more than %d", tc.id, got, len(got), maxNameLen)
		}
	}
}

// TestIPSetNamesAreLegal: every name, plain or hashed, is accepted by the
// model's validation as a set name.
func TestIPSetNamesAreLegal(t *testing.T) {
	m := nft.NewModel(nft.FamilyINet, "t")
	for _, id := range []string{"s:x", "weird id with spaces", "s:" + strings.Repeat("z", 300), "n:" + strings.Repeat("y", 238)} {
		for _, f := range []nft.IPFamily{nft.IPv4, nft.IPv6} {
			m.SetSet(setDef(id, proto.IPSetUpdate_NET, f))
		}
	}
	if err := m.Validate(); err != nil {
		t.Error(err)
	}
}

func sortedStrings(ss []string) []string {
	out := append([]string(nil), ss...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestSetDeltasMatchWholeWrite: after every delta of a random walk (hosts
// mostly, now and then a prefix that covers or uncovers some), the set's
// elements are those a whole write of its members gives, for each type of
// set: what a delta changes one element at a time must add up.
func TestSetDeltasMatchWholeWrite(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []proto.IPSetUpdate_IPSetType{proto.IPSetUpdate_NET, proto.IPSetUpdate_IP, proto.IPSetUpdate_IP_AND_PORT} {
		h := newHarness(t)
		member := func() string {
			host := fmt.Sprintf("10.0.%d.%d", rnd.IntN(4), rnd.IntN(8))
			if rnd.IntN(3) == 0 {
				host = fmt.Sprintf("fd00::%x", rnd.IntN(16))
			}
			switch {
			case typ == proto.IPSetUpdate_IP_AND_PORT:
				return host + ",tcp:" + strconv.Itoa(80+rnd.IntN(2))
			case typ == proto.IPSetUpdate_NET && rnd.IntN(8) == 0:
				return fmt.Sprintf("10.0.%d.0/%d", rnd.IntN(4), 22+rnd.IntN(3))
			}
			return host
		}
		h.step(&proto.IPSetUpdate{Id: "s:x", Type: typ, Members: []string{member()}})
		for step := range 300 {
			d := &proto.IPSetDeltaUpdate{Id: "s:x"}
			for range 1 + rnd.IntN(3) {
				if rnd.IntN(2) == 0 {
					d.AddedMembers = append(d.AddedMembers, member())
				} else {
					d.RemovedMembers = append(d.RemovedMembers, member())
				}
			}
			h.step(d)
			s := h.m.sets["s:x"]
			for _, f := range []nft.IPFamily{nft.IPv4, nft.IPv6} {
				got := map[string]bool{}
				for k := range h.model.Set(IPSetName("s:x", f)).Elements {
					got[k] = true
				}
				if diff := cmp.Diff(s.elements(f), got); diff != "" {
					t.Fatalf("%v, step %d (%v): elements of %v (-whole write +deltas):\n%s", typ, step, d, f, diff)
				}
			}
		}
	}
}
