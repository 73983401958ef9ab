package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nftep/nftep/proto"
)

// familyCases are the golden tests of which families a rule exists in:
// every address field, positive and negated, with a list of IPv4 CIDRs
// only, IPv6 CIDRs only, and both. Felix renders a rule for a family only
// when each of its CIDR lists, negated ones included, has an entry of that
// family (FilterRuleToIPVersion in felix/rules/policy.go): Calico rejects
// rules that mix families, so a list of one family says the rule was
// written for that family. IP set fields do not decide the family (a set
// can hold both), so such a rule is rendered against each family's half.
//
// Each case is one rule, "allow tcp <field> <list>"; want lists the
// address match of each nft rule it renders to, in order (none: the rule
// exists in no family).
var familyCases = []struct {
	field string
	list  []string
	want  []string
}{
	{"src_net", v4Net, []string{"ip saddr 192.168.50.0/24"}},
	{"src_net", v6Net, []string{"ip6 saddr fd00:50::/64"}},
	{"src_net", bothNets, []string{"ip saddr 192.168.50.0/24", "ip6 saddr fd00:50::/64"}},
	{"not_src_net", v4Net, []string{"ip saddr != 192.168.50.0/24"}},
	{"not_src_net", v6Net, []string{"ip6 saddr != fd00:50::/64"}},
	{"not_src_net", bothNets, []string{"ip saddr != 192.168.50.0/24", "ip6 saddr != fd00:50::/64"}},
	{"dst_net", v4Net, []string{"ip daddr 192.168.50.0/24"}},
	{"dst_net", v6Net, []string{"ip6 daddr fd00:50::/64"}},
	{"dst_net", bothNets, []string{"ip daddr 192.168.50.0/24", "ip6 daddr fd00:50::/64"}},
	{"not_dst_net", v4Net, []string{"ip daddr != 192.168.50.0/24"}},
	{"not_dst_net", v6Net, []string{"ip6 daddr != fd00:50::/64"}},
	{"not_dst_net", bothNets, []string{"ip daddr != 192.168.50.0/24", "ip6 daddr != fd00:50::/64"}},
	// A negated catch-all never matches in its family, and the rule was
	// written for that family: it exists in neither.
	{"not_src_net", []string{"0.0.0.0/0"}, nil},
	{"not_dst_net", []string{"::/0"}, nil},
	// s:a holds 10.0.1.0/24 and fd00:1::/64; s:b holds IPv4 only, and its
	// IPv6 half (empty) is still matched: the members may change.
	{"src_ip_set_ids", []string{"s:a"}, []string{"ip saddr @ipset-s.a-v4", "ip6 saddr @ipset-s.a-v6"}},
	{"not_src_ip_set_ids", []string{"s:b"}, []string{"ip saddr != @ipset-s.b-v4", "ip6 saddr != @ipset-s.b-v6"}},
	{"dst_ip_set_ids", []string{"s:b"}, []string{"ip daddr @ipset-s.b-v4", "ip6 daddr @ipset-s.b-v6"}},
	{"not_dst_ip_set_ids", []string{"s:a"}, []string{"ip daddr != @ipset-s.a-v4", "ip6 daddr != @ipset-s.a-v6"}},
}

var (
	v4Net    = []string{"192.168.50.0/24"}
	v6Net    = []string{"fd00:50::/64"}
	bothNets = []string{"192.168.50.0/24", "fd00:50::/64"}
)

// familyRuleCases turns familyCases into golden rule cases (also loaded
// into the kernel by TestKernelRuleShapes).
func familyRuleCases() []ruleCase {
	var out []ruleCase
	for _, fc := range familyCases {
		r := &proto.Rule{Action: "allow", Protocol: tcp}
		switch fc.field {
		case "src_net":
			r.SrcNet = fc.list
		case "not_src_net":
			r.NotSrcNet = fc.list
		case "dst_net":
			r.DstNet = fc.list
		case "not_dst_net":
			r.NotDstNet = fc.list
		case "src_ip_set_ids":
			r.SrcIpSetIds = fc.list
		case "not_src_ip_set_ids":
			r.NotSrcIpSetIds = fc.list
		case "dst_ip_set_ids":
			r.DstIpSetIds = fc.list
		case "not_dst_ip_set_ids":
			r.NotDstIpSetIds = fc.list
		default:
			panic("familyCases: unknown field " + fc.field)
		}
		want := "chain filter-pi-default.p {\n"
		for _, m := range fc.want {
			want += "\tmeta l4proto tcp " + m + ` meta mark set meta mark | 0x00010000 return comment "policy default/p inbound rule 0"` + "\n"
		}
		want += "}\n"
		out = append(out, ruleCase{
			name:  fmt.Sprintf("%s %s", fc.field, strings.Join(fc.list, ",")),
			rules: []*proto.Rule{r},
			want:  want,
		})
	}
	return out
}

func TestRuleFamilies(t *testing.T) {
	for _, tc := range familyRuleCases() {
		t.Run(tc.name, func(t *testing.T) {
			wantText(t, "chains", tc.want, runRuleCase(t, tc))
		})
	}
}
