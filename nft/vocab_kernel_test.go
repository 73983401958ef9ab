package nft

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/netnstest"
)

// vocabModel builds a table that uses every match, action, set kind and
// element form of the vocabulary, in the shapes nftep renders and in the
// corner cases nft prints differently (dependency removal, folded ports,
// mark arithmetic, ct flag negation, element order and wrapping).
func vocabModel(name string) *Model {
	m := NewModel(FamilyINet, name)
	u8 := func(v uint8) *uint8 { return &v }
	pfx := netip.MustParsePrefix
	verdict := func(k VerdictKind, chain string) *Verdict { return &Verdict{Kind: k, Chain: chain} }

	// Sets and maps, one of each kind.
	sets := []*Set{
		{Name: "addr4", Key: []KeyType{TypeIPv4Addr}, Interval: true, Comment: "ipv4 prefixes and ranges"},
		{Name: "addr6", Key: []KeyType{TypeIPv6Addr}, Interval: true},
		{Name: "h4", Key: []KeyType{TypeIPv4Addr}},
		{Name: "h6", Key: []KeyType{TypeIPv6Addr}},
		{Name: "ports", Key: []KeyType{TypeInetService}, Interval: true},
		{Name: "hports", Key: []KeyType{TypeInetService}},
		{Name: "protos", Key: []KeyType{TypeInetProto}},
		{Name: "marks", Key: []KeyType{TypeMark}},
		{Name: "names", Key: []KeyType{TypeIfName}},
		{Name: "empty", Key: []KeyType{TypeIPv4Addr}, Comment: "nothing yet"},
		{Name: "filter-from-wl", Key: []KeyType{TypeIfName}, Data: DataVerdict, Comment: "workload dispatch"},
		{Name: "filter-host", Key: []KeyType{TypeIfName}, Data: DataVerdict, Interval: true},
		{Name: "filter-endpoint-mark", Key: []KeyType{TypeIfName}, Data: DataMark},
		{Name: "mark-dispatch", Key: []KeyType{TypeMark}, Data: DataVerdict},
		{Name: "addr-dispatch", Key: []KeyType{TypeIPv4Addr}, Data: DataVerdict},
		{Name: "raw-rpf-skip-v4", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true},
		{Name: "raw-rpf-skip-v6", Key: []KeyType{TypeIfName, TypeIPv6Addr}},
		{Name: "svc", Key: []KeyType{TypeIPv4Addr, TypeInetProto, TypeInetService}},
		{Name: "svc-ranges", Key: []KeyType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Interval: true, Comment: "concatenated intervals"},
		{Name: "svc6", Key: []KeyType{TypeIPv6Addr, TypeInetService}},
		{Name: "mark-if", Key: []KeyType{TypeMark, TypeIfName}},
		{Name: "addr-port", Key: []KeyType{TypeIPv4Addr, TypeInetService}},
	}
	for _, s := range sets {
		m.SetSet(s)
	}
	el := func(set, key string) { m.SetElement(set, Element{Key: key}) }
	for _, k := range []string{"10.0.0.0/24", "10.0.1.0/24", "10.1.0.1", "1.2.3.4-1.2.3.9", "0.0.0.0/8", "192.168.0.0/16", "240.0.0.0/4", "9.9.9.0-9.9.9.126"} {
		el("addr4", k)
	}
	m.SetElement("addr4", Element{Key: "172.16.0.0/12", Comment: "rfc1918"})
	for _, k := range []string{"fd00::/64", "::1", "2001:db8::1-2001:db8::5", "fe80::/10"} {
		el("addr6", k)
	}
	for _, k := range []string{"10.0.0.3", "10.0.0.1", "9.9.9.9", "1.1.1.1", "255.255.255.255"} {
		el("h4", k)
	}
	for _, k := range []string{"fd00::1", "::", "2001:db8::7"} {
		el("h6", k)
	}
	for _, k := range []string{"22", "80-90", "1000-1010", "1024-2047", "60000-65535"} {
		el("ports", k)
	}
	for _, k := range []string{"443", "80", "8080", "53", "22", "9", "65535"} {
		el("hports", k)
	}
	for _, k := range []string{"tcp", "udp", "ipv6-icmp", "icmp", "sctp", "255", "gre"} {
		el("protos", k)
	}
	for _, k := range []string{"0x00000001", "0x00010000", "0xffffffff", "0x00000100"} {
		el("marks", k)
	}
	for _, k := range []string{"eth0", "cali12ab", "a", "ab", "ba", "tap0", "cali1", "cali2"} {
		el("names", k)
	}
	m.SetElement("filter-from-wl", Element{Key: "cali12ab", Verdict: verdict(Jump, "filter-fw-cali12ab"), Comment: "endpoint k8s/default/pod-a/eth0"})
	m.SetElement("filter-from-wl", Element{Key: "cali1", Verdict: verdict(Goto, "filter-fw-cali12ab")})
	m.SetElement("filter-from-wl", Element{Key: "eth0", Verdict: verdict(Drop, "")})
	m.SetElement("filter-from-wl", Element{Key: "tap0", Verdict: verdict(Accept, "")})
	m.SetElement("filter-from-wl", Element{Key: "zz", Verdict: verdict(Return, "")})
	m.SetElement("filter-host", Element{Key: "cali*", Verdict: verdict(Jump, "vocab-target")})
	m.SetElement("filter-host", Element{Key: "eth0", Verdict: verdict(Drop, "")})
	m.SetElement("filter-host", Element{Key: "tap*", Verdict: verdict(Accept, ""), Comment: "taps"})
	m.SetElement("filter-endpoint-mark", Element{Key: "cali12ab", Mark: 0x10000})
	m.SetElement("filter-endpoint-mark", Element{Key: "eth0", Mark: 0x1})
	m.SetElement("mark-dispatch", Element{Key: "0x00000010", Verdict: verdict(Drop, "")})
	m.SetElement("mark-dispatch", Element{Key: "0x00000002", Verdict: verdict(Goto, "vocab-target")})
	m.SetElement("addr-dispatch", Element{Key: "10.0.0.1", Verdict: verdict(Accept, "")})
	for _, k := range []string{"cali12ab . 10.65.0.7", "cali12ab . 10.65.1.0/24", "eth0 . 10.0.2.0/23", "cali* . 10.9.0.0/16", "a . 1.0.0.0-1.0.0.5"} {
		el("raw-rpf-skip-v4", k)
	}
	m.SetElement("raw-rpf-skip-v4", Element{Key: "tap0 . 10.0.0.1", Comment: "tap"})
	for _, k := range []string{"cali12ab . fd00::7", "eth0 . ::1"} {
		el("raw-rpf-skip-v6", k)
	}
	for _, k := range []string{"10.0.0.1 . tcp . 80", "10.0.0.1 . udp . 53", "9.0.0.1 . tcp . 8080", "10.96.0.10 . sctp . 5000"} {
		el("svc", k)
	}
	for _, k := range []string{"10.0.0.0/8 . tcp . 80-90", "10.0.0.1 . udp . 53", "192.168.1.0-192.168.1.9 . tcp . 1-1023"} {
		el("svc-ranges", k)
	}
	for _, k := range []string{"fd00::1 . 443", "::1 . 22"} {
		el("svc6", k)
	}
	for _, k := range []string{"0x00000001 . cali1", "0x00000002 . eth0"} {
		el("mark-if", k)
	}
	el("addr-port", "10.0.0.1 . 22")

	tcp, udp := L4Proto{Protos: []uint8{6}}, L4Proto{Protos: []uint8{17}}
	rules := []*Rule{
		// Interfaces.
		{Match: []Match{IfName{Dir: In, Name: "cali12ab"}}, Action: Verdict{Kind: Accept}, Comment: "exact name"},
		{Match: []Match{IfName{Dir: Out, Name: "cali", Wildcard: true, Negate: true}}, Action: Verdict{Kind: Drop}},
		{Match: []Match{IfName{Dir: Out, Name: "eth0", Negate: true}, IfName{Dir: In, Name: "tap", Wildcard: true}}},
		// Addresses: compares, prefixes of every alignment, sets.
		{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.1/32")}}}},
		{Match: []Match{Addr{Family: IPv4, Dir: Out, Prefixes: []netip.Prefix{pfx("10.0.0.0/24")}}}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.0/20")}, Negate: true}}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("0.0.0.0/0")}}}},
		{Match: []Match{Addr{Family: IPv6, Dir: In, Prefixes: []netip.Prefix{pfx("fd00::/64")}}}},
		{Match: []Match{Addr{Family: IPv6, Dir: Out, Prefixes: []netip.Prefix{pfx("fd00::/63")}}, Addr{Family: IPv6, Dir: In, Prefixes: []netip.Prefix{pfx("::1/128")}, Negate: true}}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.1.0.1/32"), pfx("10.0.0.0/24"), pfx("192.168.0.0/16")}}}},
		{Match: []Match{Addr{Family: IPv4, Dir: Out, Prefixes: []netip.Prefix{pfx("10.1.0.1/32"), pfx("10.0.0.2/32")}, Negate: true}}},
		{Match: []Match{Addr{Family: IPv6, Dir: In, Prefixes: []netip.Prefix{pfx("fd00::/64"), pfx("::1/128")}}}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Set: "addr4"}, Addr{Family: IPv4, Dir: Out, Set: "h4", Negate: true}}},
		{Match: []Match{Addr{Family: IPv6, Dir: Out, Set: "addr6", Negate: true}}},
		// Layer-3 family, explicit and implied.
		{Match: []Match{NFProto{Family: IPv4}}},
		{Match: []Match{NFProto{Family: IPv6}}, Action: Verdict{Kind: Return}},
		{Match: []Match{NFProto{Family: IPv4}, Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.1/32")}}}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.1/32")}}, NFProto{Family: IPv4}}},
		{Match: []Match{NFProto{Family: IPv4}, IfName{Dir: In, Name: "eth0"}, Addr{Family: IPv4, Dir: Out, Prefixes: []netip.Prefix{pfx("10.0.0.1/32")}}}},
		// Layer-4 protocols and ports.
		{Match: []Match{tcp}},
		{Match: []Match{L4Proto{Protos: []uint8{17}, Negate: true}}},
		{Match: []Match{L4Proto{Protos: []uint8{17, 6}}}},
		{Match: []Match{L4Proto{Protos: []uint8{6, 17, 58}, Negate: true}}},
		{Match: []Match{L4Proto{Protos: []uint8{58}}}},
		{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{22, 22}}}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{1000, 2000}}}}},
		{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{1000, 2000}}, Negate: true}}},
		{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{22, 22}}, Negate: true}}},
		{Match: []Match{tcp, Port{Dir: In, Ranges: []PortRange{{80, 90}, {22, 22}}}}},
		{Match: []Match{udp, Port{Dir: Out, Ranges: []PortRange{{53, 53}, {5353, 5353}}, Negate: true}}},
		{Match: []Match{tcp, Port{Dir: Out, Set: "ports"}}},
		{Match: []Match{udp, Port{Dir: In, Set: "hports", Negate: true}}},
		{Match: []Match{L4Proto{Protos: []uint8{132}}, Port{Dir: Out, Ranges: []PortRange{{5000, 5000}}}}},
		{Match: []Match{L4Proto{Protos: []uint8{6, 17}}, Port{Dir: Out, Ranges: []PortRange{{53, 53}}}}},
		{Match: []Match{tcp, Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.1/32")}}, Port{Dir: Out, Ranges: []PortRange{{22, 22}}}}},
		{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{22, 22}}}, Port{Dir: In, Ranges: []PortRange{{1024, 65535}}}}},
		{Match: []Match{Addr{Family: IPv6, Dir: In, Prefixes: []netip.Prefix{pfx("::1/128")}}, tcp, Port{Dir: Out, Ranges: []PortRange{{22, 22}}}}},
		// ICMP.
		{Match: []Match{ICMP{Family: IPv4, Type: 8}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{ICMP{Family: IPv4, Type: 3, Code: u8(4)}}},
		{Match: []Match{ICMP{Family: IPv4, Type: 250}}},
		{Match: []Match{ICMP{Family: IPv4, Type: 8, Negate: true}}},
		{Match: []Match{ICMP{Family: IPv6, Type: 135, Code: u8(0)}}},
		{Match: []Match{ICMP{Family: IPv6, Type: 128, Negate: true}}},
		{Match: []Match{L4Proto{Protos: []uint8{1}}, ICMP{Family: IPv4, Type: 8}}},
		{Match: []Match{NFProto{Family: IPv6}, ICMP{Family: IPv6, Type: 2}}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.0/8")}}, ICMP{Family: IPv4, Type: 0}}},
		{Match: []Match{L4Proto{Protos: []uint8{58}}, ICMP{Family: IPv6, Type: 135}}},
		{Match: []Match{L4Proto{Protos: []uint8{58}}, IfName{Dir: In, Name: "cali1"}, ICMP{Family: IPv6, Type: 128, Negate: true}}},
		{Match: []Match{NFProto{Family: IPv6}, L4Proto{Protos: []uint8{58}}, ICMP{Family: IPv6, Type: 2}}},
		{Match: []Match{L4Proto{Protos: []uint8{1}}, Lookup{Keys: []Selector{SelIPSaddr}, Set: "h4"}, ICMP{Family: IPv4, Type: 8}}},
		// Conntrack.
		{Match: []Match{CtStateMatch{States: CtStateEstablished | CtStateRelated}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{CtStateMatch{States: CtStateInvalid}}, Action: Verdict{Kind: Drop}},
		{Match: []Match{CtStateMatch{States: CtStateNew | CtStateUntracked}}},
		{Match: []Match{CtStateMatch{States: CtStateInvalid, Negate: true}}},
		{Match: []Match{CtStateMatch{States: CtStateEstablished | CtStateRelated, Negate: true}}},
		{Match: []Match{CtStatusMatch{Status: CtStatusDNAT}}},
		{Match: []Match{CtStatusMatch{Status: CtStatusSNAT | CtStatusDNAT}}},
		{Match: []Match{CtStatusMatch{Status: CtStatusDNAT, Negate: true}}},
		{Match: []Match{tcp, CtCount{Over: 10}}, Action: Reject{With: RejectTCPReset}},
		// Marks.
		{Match: []Match{Mark{Value: 0x10}}},
		{Match: []Match{Mark{Value: 0x10, Negate: true}}},
		{Match: []Match{Mark{Mask: 0x10000, Value: 0x10000}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{Mark{Mask: 0x10000, Value: 0x10000, Negate: true}}},
		{Match: []Match{Mark{Mask: 0xffff0000, Value: 0}}},
		{Match: []Match{Mark{Mask: 0xffffffff, Value: 7}}},
		// RPF, limits.
		{Match: []Match{RPF{}}, Action: Verdict{Kind: Drop}},
		{Match: []Match{Limit{Rate: 100}}, Action: Verdict{Kind: Drop}},
		{Match: []Match{Limit{Rate: 1000, Burst: 10}}, Action: Verdict{Kind: Drop}},
		{Match: []Match{Limit{Rate: 5, Burst: 5}}},
		// Lookups in concatenations.
		{Match: []Match{Lookup{Keys: []Selector{SelIIFName, SelIPSaddr}, Set: "raw-rpf-skip-v4"}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{Lookup{Keys: []Selector{SelOIFName, SelIP6Daddr}, Set: "raw-rpf-skip-v6", Negate: true}}},
		{Match: []Match{Lookup{Keys: []Selector{SelIPDaddr, SelL4Proto, SelTHDport}, Set: "svc"}}},
		{Match: []Match{Lookup{Keys: []Selector{SelIPDaddr, SelL4Proto, SelTHDport}, Set: "svc-ranges"}}},
		{Match: []Match{Lookup{Keys: []Selector{SelIP6Daddr, SelTHDport}, Set: "svc6"}}},
		{Match: []Match{Lookup{Keys: []Selector{SelMark, SelIIFName}, Set: "mark-if"}}},
		{Match: []Match{tcp, Lookup{Keys: []Selector{SelIPDaddr, SelTHDport}, Set: "addr-port"}}},
		{Match: []Match{Lookup{Keys: []Selector{SelL4Proto}, Set: "protos"}, Lookup{Keys: []Selector{SelMark}, Set: "marks", Negate: true}, Lookup{Keys: []Selector{SelIIFName}, Set: "names"}}},
		{Match: []Match{NFProto{Family: IPv4}, Lookup{Keys: []Selector{SelIIFName, SelIPSaddr}, Set: "raw-rpf-skip-v4"}}},
		{Match: []Match{tcp, Lookup{Keys: []Selector{SelIP6Saddr, SelTHSport}, Set: "svc6", Negate: true}}},
		{Match: []Match{udp, Lookup{Keys: []Selector{SelL4Proto}, Set: "protos"}, Port{Dir: Out, Ranges: []PortRange{{53, 53}}}}},
		{Match: []Match{NFProto{Family: IPv6}, Addr{Family: IPv6, Dir: Out, Prefixes: []netip.Prefix{pfx("fd00::/64")}}}},
		{Match: []Match{NFProto{Family: IPv6}, Lookup{Keys: []Selector{SelIP6Daddr, SelTHDport}, Set: "svc6"}}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Set: "addr4"}, L4Proto{Protos: []uint8{1}}, ICMP{Family: IPv4, Type: 8}}},
		{Match: []Match{CtStateMatch{States: CtStateNew | CtStateRelated, Negate: true}, Mark{Mask: 0xffff0000, Value: 0x10000, Negate: true}}},
		{Match: []Match{tcp, tcp, Port{Dir: Out, Ranges: []PortRange{{22, 22}}}}},
		{Match: []Match{udp, NFProto{Family: IPv4}, Port{Dir: Out, Ranges: []PortRange{{53, 53}}}, Addr{Family: IPv4, Dir: Out, Prefixes: []netip.Prefix{pfx("10.0.0.1/32")}}}},
		// Counters and verdicts.
		{Counter: true},
		{Match: []Match{IfName{Dir: In, Name: "eth0"}}, Counter: true, Action: Verdict{Kind: Jump, Chain: "vocab-target"}, Comment: "counted jump"},
		{Action: Verdict{Kind: Goto, Chain: "vocab-target"}},
		// Rejects.
		{Action: Reject{}},
		{Match: []Match{tcp}, Action: Reject{With: RejectTCPReset}},
		{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{25, 25}}}}, Action: Reject{With: RejectTCPReset}},
		{Action: Reject{With: RejectICMPAdminProhibited}},
		{Match: []Match{NFProto{Family: IPv4}}, Action: Reject{}},
		// Maps.
		{Action: VMap{Key: SelIIFName, Map: "filter-from-wl"}, Comment: "dispatch from workloads"},
		{Action: VMap{Key: SelOIFName, Map: "filter-host"}},
		{Action: VMap{Key: SelMark, Map: "mark-dispatch"}},
		{Action: VMap{Key: SelIPDaddr, Map: "addr-dispatch"}},
		{Action: VMap{Key: SelMark, Map: "mark-dispatch", Mask: 0xffe00000}},
		{Action: VMap{Key: SelMark, Map: "mark-dispatch", Mask: 0x0000ff00}, Comment: "endpoint mark field"},
		{Action: VMap{Key: SelMark, Map: "mark-dispatch", Mask: 0xffffffff}},
		{Action: SetMarkFromMap{Key: SelIIFName, Map: "filter-endpoint-mark"}},
		// Mark arithmetic.
		{Action: SetMark{And: 0, Xor: 0x10}},
		{Action: SetMark{And: ^uint32(0x10), Xor: 0x10}},
		{Action: SetMark{And: ^uint32(0x10)}},
		{Action: SetMark{And: ^uint32(0xff00), Xor: 0x100}},
		{Action: SetMark{And: 0xffffffff, Xor: 0x10}},
		{Action: SetMark{And: 0xf0, Xor: 0xff}},
		{Match: []Match{Mark{Mask: 0x10000, Value: 0}}, Action: SetMark{And: ^uint32(0x10000), Xor: 0x10000}, Comment: "mark accepted"},
		{Match: []Match{Mark{Mask: 0x10000, Value: 0}}, Action: SetMark{And: ^uint32(0x10000), Xor: 0x10000, Return: true}, Comment: "mark accepted and return"},
		{Action: SetMark{Xor: 0x10, Return: true}},
		// Logging.
		{Action: Log{Prefix: "nftep drop: "}},
		{Action: Log{}},
		{Action: NFLog{Group: 3, Prefix: "DRP|default"}},
		{Action: NFLog{Group: 0}},
		{Match: []Match{L4Proto{Protos: []uint8{17}}, Port{Dir: Out, Ranges: []PortRange{{7777, 7777}}}}, Action: SetNftrace{}},
		// Address types by route lookup.
		{Match: []Match{FibLocal{Dir: Out}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{L4Proto{Protos: []uint8{4}}, Addr{Family: IPv4, Dir: In, Set: "addr4"}, FibLocal{Dir: Out}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{FibLocal{Dir: In}}},
		{Match: []Match{FibLocal{Dir: Out, Negate: true}}},
	}
	m.SetChain(&Chain{Name: "vocab", Rules: rules})
	m.SetChain(&Chain{Name: "vocab-target"})
	m.SetChain(&Chain{Name: "filter-fw-cali12ab", Rules: []*Rule{
		{Match: []Match{CtStateMatch{States: CtStateEstablished | CtStateRelated}}, Action: Verdict{Kind: Accept}},
		{Action: Verdict{Kind: Drop}, Comment: "default deny"},
	}})
	base := func(name string, hook Hook, prio int, policy Policy, rules ...*Rule) {
		m.SetChain(&Chain{Name: name, Base: &BaseChain{Type: ChainTypeFilter, Hook: hook, Priority: prio, Policy: policy}, Rules: rules})
	}
	base("raw-prerouting", HookPrerouting, PriorityRaw, PolicyAccept,
		&Rule{Match: []Match{IfName{Dir: In, Name: "cali", Wildcard: true}}, Action: Notrack{}},
		&Rule{Action: Verdict{Kind: Jump, Chain: "vocab"}})
	base("raw-output", HookOutput, PriorityRaw+10, "")
	base("mangle-prerouting", HookPrerouting, PriorityMangle, PolicyAccept)
	base("mangle-postrouting", HookPostrouting, PriorityMangle-10, PolicyAccept)
	base("filter-input", HookInput, PriorityFilter, PolicyDrop, &Rule{Action: Verdict{Kind: Accept}})
	base("filter-forward", HookForward, -11, PolicyAccept)
	base("filter-output", HookOutput, 50, PolicyAccept)
	base("nat-prerouting", HookPrerouting, -100, PolicyAccept)
	base("nat-postrouting", HookPostrouting, 105, PolicyAccept)
	base("conntrack", HookInput, -200, PolicyAccept)
	// Source NAT: masquerade and snat, with and without ports.
	snatAddr := netip.MustParseAddr("192.168.60.11")
	m.SetChain(&Chain{Name: "nat-srcnat", Base: &BaseChain{Type: ChainTypeNAT, Hook: HookPostrouting, Priority: PrioritySrcNAT + 10, Policy: PolicyAccept}, Rules: []*Rule{
		{Match: []Match{Addr{Family: IPv4, Dir: In, Set: "addr4"}, Addr{Family: IPv4, Dir: Out, Set: "addr4", Negate: true}}, Action: Masquerade{FullyRandom: true}, Comment: "masquerade"},
		{Match: []Match{Addr{Family: IPv6, Dir: In, Set: "addr6"}}, Action: Masquerade{}},
		// A masquerade with ports and fully-random: TestNATKernel (google/nftables
		// v0.3.0, which programs this table, drops its flags).
		{Match: []Match{tcp}, Action: Masquerade{Ports: &PortRange{32768, 65535}}},
		{Match: []Match{udp, IfName{Dir: Out, Name: "eth", Wildcard: true}}, Action: Masquerade{Ports: &PortRange{4790, 65535}}},
		{Match: []Match{IfName{Dir: Out, Name: "vxlan.calico"}, FibLocal{Dir: In, OIF: true, Negate: true}, FibLocal{Dir: In}}, Action: Masquerade{}},
		{Match: []Match{Addr{Family: IPv4, Dir: In, Set: "addr4"}}, Action: SNAT{Addr: snatAddr}},
		{Match: []Match{NFProto{Family: IPv4}}, Action: SNAT{Addr: snatAddr, FullyRandom: true}},
		{Match: []Match{tcp, Addr{Family: IPv4, Dir: In, Set: "addr4"}}, Action: SNAT{Addr: snatAddr, Ports: &PortRange{32768, 65535}, FullyRandom: true}},
		{Match: []Match{udp}, Action: SNAT{Addr: snatAddr, Ports: &PortRange{1024, 2047}}},
		{Match: []Match{tcp, Addr{Family: IPv4, Dir: In, Set: "addr4"}}, Action: Verdict{Kind: Return}},
	}})
	return m
}

// vocabProgramCold creates m in the kernel with google/nftables, the way a cold
// apply must: table, sets in print order, chains in print order, elements
// (in chunks of at most maxChunk kernel elements), then rules.
//
// The table and sets go in a first batch whose NEWSET messages carry
// setUserData (google/nftables' AddSet cannot write a map's data byte
// order): they are recorded from google/nftables, patched and sent on a
// plain netlink socket. The rest is one google/nftables batch.
func vocabProgramCold(t *testing.T, ns *netnstest.NS, m *Model) {
	t.Helper()
	const maxChunk = 400
	tbl := &nftables.Table{Name: m.Name, Family: nftables.TableFamily(vocabFamilyNum(m.Family))}
	sets, chains := m.PrintOrder()
	ksets := map[string]*nftables.Set{}
	var defs []*nftables.Set
	for _, name := range sets {
		ns, err := encodeSet(tbl, m.Set(name))
		if err != nil {
			t.Fatalf("encodeSet: %v", err)
		}
		ksets[name] = ns
		defs = append(defs, ns)
	}
	vocabAddSets(t, ns, tbl, defs, m)

	c := ns.NFTConn(t)
	kchains := map[string]*nftables.Chain{}
	for _, name := range chains {
		ch := m.Chain(name)
		nc := &nftables.Chain{Name: name, Table: tbl}
		if b := ch.Base; b != nil {
			hook := map[Hook]*nftables.ChainHook{
				HookPrerouting: nftables.ChainHookPrerouting, HookInput: nftables.ChainHookInput,
				HookForward: nftables.ChainHookForward, HookOutput: nftables.ChainHookOutput,
				HookPostrouting: nftables.ChainHookPostrouting,
			}[b.Hook]
			if m.Family == FamilyARP {
				// The arp family numbers its hooks NF_ARP_IN 0, NF_ARP_OUT 1.
				hook = map[Hook]*nftables.ChainHook{HookInput: nftables.ChainHookRef(0), HookOutput: nftables.ChainHookRef(1)}[b.Hook]
			}
			policy := nftables.ChainPolicyAccept
			if b.Policy == PolicyDrop {
				policy = nftables.ChainPolicyDrop
			}
			nc.Type, nc.Hooknum, nc.Priority, nc.Policy = nftables.ChainType(chainType(b)), hook, nftables.ChainPriorityRef(nftables.ChainPriority(b.Priority)), &policy
		}
		kchains[name] = c.AddChain(nc)
	}
	// Elements after the chains: a vmap element's jump needs its chain.
	for _, name := range sets {
		s := m.Set(name)
		es := make([]Element, 0, len(s.Elements))
		for _, e := range s.Elements {
			es = append(es, e)
		}
		kes, err := encodeElements(s, es)
		if err != nil {
			t.Fatalf("encodeElements: %v", err)
		}
		for len(kes) > 0 {
			n := min(len(kes), maxChunk)
			// Keep an interval's end with its start.
			for n < len(kes) && kes[n].IntervalEnd {
				n--
			}
			if err := c.SetAddElements(ksets[name], kes[:n]); err != nil {
				t.Fatalf("SetAddElements %q: %v", name, err)
			}
			kes = kes[n:]
		}
	}
	for _, name := range chains {
		for i, r := range m.Chain(name).Rules {
			if err := queueRule(c, tbl, kchains[name], r); err != nil {
				t.Fatalf("chain %q: rule %d: %v", name, i+1, err)
			}
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// TestVocabKernel programs a table using the whole vocabulary into a fresh
// namespace and checks that the real nft lists exactly Model.String, that
// every set's elements decode back to the model's, and that every rule's
// userdata carries its hash.
func TestVocabKernel(t *testing.T) {
	ns := netnstest.New(t)
	m := vocabModel("nftep")
	if err := m.Validate(); err != nil {
		t.Fatalf("model does not validate: %v", err)
	}
	vocabProgramCold(t, ns, m)
	c := ns.NFTConn(t)

	got := ns.Run(t, "nft", "list", "table", "inet", m.Name)
	want := m.String()
	if diff := cmp.Diff(vocabNormalizeLines(want), vocabNormalizeLines(got)); diff != "" {
		t.Errorf("nft list table inet %s differs from Model.String (-want +got):\n%s", m.Name, diff)
	} else if got != want {
		t.Errorf("nft list table matches Model.String only modulo whitespace:\nwant %q\ngot  %q", want, got)
	}

	vocabCheckKernel(t, c, m)
}

// vocabCheckKernel checks what vocabProgramCold programmed for m: every
// set's elements decode back to the model's, and every rule carries its
// hash in its userdata and has exactly the expressions we encoded.
func vocabCheckKernel(t *testing.T, c *nftables.Conn, m *Model) {
	t.Helper()
	tbl := &nftables.Table{Name: m.Name, Family: nftables.TableFamily(vocabFamilyNum(m.Family))}
	for _, name := range m.SetNames() {
		s := m.Set(name)
		kes, err := c.GetSetElements(&nftables.Set{Table: tbl, Name: name})
		if err != nil {
			t.Fatalf("GetSetElements %q: %v", name, err)
		}
		dec, err := decodeElements(s, kes)
		if err != nil {
			t.Errorf("decodeElements %q: %v", name, err)
			continue
		}
		if diff := cmp.Diff(s.Elements, dec); diff != "" {
			t.Errorf("set %q: decoded elements differ (-model +kernel):\n%s", name, diff)
		}
	}

	for _, name := range m.ChainNames() {
		rules, err := c.GetRules(tbl, &nftables.Chain{Name: name, Table: tbl})
		if err != nil {
			t.Fatalf("GetRules %q: %v", name, err)
		}
		want := m.Chain(name).Rules
		if len(rules) != len(want) {
			t.Fatalf("chain %q: kernel has %d rules, model %d", name, len(rules), len(want))
		}
		for i, r := range rules {
			if got, want := ruleHashFromUserData(r.UserData), ruleHash(want[i]); got != want {
				t.Errorf("chain %q: rule %d: hash in userdata %q, want %q", name, i+1, got, want)
			}
			// The kernel's expressions are ours, apart from the names
			// and IDs of anonymous sets, which it assigns.
			sent, _, err := encodeRule(want[i])
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(vocabNormalizeExprs(sent), vocabNormalizeExprs(r.Exprs)); diff != "" {
				t.Errorf("chain %q: rule %d (%s): kernel expressions differ (-sent +kernel):\n%s", name, i+1, want[i], diff)
			}
		}
	}
}

// vocabNormalizeExprs blanks what the kernel fills in itself: anonymous
// set names ("__set%d" becomes "__set0"), set IDs (not dumped) and the
// default level of a kernel-log statement (nft_log_init dumps warning, 4,
// which nft does not print).
func vocabNormalizeExprs(exprs []expr.Any) []expr.Any {
	out := make([]expr.Any, len(exprs))
	for i, e := range exprs {
		switch x := e.(type) {
		case *expr.Lookup:
			c := *x
			c.SetID = 0
			if strings.HasPrefix(c.SetName, "__set") {
				c.SetName = "__set"
			}
			e = &c
		case *expr.Log:
			c := *x
			if c.Key&(1<<unix.NFTA_LOG_LEVEL) != 0 && c.Level == expr.LogLevelWarning {
				c.Key &^= 1 << unix.NFTA_LOG_LEVEL
				c.Level = 0
			}
			e = &c
		}
		out[i] = e
	}
	return out
}

// normalizeLines is vocabNormalizeLines; engine_kernel_test.go uses it.
func normalizeLines(s string) []string { return vocabNormalizeLines(s) }

// vocabNormalizeLines trims each line, so that a diff shows content changes.
func vocabNormalizeLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

// TestVocabKernelChunks programs sets too big for one netlink attribute
// (google/nftables v0.3.0 silently truncates an element list over 64 KiB),
// in chunks that keep each interval's start and end together, and checks
// the listing and the read-back.
func TestVocabKernelChunks(t *testing.T) {
	ns := netnstest.New(t)
	m := NewModel(FamilyINet, "chunks")
	m.SetChain(&Chain{Name: "target"})
	m.SetSet(&Set{Name: "many-names", Key: []KeyType{TypeIfName}, Data: DataVerdict})
	m.SetSet(&Set{Name: "many-nets", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	m.SetSet(&Set{Name: "many-rpf", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true})
	for i := 0; i < 1500; i++ {
		v := &Verdict{Kind: Drop}
		if i%3 == 0 {
			v = &Verdict{Kind: Jump, Chain: "target"}
		}
		m.SetElement("many-names", Element{Key: fmt.Sprintf("cali%04x", i), Verdict: v, Comment: fmt.Sprintf("endpoint %d", i)})
	}
	for i := 0; i < 700; i++ {
		m.SetElement("many-nets", Element{Key: fmt.Sprintf("10.%d.%d.0/30", i/256, i%256)})
		m.SetElement("many-rpf", Element{Key: fmt.Sprintf("cali%04x . 10.%d.%d.0/24", i, i/256, i%256)})
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	vocabProgramCold(t, ns, m)
	got := ns.Run(t, "nft", "list", "table", "inet", m.Name)
	if diff := cmp.Diff(m.String(), got); diff != "" {
		t.Errorf("nft list table differs from Model.String (-want +got):\n%s", diff)
	}
	c := ns.NFTConn(t)
	tbl := &nftables.Table{Name: m.Name, Family: nftables.TableFamilyINet}
	for _, name := range m.SetNames() {
		kes, err := c.GetSetElements(&nftables.Set{Table: tbl, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		dec, err := decodeElements(m.Set(name), kes)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(m.Set(name).Elements, dec); diff != "" {
			t.Errorf("set %q: decoded elements differ (-model +kernel):\n%s", name, diff)
		}
	}
}

// vocabARPModel is a small table of the arp family, with the ARP header
// matches (operation, sender address) and a masked mark dispatch.
func vocabARPModel() *Model {
	m := NewModel(FamilyARP, "nftep-arp")
	ip := netip.MustParseAddr
	m.SetSet(&Set{Name: "suppress", Key: []KeyType{TypeIfName}})
	m.SetElement("suppress", Element{Key: "cali12ab"})
	m.SetSet(&Set{Name: "arp-dispatch", Key: []KeyType{TypeIfName}, Data: DataVerdict})
	m.SetElement("arp-dispatch", Element{Key: "cali12ab", Verdict: &Verdict{Kind: Goto, Chain: "arp-cali12ab"}, Comment: "endpoint k8s/default/pod-a/eth0"})
	m.SetSet(&Set{Name: "arp-own", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Comment: "workload interface . its IPv4 address"})
	m.SetElement("arp-own", Element{Key: "cali12ab . 10.65.0.7", Comment: "endpoint k8s/default/pod-a/eth0"})
	m.SetElement("arp-own", Element{Key: "cali12cd . 10.65.0.8"})
	m.SetSet(&Set{Name: "arp-own-ips", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	m.SetElement("arp-own-ips", Element{Key: "10.65.0.0/16"})
	m.SetSet(&Set{Name: "arp-marks", Key: []KeyType{TypeMark}, Data: DataVerdict})
	m.SetElement("arp-marks", Element{Key: "0x00000100", Verdict: &Verdict{Kind: Accept}})
	m.SetChain(&Chain{Name: "arp-in", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: 0, Policy: PolicyAccept}, Rules: []*Rule{
		{Match: []Match{Lookup{Keys: []Selector{SelIIFName}, Set: "suppress"}}, Action: Verdict{Kind: Drop}, Comment: "suppress"},
		{Action: VMap{Key: SelMark, Map: "arp-marks", Mask: 0x0000ff00}},
	}})
	m.SetChain(&Chain{Name: "arp-out", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookOutput, Priority: -5, Policy: PolicyAccept}, Rules: []*Rule{
		{Action: VMap{Key: SelOIFName, Map: "arp-dispatch"}},
		{Match: []Match{ARPOperation{Op: ARPOpReply}, Lookup{Keys: []Selector{SelOIFName, SelARPSaddrIP}, Set: "arp-own"}}, Action: Verdict{Kind: Drop}, Comment: "own address"},
		{Match: []Match{Lookup{Keys: []Selector{SelARPSaddrIP}, Set: "arp-own-ips", Negate: true}}},
	}})
	m.SetChain(&Chain{Name: "arp-cali12ab", Rules: []*Rule{
		{Match: []Match{IfName{Dir: Out, Name: "cali12ab"}, ARPOperation{Op: ARPOpReply}, ARPSenderIP{Addr: ip("10.65.0.7")}}, Action: Verdict{Kind: Drop}, Comment: "endpoint k8s/default/pod-a/eth0"},
		{Match: []Match{ARPOperation{Op: ARPOpRequest, Negate: true}, ARPSenderIP{Addr: ip("10.0.0.1"), Negate: true}}},
		{Match: []Match{ARPSenderIP{Addr: ip("255.255.255.255")}, ARPOperation{Op: ARPOpInReply}}, Action: Verdict{Kind: Accept}},
		{Match: []Match{ARPOperation{Op: ARPOpNAK}}},
		{Match: []Match{ARPOperation{Op: 7}}},
		{Match: []Match{ARPOperation{Op: 0x100}, Mark{Mask: 0xff00, Value: 0x100}}},
	}})
	return m
}

// TestVocabKernelARP checks the printer and the encoder against the arp
// family: its base chains know only the filter priority name, and its ARP
// header matches have no implicit dependencies.
func TestVocabKernelARP(t *testing.T) {
	ns := netnstest.New(t)
	m := vocabARPModel()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	vocabProgramCold(t, ns, m)
	got := ns.Run(t, "nft", "list", "table", "arp", m.Name)
	if diff := cmp.Diff(m.String(), got); diff != "" {
		t.Errorf("nft list table arp differs from Model.String (-want +got):\n%s", diff)
	}
	vocabCheckKernel(t, ns.NFTConn(t), m)
}

func vocabFamilyNum(f Family) uint8 {
	if f == FamilyARP {
		return unix.NFPROTO_ARP
	}
	return unix.NFPROTO_INET
}

// vocabAddSets creates tbl and the sets defs in one batch, each set
// with setUserData of the model's set of the same name.
func vocabAddSets(t *testing.T, ns *netnstest.NS, tbl *nftables.Table, defs []*nftables.Set, m *Model) {
	t.Helper()
	var batch []netlink.Message
	rec, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		batch = append(batch, req...)
		var acks []netlink.Message
		for _, msg := range req {
			if msg.Header.Flags&netlink.Acknowledge != 0 {
				acks = append(acks, netlink.Message{
					Header: netlink.Header{Type: netlink.Error, Sequence: msg.Header.Sequence, PID: msg.Header.PID},
					Data:   make([]byte, 4),
				})
			}
		}
		return acks, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	rec.AddTable(tbl)
	for _, d := range defs {
		if err := rec.AddSet(d, nil); err != nil {
			t.Fatalf("AddSet %q: %v", d.Name, err)
		}
	}
	if err := rec.Flush(); err != nil {
		t.Fatalf("record batch: %v", err)
	}
	newset := netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWSET)
	acks := 0
	for i, msg := range batch {
		if msg.Header.Flags&netlink.Acknowledge != 0 {
			acks++
		}
		if msg.Header.Type != newset {
			continue
		}
		attrs, err := netlink.UnmarshalAttributes(msg.Data[4:])
		if err != nil {
			t.Fatal(err)
		}
		var name string
		out := attrs[:0]
		for _, a := range attrs {
			if a.Type == unix.NFTA_SET_NAME {
				name = strings.TrimSuffix(string(a.Data), "\x00")
			}
			if a.Type != unix.NFTA_SET_USERDATA {
				out = append(out, a)
			}
		}
		s := m.Set(name)
		if s == nil {
			t.Fatalf("recorded NEWSET for unknown set %q", name)
		}
		if ud := setUserData(s); len(ud) > 0 {
			out = append(out, netlink.Attribute{Type: unix.NFTA_SET_USERDATA, Data: ud})
		}
		b, err := netlink.MarshalAttributes(out)
		if err != nil {
			t.Fatal(err)
		}
		batch[i].Data = append(msg.Data[:4:4], b...)
	}
	for i := range batch {
		// Let the socket recompute lengths (the patched messages grew)
		// and sequence numbers.
		batch[i].Header.Length, batch[i].Header.Sequence = 0, 0
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.Fd()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.SendMessages(batch); err != nil {
		t.Fatalf("send sets: %v", err)
	}
	for ; acks > 0; acks-- {
		if _, err := conn.Receive(); err != nil {
			t.Fatalf("create sets: %v", err)
		}
	}
}
