package nft

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nftep/nftep/internal/testutil"
)

var updateVocab = flag.Bool("update-vocab", false, "rewrite nft/testdata/vocab golden files from Model.String")

// TestVocabGolden pins Model.String of the whole-vocabulary table to the
// text that TestVocabKernel saw nft 1.0.6 print for it, so the printer is
// checked without root as well.
func TestVocabGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		m    *Model
	}{
		{"inet-nftep.nft", vocabModel("nftep")},
		{"arp-nftep.nft", vocabARPModel()},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", "vocab", tc.file)
			got := tc.m.String()
			if *updateVocab {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-vocab to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Model.String differs from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}

func TestRuleString(t *testing.T) {
	pfx := netip.MustParsePrefix
	tcp := L4Proto{Protos: []uint8{6}}
	code := uint8(0)
	for _, tc := range []struct {
		name string
		rule Rule
		want string
	}{
		{"verdict only", Rule{Action: Verdict{Kind: Drop}}, "drop"},
		{"jump with comment", Rule{Action: Verdict{Kind: Jump, Chain: "filter-tw-cali12ab"}, Comment: "to workload"},
			`jump filter-tw-cali12ab comment "to workload"`},
		{"ifname exact and wildcard", Rule{Match: []Match{IfName{Dir: In, Name: "cali12ab"}, IfName{Dir: Out, Name: "cali", Wildcard: true, Negate: true}}},
			`iifname "cali12ab" oifname != "cali*"`},
		{"explicit family dropped before its address", Rule{Match: []Match{NFProto{Family: IPv6}, Addr{Family: IPv6, Dir: Out, Prefixes: []netip.Prefix{pfx("fd00::/64")}}}},
			"ip6 daddr fd00::/64"},
		{"explicit family kept after its address", Rule{Match: []Match{Addr{Family: IPv4, Dir: In, Set: "x"}, NFProto{Family: IPv4}}},
			"ip saddr @x meta nfproto ipv4"},
		{"l4proto folded into the port", Rule{Match: []Match{tcp, Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.1/32")}}, Port{Dir: Out, Ranges: []PortRange{{80, 80}, {443, 443}}}}, Action: Verdict{Kind: Accept}},
			"ip saddr 10.0.0.1 tcp dport { 80, 443 } accept"},
		{"protocol set keeps th", Rule{Match: []Match{L4Proto{Protos: []uint8{17, 6}}, Port{Dir: In, Ranges: []PortRange{{1024, 65535}}, Negate: true}}},
			"meta l4proto { tcp, udp } th sport != 1024-65535"},
		{"icmp with code", Rule{Match: []Match{ICMP{Family: IPv6, Type: 1, Code: &code}}},
			"icmpv6 type destination-unreachable icmpv6 code no-route"},
		{"icmp absorbs l4proto, not its family guard", Rule{Match: []Match{L4Proto{Protos: []uint8{58}}, ICMP{Family: IPv6, Type: 128}}},
			"meta nfproto ipv6 icmpv6 type echo-request"},
		{"icmp absorbs family and l4proto", Rule{Match: []Match{NFProto{Family: IPv6}, L4Proto{Protos: []uint8{58}}, ICMP{Family: IPv6, Type: 128}}},
			"icmpv6 type echo-request"},
		{"ct state negations", Rule{Match: []Match{CtStateMatch{States: CtStateInvalid, Negate: true}, CtStateMatch{States: CtStateNew | CtStateRelated, Negate: true}}},
			"ct state != invalid ct state ! related,new"},
		{"masks", Rule{Match: []Match{Mark{Mask: 0xffff0000, Value: 0x10000, Negate: true}, Mark{Mask: 0x00ff0000, Value: 0x10000}}},
			"meta mark != 0x00010000/16 meta mark & 0x00ff0000 == 0x00010000"},
		{"counter and nflog", Rule{Counter: true, Action: NFLog{Group: 1, Prefix: "API|x"}},
			`counter packets 0 bytes 0 log prefix "API|x" group 1`},
		{"lookup with folded port", Rule{Match: []Match{tcp, Lookup{Keys: []Selector{SelIP6Saddr, SelTHSport}, Set: "s", Negate: true}}},
			"ip6 saddr . tcp sport != @s"},
		{"limit with default burst", Rule{Match: []Match{Limit{Rate: 10, Burst: 5}}}, "limit rate over 10/second"},
		{"rpf", Rule{Match: []Match{RPF{}}, Action: Verdict{Kind: Drop}}, "fib saddr . mark . iif oif 0 drop"},
		{"reject kinds", Rule{Action: Reject{With: RejectICMPAdminProhibited}}, "reject with icmpx admin-prohibited"},
		{"vmap on mark", Rule{Action: VMap{Key: SelMark, Map: "m"}}, "meta mark vmap @m"},
		{"vmap on masked mark", Rule{Action: VMap{Key: SelMark, Map: "m", Mask: 0xffe00000}}, "meta mark & 0xffe00000 vmap @m"},
		{"vmap mask of all ones", Rule{Action: VMap{Key: SelMark, Map: "m", Mask: 0xffffffff}}, "meta mark vmap @m"},
		{"arp reply suppression", Rule{Match: []Match{IfName{Dir: Out, Name: "cali1"}, ARPOperation{Op: ARPOpReply}, ARPSenderIP{Addr: netip.MustParseAddr("10.0.0.1")}}, Action: Verdict{Kind: Drop}},
			`oifname "cali1" arp operation reply arp saddr ip 10.0.0.1 drop`},
		{"arp negations and unnamed operation", Rule{Match: []Match{ARPOperation{Op: ARPOpRequest, Negate: true}, ARPOperation{Op: 7}, ARPSenderIP{Addr: netip.MustParseAddr("10.0.0.1"), Negate: true}}},
			"arp operation != request arp operation 7 arp saddr ip != 10.0.0.1"},
		{"set mark field", Rule{Action: SetMark{And: ^uint32(0xff00), Xor: 0x1200}}, "meta mark set meta mark & 0xffff12ff | 0x00001200"},
		{"set mark whole", Rule{Action: SetMark{Xor: 0xdead}}, "meta mark set 0x0000dead"},
		{"set mark and return", Rule{Action: SetMark{And: ^uint32(0x10000), Xor: 0x10000, Return: true}}, "meta mark set meta mark | 0x00010000 return"},
		{"mark from map", Rule{Action: SetMarkFromMap{Key: SelOIFName, Map: "m"}}, "meta mark set oifname map @m"},
		{"notrack", Rule{Match: []Match{IfName{Dir: In, Name: "lo"}}, Action: Notrack{}}, `iifname "lo" notrack`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rule.String(); got != tc.want {
				t.Errorf("Rule.String()\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestChainString(t *testing.T) {
	c := &Chain{
		Name: "filter-forward",
		Base: &BaseChain{Type: ChainTypeFilter, Hook: HookForward, Priority: PriorityFilter - 10},
		Rules: []*Rule{
			{Match: []Match{CtStateMatch{States: CtStateInvalid}}, Action: Verdict{Kind: Drop}},
			{Action: VMap{Key: SelIIFName, Map: "filter-from-wl"}},
		},
	}
	want := testutil.Dedent(`
		chain filter-forward {
			type filter hook forward priority filter - 10; policy accept;
			ct state invalid drop
			iifname vmap @filter-from-wl
		}
		`)
	if diff := cmp.Diff(want, c.String()); diff != "" {
		t.Errorf("Chain.String (-want +got):\n%s", diff)
	}
	empty := &Chain{Name: "filter-tw-cali12ab"}
	if diff := cmp.Diff("chain filter-tw-cali12ab {\n}\n", empty.String()); diff != "" {
		t.Errorf("empty Chain.String (-want +got):\n%s", diff)
	}
}

func TestPriorityString(t *testing.T) {
	for _, tc := range []struct {
		family Family
		hook   Hook
		prio   int
		want   string
	}{
		{FamilyINet, HookPrerouting, -300, "raw"},
		{FamilyINet, HookPrerouting, -290, "raw + 10"},
		{FamilyINet, HookPrerouting, -311, "-311"},
		{FamilyINet, HookOutput, -160, "mangle - 10"},
		{FamilyINet, HookPrerouting, -100, "dstnat"},
		{FamilyINet, HookInput, -100, "-100"},
		{FamilyINet, HookPostrouting, 100, "srcnat"},
		{FamilyINet, HookForward, 100, "100"},
		{FamilyINet, HookInput, 0, "filter"},
		{FamilyINet, HookInput, 55, "security + 5"},
		{FamilyINet, HookInput, -200, "-200"},
		{FamilyARP, HookInput, -5, "filter - 5"},
		{FamilyARP, HookOutput, -300, "-300"},
	} {
		if got := priorityString(tc.family, tc.hook, tc.prio); got != tc.want {
			t.Errorf("priorityString(%s, %s, %d) = %q, want %q", tc.family, tc.hook, tc.prio, got, tc.want)
		}
	}
}

func TestSetString(t *testing.T) {
	m := NewModel(FamilyINet, "t")
	m.SetSet(&Set{Name: "ports", Key: []KeyType{TypeInetService}, Comment: "six"})
	for _, p := range []string{"8080", "22", "443", "80", "53", "1"} {
		m.SetElement("ports", Element{Key: p})
	}
	m.SetSet(&Set{Name: "from-wl", Key: []KeyType{TypeIfName}, Data: DataVerdict})
	m.SetElement("from-wl", Element{Key: "cali12", Verdict: &Verdict{Kind: Jump, Chain: "fw-cali12"}, Comment: "pod a"})
	m.SetElement("from-wl", Element{Key: "eth0", Verdict: &Verdict{Kind: Accept}})
	m.SetSet(&Set{Name: "nets", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	for _, k := range []string{"10.0.0.0/8", "192.168.0.0/16", "1.1.1.1", "172.16.0.1-172.16.0.3"} {
		m.SetElement("nets", Element{Key: k})
	}
	want := testutil.Dedent(`
		map from-wl {
			type ifname : verdict
			elements = { "eth0" : accept,
				     "cali12" comment "pod a" : jump fw-cali12 }
		}
		`)
	if diff := cmp.Diff(want, m.Set("from-wl").String()); diff != "" {
		t.Errorf("map (-want +got):\n%s", diff)
	}
	want = testutil.Dedent(`
		set ports {
			type inet_service
			comment "six"
			elements = { 1, 22, 53, 80, 443,
				     8080 }
		}
		`)
	if diff := cmp.Diff(want, m.Set("ports").String()); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	want = testutil.Dedent(`
		set nets {
			type ipv4_addr
			flags interval
			elements = { 1.1.1.1, 10.0.0.0/8,
				     172.16.0.1-172.16.0.3, 192.168.0.0/16 }
		}
		`)
	if diff := cmp.Diff(want, m.Set("nets").String()); diff != "" {
		t.Errorf("nets (-want +got):\n%s", diff)
	}
}

func TestModelStringOrder(t *testing.T) {
	m := NewModel(FamilyINet, "t")
	m.SetChain(&Chain{Name: "b-regular"})
	m.SetChain(&Chain{Name: "z-base", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Policy: PolicyDrop}})
	m.SetChain(&Chain{Name: "a-regular"})
	m.SetChain(&Chain{Name: "c-base", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookOutput, Priority: PriorityRaw}})
	m.SetSet(&Set{Name: "z", Key: []KeyType{TypeMark}})
	m.SetSet(&Set{Name: "a", Key: []KeyType{TypeIfName}, Data: DataMark})
	sets, chains := m.PrintOrder()
	if diff := cmp.Diff([]string{"a", "z"}, sets); diff != "" {
		t.Errorf("set order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c-base", "z-base", "a-regular", "b-regular"}, chains); diff != "" {
		t.Errorf("chain order (-want +got):\n%s", diff)
	}
	want := testutil.Dedent(`
		table inet t {
			map a {
				type ifname : mark
			}

			set z {
				type mark
			}

			chain c-base {
				type filter hook output priority raw; policy accept;
			}

			chain z-base {
				type filter hook input priority filter; policy drop;
			}

			chain a-regular {
			}

			chain b-regular {
			}
		}
		`)
	if diff := cmp.Diff(want, m.String()); diff != "" {
		t.Errorf("Model.String (-want +got):\n%s", diff)
	}
	if got, want := NewModel(FamilyINet, "empty").String(), "table inet empty {\n}\n"; got != want {
		t.Errorf("empty table: got %q, want %q", got, want)
	}
}
