package policy

import (
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

var tcp, udp = protoName("tcp"), protoName("udp")

type ruleCase struct {
	name  string
	cfg   func(*render.Config)
	layer render.Layer
	rules []*proto.Rule
	want  string
}

// runRuleCase renders tc and returns every chain of ours in the model.
func runRuleCase(t *testing.T, tc ruleCase) string {
	h := tc.run(t, nil)
	var s string
	for _, n := range h.ourChains() {
		s += h.chain(n)
	}
	return s
}

// run renders tc into model (a new one when nil) and returns the harness.
func (tc ruleCase) run(t *testing.T, model *nft.Model) *harness {
	var cfgs []func(*render.Config)
	if tc.cfg != nil {
		cfgs = append(cfgs, tc.cfg)
	}
	h := newHarnessOn(t, model, cfgs...)
	layer := tc.layer
	if layer == "" {
		layer = render.LayerFilter
	}
	h.jumpTo(render.PolicyChainName(layer, render.Ingress, "default", gnp("p")))
	h.step(
		netSet("s:a", "10.0.1.0/24", "fd00:1::/64"),
		netSet("s:b", "10.0.2.0/24"),
		&proto.IPSetUpdate{Id: "n:web", Type: proto.IPSetUpdate_IP_AND_PORT, Members: []string{"10.0.1.5,tcp:8080", "fd00:1::5,tcp:8080"}},
		&proto.IPSetUpdate{Id: "svc:db", Type: proto.IPSetUpdate_IP_AND_PORT, Members: []string{"10.96.0.10,tcp:5432"}},
		policyUpdate(gnp("p"), "default", tc.rules, nil),
	)
	return h
}

// ruleCases are golden tests of the rule shapes: each renders one inbound
// policy "p" (tier default) whose chain the stand-in endpoint chain jumps
// to, in the filter layer unless the case says otherwise, with the IP sets
// s:a (10.0.1.0/24, fd00:1::/64), s:b (10.0.2.0/24), n:web (named port
// 8080 on 10.0.1.5 and fd00:1::5) and svc:db (10.96.0.10 tcp 5432).
var ruleCases = []ruleCase{
	{name: "allow everything", rules: []*proto.Rule{{Action: "allow"}},
		want: `
			chain filter-pi-default.p {
				meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "empty action means allow", rules: []*proto.Rule{{RuleId: "abcdEFGH01234567"}},
		want: `
			chain filter-pi-default.p {
				meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0 id abcdEFGH01234567"
			}
			`,
	},
	{name: "deny drops", rules: []*proto.Rule{{Action: "deny", Protocol: tcp}},
		want: `
			chain filter-pi-default.p {
				meta l4proto tcp drop comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "deny rejects in filter when configured", cfg: func(c *render.Config) { c.FilterDenyAction = render.ActionReject },
		rules: []*proto.Rule{{Action: "deny", Protocol: tcp}},
		want: `
			chain filter-pi-default.p {
				meta l4proto tcp reject comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "deny drops in mangle even when reject is configured", layer: render.LayerMangle,
		cfg:   func(c *render.Config) { c.FilterDenyAction = render.ActionReject },
		rules: []*proto.Rule{{Action: "deny", Protocol: tcp}},
		want: `
			chain mangle-pi-default.p {
				meta l4proto tcp drop comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "log and go on", rules: []*proto.Rule{{Action: "log", Protocol: udp}, {Action: "allow", Protocol: udp}},
		want: `
			chain filter-pi-default.p {
				meta l4proto udp log prefix "calico-packet: " comment "policy default/p inbound rule 0"
				meta l4proto udp meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
			}
			`,
	},
	{name: "next-tier and pass set the pass mark", rules: []*proto.Rule{{Action: "next-tier", Protocol: tcp}, {Action: "pass"}},
		want: `
			chain filter-pi-default.p {
				meta l4proto tcp meta mark set meta mark | 0x00020000 return comment "policy default/p inbound rule 0"
				meta mark set meta mark | 0x00020000 return comment "policy default/p inbound rule 1"
			}
			`,
	},
	{name: "protocol by name and number, not_protocol", rules: []*proto.Rule{
		{Action: "allow", Protocol: protoName("sctp")},
		{Action: "allow", Protocol: protoNum(47)},
		{Action: "allow", Protocol: protoName("udplite"), NotProtocol: nil},
		{Action: "deny", NotProtocol: protoName("icmpv6")},
	},
		want: `
			chain filter-pi-default.p {
				meta l4proto sctp meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				meta l4proto gre meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
				meta l4proto udplite meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 2"
				meta l4proto != ipv6-icmp drop comment "policy default/p inbound rule 3"
			}
			`,
	},
	{name: "ports: overlapping and touching ranges merge", rules: []*proto.Rule{
		{Action: "allow", Protocol: tcp, DstPorts: ports(80, 90, 85, 100, 101, 101, 443, 443)},
		{Action: "allow", Protocol: udp, SrcPorts: ports(53, 53), NotDstPorts: ports(1, 1023)},
	},
		want: `
			chain filter-pi-default.p {
				tcp dport { 80-101, 443 } meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				udp sport 53 udp dport != 1-1023 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
			}
			`,
	},
	{name: "CIDRs of both families: one rule per family, contained ones collapse", rules: []*proto.Rule{
		{Action: "allow", SrcNet: []string{"10.0.0.0/8", "10.1.2.3/32", "192.168.0.0/16", "fd00::/8", "fd00:1::1"}},
	},
		want: `
			chain filter-pi-default.p {
				ip saddr { 10.0.0.0/8, 192.168.0.0/16 } meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip6 saddr fd00::/8 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "CIDRs of one family: the other family has no rule", rules: []*proto.Rule{
		{Action: "allow", DstNet: []string{"fd00::/64"}},
		{Action: "allow", SrcNet: []string{"10.0.0.0/8"}, DstNet: []string{"fd00::/64"}},
	},
		want: `
			chain filter-pi-default.p {
				ip6 daddr fd00::/64 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "negated CIDRs of one family: the other family has no rule", rules: []*proto.Rule{
		{Action: "deny", NotSrcNet: []string{"10.0.0.0/8", "10.0.0.1/32"}},
	},
		want: `
			chain filter-pi-default.p {
				ip saddr != 10.0.0.0/8 drop comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "negated catch-all voids the rule in its family", rules: []*proto.Rule{
		{Action: "deny", NotDstNet: []string{"0.0.0.0/0"}},
		{Action: "deny", NotDstNet: []string{"0.0.0.0/0", "fd00::/8"}},
	},
		want: `
			chain filter-pi-default.p {
				ip6 daddr != fd00::/8 drop comment "policy default/p inbound rule 1"
			}
			`,
	},
	{name: "positive catch-all matches the family", rules: []*proto.Rule{
		{Action: "allow", SrcNet: []string{"0.0.0.0/0"}, Protocol: tcp, DstPorts: ports(22, 22)},
	},
		want: `
			chain filter-pi-default.p {
				meta nfproto ipv4 tcp dport 22 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "host bits are masked and bare addresses are host prefixes", rules: []*proto.Rule{
		{Action: "allow", SrcNet: []string{"10.1.2.3/24", "10.9.9.9"}},
	},
		want: `
			chain filter-pi-default.p {
				ip saddr { 10.1.2.0/24, 10.9.9.9 } meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "ip_version alone pins the family", rules: []*proto.Rule{
		{Action: "allow", IpVersion: proto.IPVersion_IPV4, Protocol: tcp},
		{Action: "allow", IpVersion: proto.IPVersion_IPV6, SrcNet: []string{"10.0.0.0/8"}},
	},
		want: `
			chain filter-pi-default.p {
				meta nfproto ipv4 meta l4proto tcp meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "icmp types and codes", rules: []*proto.Rule{
		{Action: "allow", Protocol: protoName("icmp"), Icmp: &proto.Rule_IcmpType{IcmpType: 8}},
		{Action: "allow", Protocol: protoName("icmp"), Icmp: &proto.Rule_IcmpTypeCode{IcmpTypeCode: &proto.IcmpTypeAndCode{Type: 3, Code: 4}}},
		{Action: "allow", Protocol: protoName("icmpv6"), Icmp: &proto.Rule_IcmpType{IcmpType: 135}},
		{Action: "deny", Protocol: protoName("icmp"), NotIcmp: &proto.Rule_NotIcmpType{NotIcmpType: 0}},
	},
		want: `
			chain filter-pi-default.p {
				meta nfproto ipv4 icmp type echo-request meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				meta nfproto ipv4 icmp type destination-unreachable icmp code frag-needed meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
				meta nfproto ipv6 icmpv6 type nd-neighbor-solicit meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 2"
				meta nfproto ipv4 icmp type != echo-reply drop comment "policy default/p inbound rule 3"
			}
			`,
	},
	{name: "not_icmp_type_code goes through a helper chain", rules: []*proto.Rule{
		{Action: "allow", Protocol: protoName("icmpv6"), NotIcmp: &proto.Rule_NotIcmpTypeCode{NotIcmpTypeCode: &proto.IcmpTypeAndCode{Type: 128, Code: 0}}, RuleId: "r1"},
		{Action: "deny", Protocol: protoName("icmp"), SrcNet: []string{"10.0.0.0/8"}, NotIcmp: &proto.Rule_NotIcmpTypeCode{NotIcmpTypeCode: &proto.IcmpTypeAndCode{Type: 8, Code: 0}}},
	},
		want: `
			chain filter-pi-default.p {
				meta l4proto ipv6-icmp meta nfproto ipv6 jump filter-pix-default.p-r0 comment "policy default/p inbound rule 0 id r1"
				meta mark & 0x00010000 == 0x00010000 return comment "policy default/p inbound rule 0: return if allowed"
				meta l4proto icmp ip saddr 10.0.0.0/8 jump filter-pix-default.p-r1 comment "policy default/p inbound rule 1"
			}
			chain filter-pix-default.p-r0 {
				icmpv6 type echo-request icmpv6 code no-route return comment "policy default/p inbound rule 0 id r1: excluded icmp type and code"
				meta mark set meta mark | 0x00010000 comment "policy default/p inbound rule 0 id r1"
			}
			chain filter-pix-default.p-r1 {
				icmp type echo-request icmp code net-unreachable return comment "policy default/p inbound rule 1: excluded icmp type and code"
				drop comment "policy default/p inbound rule 1"
			}
			`,
	},
	{name: "IP sets: one rule per set and family, each returning", rules: []*proto.Rule{
		{Action: "allow", SrcIpSetIds: []string{"s:a", "s:b"}},
	},
		want: `
			chain filter-pi-default.p {
				ip saddr @ipset-s.a-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip saddr @ipset-s.b-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip6 saddr @ipset-s.a-v6 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip6 saddr @ipset-s.b-v6 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "negated IP sets are ANDed", rules: []*proto.Rule{
		{Action: "deny", NotDstIpSetIds: []string{"s:a", "s:b"}, SrcNet: []string{"10.0.0.0/8"}},
	},
		want: `
			chain filter-pi-default.p {
				ip saddr 10.0.0.0/8 ip daddr != @ipset-s.a-v4 ip daddr != @ipset-s.b-v4 drop comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "ports OR named ports", rules: []*proto.Rule{
		{Action: "allow", Protocol: tcp, DstPorts: ports(80, 80), DstNamedPortIpSetIds: []string{"n:web"}},
		{Action: "allow", SrcNamedPortIpSetIds: []string{"n:web"}},
		{Action: "deny", Protocol: tcp, NotDstNamedPortIpSetIds: []string{"n:web"}},
	},
		want: `
			chain filter-pi-default.p {
				tcp dport 80 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip daddr . meta l4proto . tcp dport @ipset-n.web-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip6 daddr . meta l4proto . tcp dport @ipset-n.web-v6 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip saddr . meta l4proto . th sport @ipset-n.web-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
				ip6 saddr . meta l4proto . th sport @ipset-n.web-v6 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
				ip daddr . meta l4proto . tcp dport != @ipset-n.web-v4 drop comment "policy default/p inbound rule 2"
				ip6 daddr . meta l4proto . tcp dport != @ipset-n.web-v6 drop comment "policy default/p inbound rule 2"
			}
			`,
	},
	{name: "service IP and port sets", rules: []*proto.Rule{
		{Action: "allow", DstIpPortSetIds: []string{"svc:db"}},
	},
		want: `
			chain filter-pi-default.p {
				ip daddr . meta l4proto . th dport @ipset-svc.db-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip6 daddr . meta l4proto . th dport @ipset-svc.db-v6 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "log alternatives are disjoint", rules: []*proto.Rule{
		{Action: "log", SrcIpSetIds: []string{"s:a", "s:b"}, SrcNet: []string{"10.0.0.0/8"}},
	},
		want: `
			chain filter-pi-default.p {
				ip saddr 10.0.0.0/8 ip saddr @ipset-s.a-v4 log prefix "calico-packet: " comment "policy default/p inbound rule 0"
				ip saddr 10.0.0.0/8 ip saddr != @ipset-s.a-v4 ip saddr @ipset-s.b-v4 log prefix "calico-packet: " comment "policy default/p inbound rule 0"
			}
			`,
	},
	{name: "untracked policy in raw", layer: render.LayerRaw, rules: []*proto.Rule{
		{Action: "allow", Protocol: udp, DstPorts: ports(53, 53)}, {Action: "deny"},
	},
		want: `
			chain raw-pi-default.p {
				udp dport 53 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				drop comment "policy default/p inbound rule 1"
			}
			`,
	},
	// Ipv6Support false: one rule of every shape that needs a family, and
	// one that does not (rule 0, unpinned as ever). A rule exists in IPv4
	// or not at all, and an IPv4 variant that implies no family is pinned
	// with meta nfproto ipv4: with IPv6 on, "tcp dport 80" of rule 2 and
	// "meta l4proto tcp" of rule 3 would be written once, unpinned, for
	// both families. Rules 4, 6, 7, 8 and 11 exist only in IPv6, so not at
	// all here, and rule 8 writes no helper chain. The sets have no -v6
	// half (TestIPv6OffSets).
	{name: "IPv6 off: IPv4 rules only, pinned", cfg: ipv6Off, rules: []*proto.Rule{
		{Action: "allow", Protocol: tcp, DstPorts: ports(80, 80)},
		{Action: "allow", SrcIpSetIds: []string{"s:a", "s:b"}},
		{Action: "allow", Protocol: tcp, DstPorts: ports(80, 80), DstNamedPortIpSetIds: []string{"n:web"}},
		{Action: "allow", IpVersion: proto.IPVersion_IPV4, Protocol: tcp},
		{Action: "allow", IpVersion: proto.IPVersion_IPV6, Protocol: tcp},
		{Action: "allow", SrcNet: []string{"10.0.0.0/8", "fd00::/8"}},
		{Action: "deny", DstNet: []string{"fd00::/64"}},
		{Action: "allow", Protocol: protoName("icmpv6"), Icmp: &proto.Rule_IcmpType{IcmpType: 135}},
		{Action: "allow", Protocol: protoName("icmpv6"), NotIcmp: &proto.Rule_NotIcmpTypeCode{NotIcmpTypeCode: &proto.IcmpTypeAndCode{Type: 128, Code: 0}}},
		{Action: "deny", Protocol: protoName("icmp"), NotIcmp: &proto.Rule_NotIcmpTypeCode{NotIcmpTypeCode: &proto.IcmpTypeAndCode{Type: 8, Code: 0}}},
		{Action: "allow", DstIpPortSetIds: []string{"svc:db"}},
		{Action: "deny", NotSrcNet: []string{"fd00::/8"}, Protocol: udp},
	},
		want: `
			chain filter-pi-default.p {
				tcp dport 80 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"
				ip saddr @ipset-s.a-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
				ip saddr @ipset-s.b-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 1"
				meta nfproto ipv4 tcp dport 80 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 2"
				ip daddr . meta l4proto . tcp dport @ipset-n.web-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 2"
				meta nfproto ipv4 meta l4proto tcp meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 3"
				ip saddr 10.0.0.0/8 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 5"
				meta l4proto icmp meta nfproto ipv4 jump filter-pix-default.p-r9 comment "policy default/p inbound rule 9"
				ip daddr . meta l4proto . th dport @ipset-svc.db-v4 meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 10"
			}
			chain filter-pix-default.p-r9 {
				icmp type echo-request icmp code net-unreachable return comment "policy default/p inbound rule 9: excluded icmp type and code"
				drop comment "policy default/p inbound rule 9"
			}
			`,
	},
}

func TestRuleShapes(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			wantText(t, "chains", tc.want, runRuleCase(t, tc))
		})
	}
}
