package policy

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

var allowTCP80 = []*proto.Rule{{Action: "allow", Protocol: tcp, DstPorts: ports(80, 80)}}

func wantChains(t *testing.T, h *harness, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	got := h.ourChains()
	if got == nil {
		got = []string{}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chains of ours (-want +got):\n%s", diff)
	}
}

// TestOnlyReferencedChainsAreWritten: a policy's chain is written in the
// layers and directions something jumps to, and deleted when nothing does.
func TestOnlyReferencedChainsAreWritten(t *testing.T) {
	h := newHarness(t)
	id := gnp("p")
	// 1. Known but unused: nothing.
	h.step(policyUpdate(id, "default", allowTCP80, allowTCP80))
	wantChains(t, h)

	// 2. A workload jumps to its inbound chain.
	h.jumpTo(pi("p"))
	h.step()
	wantChains(t, h, "filter-pi-default.p")

	// 3. A host endpoint's mangle egress chain jumps to the outbound chain.
	mpo := render.PolicyChainName(render.LayerMangle, render.Egress, "default", id)
	h.jumpTo(pi("p"), mpo)
	h.step()
	wantChains(t, h, "filter-pi-default.p", "mangle-po-default.p")
	wantText(t, "mangle chain", `
		chain mangle-po-default.p {
			tcp dport 80 meta mark set meta mark | 0x00010000 return comment "policy default/p outbound rule 0"
		}
	`, h.chain(mpo))

	// 4. Nothing jumps any more: the chains go, the policy stays known.
	h.deleteChain(refChain)
	h.step()
	wantChains(t, h)
	h.jumpTo(pi("p"))
	h.step()
	wantChains(t, h, "filter-pi-default.p")
}

// TestUnknownTargetFailsClosed: a jump to a policy or profile Felix has not
// sent gets a placeholder that drops; the real chain replaces it when the
// policy arrives, and the placeholder comes back when it is removed while
// still referenced.
func TestUnknownTargetFailsClosed(t *testing.T) {
	var logs bytes.Buffer
	h := newHarness(t)
	h.m.log = slog.New(slog.NewTextHandler(&logs, nil))
	pro := render.ProfileChainName(render.LayerFilter, render.Egress, "kns.default")
	placeholder := func(name string) string {
		return "chain " + name + " {\n\tdrop comment \"unknown policy or profile: fail closed\"\n}\n"
	}

	// 1. Referenced before Felix sent anything.
	h.jumpTo(pi("p"), pro)
	h.step()
	wantText(t, "policy placeholder", placeholder(pi("p")), h.chain(pi("p")))
	wantText(t, "profile placeholder", placeholder(pro), h.chain(pro))
	if !strings.Contains(logs.String(), "chain=filter-pi-default.p") {
		t.Errorf("no warning naming the unknown chain; log:\n%s", logs.String())
	}

	// 2. The policy and profile arrive.
	h.step(policyUpdate(gnp("p"), "default", allowTCP80, nil), profileUpdate("kns.default", nil, []*proto.Rule{{Action: "allow"}}))
	wantText(t, "policy", `
		chain filter-pi-default.p {
			tcp dport 80 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
		}
	`, h.chain(pi("p")))
	wantText(t, "profile", `
		chain filter-pro-kns.default {
			meta mark set meta mark | 0x00010000 return comment "profile kns.default outbound rule 0"
		}
	`, h.chain(pro))

	// 3. Removed while an endpoint still jumps to it: fail closed again.
	h.step(&proto.ActivePolicyRemove{Id: gnp("p")})
	wantText(t, "policy placeholder again", placeholder(pi("p")), h.chain(pi("p")))

	// 4. A remove of something never sent is ignored.
	h.step(&proto.ActivePolicyRemove{Id: gnp("never")}, &proto.ActiveProfileRemove{Id: &proto.ProfileID{Name: "never"}},
		&proto.IPSetRemove{Id: "s:never"}, &proto.IPSetDeltaUpdate{Id: "s:never", AddedMembers: []string{"10.0.0.1/32"}})
	wantChains(t, h, pi("p"), pro)
}

// TestBadRuleFailsClosed: a rule that cannot be rendered makes its
// policy's chain (in that direction) drop everything, with the reason in
// the comment and the log; other policies and the other direction are
// rendered normally.
func TestBadRuleFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule *proto.Rule
		why  string // the comment of the drop rule
	}{
		{"unparsable CIDR", &proto.Rule{SrcNet: []string{"10.0.0.0/33"}},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: src_net: _10.0.0.0/33_ is not a CIDR or address`},
		{"unknown IP set", &proto.Rule{DstIpSetIds: []string{"s:missing"}},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: dst_ip_set_ids: unknown IP set _s:missing_`},
		{"named-port field names a NET set", &proto.Rule{DstNamedPortIpSetIds: []string{"s:a"}},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: dst_named_port_ip_set_ids: IP set _s:a_ has type NET`},
		{"ports without a protocol", &proto.Rule{DstPorts: ports(80, 80)},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: ports need protocol tcp, udp, sctp or udplite`},
		{"ports with icmp", &proto.Rule{Protocol: protoName("icmp"), NotSrcPorts: ports(1, 2)},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: ports need protocol tcp, udp, sctp or udplite`},
		{"backwards port range", &proto.Rule{Protocol: tcp, DstPorts: ports(90, 80)},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: dst_ports: bad port range 90-80`},
		{"unknown action", &proto.Rule{Action: "teleport"},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: unknown action _teleport_`},
		{"unknown protocol", &proto.Rule{Protocol: protoName("carrier-pigeon")},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: protocol: unknown protocol _carrier-pigeon_`},
		{"protocol number out of range", &proto.Rule{NotProtocol: protoNum(300)},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: not_protocol: number 300 out of range 0-255`},
		{"icmp type without icmp protocol", &proto.Rule{Protocol: tcp, Icmp: &proto.Rule_IcmpType{IcmpType: 8}},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: icmp type or code needs protocol icmp or icmpv6`},
		{"icmp type out of range", &proto.Rule{Protocol: protoName("icmp"), Icmp: &proto.Rule_IcmpType{IcmpType: 256}},
			`policy default/bad inbound: fail closed: policy default/bad inbound rule 1: icmp: type 256 out of range 0-255`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := newHarness(t)
			h.m.log = slog.New(slog.NewTextHandler(&logs, nil))
			bad := gnp("bad")
			badOut := render.PolicyChainName(render.LayerFilter, render.Egress, "default", bad)
			h.jumpTo(pi("good"), pi("bad"), badOut)
			h.step(netSet("s:a", "10.0.0.0/8"),
				policyUpdate(gnp("good"), "default", allowTCP80, nil),
				policyUpdate(bad, "default", []*proto.Rule{{Action: "allow"}, tc.rule}, allowTCP80))
			wantText(t, "bad policy", "chain filter-pi-default.bad {\n\tdrop comment \""+tc.why+"\"\n}\n", h.chain(pi("bad")))
			if got := h.chain(pi("good")); !strings.Contains(got, "tcp dport 80") {
				t.Errorf("the good policy was not rendered:\n%s", got)
			}
			if got := h.chain(badOut); !strings.Contains(got, "tcp dport 80") {
				t.Errorf("the bad policy's other direction was not rendered:\n%s", got)
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "chain=filter-pi-default.bad") {
				t.Errorf("no error logged for the bad rule; log:\n%s", logs.String())
			}
		})
	}
}

// TestIPSetLifecycleAndPolicies: deltas change set elements and never
// chains; a set that goes while a policy uses it makes the policy fail
// closed; when it comes back the policy is rendered again.
func TestIPSetLifecycleAndPolicies(t *testing.T) {
	h := newHarness(t)
	rules := []*proto.Rule{{Action: "allow", SrcIpSetIds: []string{"s:t"}}}
	h.jumpTo(pi("p"))

	// 1. Set and policy.
	h.step(netSet("s:t", "10.65.0.0/28"), policyUpdate(gnp("p"), "default", rules, nil))
	chain := h.model.Chain(pi("p"))
	set4 := h.model.Set("ipset-s.t-v4")
	wantText(t, "policy", `
		chain filter-pi-default.p {
			ip saddr @ipset-s.t-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			ip6 saddr @ipset-s.t-v6 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
		}
	`, h.chain(pi("p")))

	// 2. A delta: elements change, the chain and the set definitions are
	//    the very same objects (nothing for the engine to rewrite).
	h.step(&proto.IPSetDeltaUpdate{Id: "s:t", AddedMembers: []string{"10.66.0.1/32", "fd00::1/128"}})
	if h.model.Chain(pi("p")) != chain {
		t.Errorf("a delta rewrote the policy chain")
	}
	if h.model.Set("ipset-s.t-v4") != set4 {
		t.Errorf("a delta replaced the v4 set instead of changing its elements")
	}
	wantText(t, "v4 set", `
		set ipset-s.t-v4 {
			type ipv4_addr
			flags interval
			comment "Felix IP set s:t"
			elements = { 10.65.0.0/28, 10.66.0.1 }
		}
	`, h.set("ipset-s.t-v4"))

	// 3. A full update of the same set: elements only, too.
	h.step(netSet("s:t", "10.65.0.0/28"))
	if h.model.Chain(pi("p")) != chain {
		t.Errorf("a full IP set update rewrote the policy chain")
	}
	if got := h.set("ipset-s.t-v6"); strings.Contains(got, "elements") {
		t.Errorf("v6 set kept an element the full update dropped:\n%s", got)
	}

	// 4. The set goes while the policy still names it (Felix would remove
	//    or change the policy first): the policy fails closed and the sets
	//    are deleted in the same batch.
	h.step(&proto.IPSetRemove{Id: "s:t"})
	wantText(t, "policy without its set", `
		chain filter-pi-default.p {
			drop comment "policy default/p inbound: fail closed: policy default/p inbound rule 0: src_ip_set_ids: unknown IP set _s:t_"
		}
	`, h.chain(pi("p")))
	if h.model.Set("ipset-s.t-v4") != nil || h.model.Set("ipset-s.t-v6") != nil {
		t.Errorf("sets of a removed IP set are still in the model: %v", h.model.SetNames())
	}

	// 5. It comes back: the policy is rendered again.
	h.step(netSet("s:t", "10.65.0.0/28"))
	if !strings.Contains(h.chain(pi("p")), "@ipset-s.t-v4") {
		t.Errorf("policy not re-rendered when its set came back:\n%s", h.chain(pi("p")))
	}

	// 6. Felix's order: policy update (no set), then set removal.
	h.step(policyUpdate(gnp("p"), "default", allowTCP80, nil), &proto.IPSetRemove{Id: "s:t"})
	if got := h.model.SetNames(); len(got) != 0 {
		t.Errorf("sets left after removal: %v", got)
	}
}

// TestIPSetTypeChangeRerendersUsers: a set that changes type (not something
// Felix does, but an IPSetUpdate carries a type) is redefined and the
// policies naming it are rendered for the new type.
func TestIPSetTypeChangeRerendersUsers(t *testing.T) {
	h := newHarness(t)
	h.jumpTo(pi("p"))
	h.step(netSet("n:x", "10.0.0.1/32"),
		policyUpdate(gnp("p"), "default", []*proto.Rule{{Action: "allow", DstIpSetIds: []string{"n:x"}}}, nil))
	h.step(&proto.IPSetUpdate{Id: "n:x", Type: proto.IPSetUpdate_IP_AND_PORT, Members: []string{"10.0.0.1,tcp:80"}})
	if got := h.chain(pi("p")); !strings.Contains(got, "fail closed") {
		t.Errorf("policy naming a set of the wrong type is not fail closed:\n%s", got)
	}
	wantText(t, "redefined set", `
		set ipset-n.x-v4 {
			type ipv4_addr . inet_proto . inet_service
			comment "Felix IP set n:x"
			elements = { 10.0.0.1 . tcp . 80 }
		}
	`, h.set("ipset-n.x-v4"))
}

// TestPolicyMovesTier: the chain name has the tier in it.
func TestPolicyMovesTier(t *testing.T) {
	h := newHarness(t)
	sec := render.PolicyChainName(render.LayerFilter, render.Ingress, "security", gnp("p"))
	h.jumpTo(pi("p"), sec)
	h.step(policyUpdate(gnp("p"), "default", allowTCP80, nil))
	if strings.Contains(h.chain(sec), "tcp dport") || !strings.Contains(h.chain(pi("p")), "tcp dport") {
		t.Fatalf("tier default: want the default chain rendered and the security one a placeholder")
	}
	h.step(policyUpdate(gnp("p"), "security", allowTCP80, nil))
	if !strings.Contains(h.chain(sec), "policy security/p inbound rule 0") || !strings.Contains(h.chain(pi("p")), "fail closed") {
		t.Errorf("after the move: want the security chain rendered and the default one a placeholder:\n%s\n%s",
			h.chain(sec), h.chain(pi("p")))
	}
}

// TestProfilesAndNamespacedPolicies: names and comments.
func TestProfilesAndNamespacedPolicies(t *testing.T) {
	h := newHarness(t)
	np := &proto.PolicyID{Name: "allow-web", Namespace: "shop", Kind: "NetworkPolicy"}
	knp := &proto.PolicyID{Name: "deny", Namespace: "shop", Kind: "KubernetesNetworkPolicy"}
	pri := render.ProfileChainName(render.LayerFilter, render.Ingress, "ksa.shop.default")
	mpro := render.ProfileChainName(render.LayerMangle, render.Egress, "ksa.shop.default")
	npName := render.PolicyChainName(render.LayerFilter, render.Ingress, "default", np)
	knpName := render.PolicyChainName(render.LayerFilter, render.Egress, "default", knp)
	h.jumpTo(pri, mpro, npName, knpName)
	h.step(
		profileUpdate("ksa.shop.default", []*proto.Rule{{Action: "allow", RuleId: "x1"}}, []*proto.Rule{{Action: "deny"}}),
		policyUpdate(np, "default", []*proto.Rule{{Action: "allow"}}, nil),
		policyUpdate(knp, "default", nil, []*proto.Rule{{Action: "deny"}}),
	)
	var got string
	for _, n := range h.ourChains() {
		got += h.chain(n)
	}
	wantText(t, "chains", `
		chain filter-pi-default.shop/allow-web {
			meta mark set meta mark | 0x00010000 return comment "policy default/shop/allow-web inbound rule 0"
		}
		chain filter-po-default.knp_shop/deny {
			drop comment "policy default/shop/deny [KubernetesNetworkPolicy] outbound rule 0"
		}
		chain filter-pri-ksa.shop.default {
			meta mark set meta mark | 0x00010000 return comment "profile ksa.shop.default inbound rule 0 id x1"
		}
		chain mangle-pro-ksa.shop.default {
			drop comment "profile ksa.shop.default outbound rule 0"
		}
	`, got)
}

// TestEmptyAndMissingPolicy: a policy without rules in a direction is an
// empty chain (it returns with no verdict); an update without a policy is
// treated as empty.
func TestEmptyAndMissingPolicy(t *testing.T) {
	h := newHarness(t)
	h.jumpTo(pi("p"), pi("q"))
	h.step(policyUpdate(gnp("p"), "default", nil, allowTCP80), &proto.ActivePolicyUpdate{Id: gnp("q")})
	wantText(t, "empty", "chain filter-pi-default.p {\n}\n", h.chain(pi("p")))
	wantText(t, "missing", "chain filter-pi-default.q {\n}\n", h.chain(pi("q")))
}

// TestIgnoresOtherMessages: anything but the seven messages is ignored.
func TestIgnoresOtherMessages(t *testing.T) {
	h := newHarness(t)
	h.step(&proto.InSync{}, &proto.WorkloadEndpointUpdate{}, "text", nil, &proto.ActivePolicyUpdate{}, &proto.IPSetUpdate{})
	if n := h.model.NumChains(); n != 0 {
		t.Errorf("model has %d chains, want none", n)
	}
	if got := h.model.SetNames(); len(got) != 0 {
		t.Errorf("model has sets %v, want none", got)
	}
}

// TestUnchangedBatchTouchesNothing: a batch with no messages leaves every
// object of ours as the same pointer, so the engine has nothing to compare
// beyond pointers; a re-sent identical policy gives new chain objects (the
// engine compares them by content).
func TestUnchangedBatchTouchesNothing(t *testing.T) {
	h := newHarness(t)
	h.jumpTo(pi("p"))
	h.step(netSet("s:a", "10.0.0.0/8"), policyUpdate(gnp("p"), "default", []*proto.Rule{{SrcIpSetIds: []string{"s:a"}}}, nil))
	before := h.model.Chain(pi("p"))
	h.step()
	if h.model.Chain(pi("p")) != before {
		t.Errorf("an empty batch rewrote the policy chain")
	}
	// The endpoint chain is rewritten with the same jumps: still nothing.
	h.jumpTo(pi("p"))
	h.step()
	if h.model.Chain(pi("p")) != before {
		t.Errorf("an endpoint rewrite with unchanged jumps rewrote the policy chain")
	}
}

// TestRefsFromSeveralChains: a chain stays while any chain jumps to it,
// including gotos and policy-group chains.
func TestRefsFromSeveralChains(t *testing.T) {
	h := newHarness(t)
	h.step(policyUpdate(gnp("p"), "default", allowTCP80, nil))
	h.setChain(&nft.Chain{Name: "filter-gi-group1", Rules: []*nft.Rule{{Action: nft.Verdict{Kind: nft.Jump, Chain: pi("p")}}}})
	h.setChain(&nft.Chain{Name: "filter-tw-cali1", Rules: []*nft.Rule{
		{Action: nft.Verdict{Kind: nft.Goto, Chain: pi("p")}},
		{Action: nft.Verdict{Kind: nft.Jump, Chain: "filter-gi-group1"}},
	}})
	h.step()
	wantChains(t, h, "filter-gi-group1", pi("p"), "filter-tw-cali1")
	h.deleteChain("filter-tw-cali1")
	h.step()
	wantChains(t, h, "filter-gi-group1", pi("p"))
	h.deleteChain("filter-gi-group1")
	h.step()
	wantChains(t, h)
}

func TestHelperChainNames(t *testing.T) {
	for _, tc := range []struct {
		parent string
		i      int
		want   string
	}{
		{"filter-pi-default.p", 3, "filter-pix-default.p-r3"},
		{"raw-po-default.p-r3", 0, "raw-pox-default.p-r3-r0"},
		{"mangle-pri-kns.x", 12, "mangle-prix-kns.x-r12"},
		{"filter-pro-kns.x", 1, "filter-prox-kns.x-r1"},
		{"filter-pi-" + strings.Repeat("a", 245), 1, "filter-pix-_TEQ54F-mmMUsyaFcxqjJDTzGgA5JthCYxUtHOhdLk-E"},
	} {
		got := helperChainName(tc.parent, tc.i)
		if got != tc.want {
			t.Errorf("helperChainName(%q, %d) = %q, want %q", tc.parent, tc.i, got, tc.want)
		}
		if len(got) > maxNameLen || isPolicyChainName(got) {
			t.Errorf("helper %q: too long or taken for a policy chain", got)
		}
	}
	for _, name := range []string{"raw-pro-x", "mangle-pi-default.p", "filter-po-t.p"} {
		if !isPolicyChainName(name) {
			t.Errorf("%q is not taken for a policy chain", name)
		}
	}
}

// A policy or profile removed in the batch that first uses it: a
// fail-closed placeholder, not a crash.
func TestFirstUseOfOwnerRemovedInSameBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		update any
		remove any
		chain  string
	}{
		{"policy", policyUpdate(gnp("p"), "default", allowTCP80, allowTCP80), &proto.ActivePolicyRemove{Id: gnp("p")}, pi("p")},
		{"profile", profileUpdate("prof", allowTCP80, allowTCP80), &proto.ActiveProfileRemove{Id: &proto.ProfileID{Name: "prof"}}, "filter-pri-prof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.step(tc.update) // known, unused
			h.m.OnUpdate(tc.remove)
			h.jumpTo(tc.chain) // first use, same batch
			h.step()
			wantChains(t, h, tc.chain)
			if !strings.Contains(h.chain(tc.chain), "fail closed") {
				t.Errorf("the chain of a removed %s does not fail closed:\n%s", tc.name, h.chain(tc.chain))
			}
		})
	}
}
