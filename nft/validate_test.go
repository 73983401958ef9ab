package nft

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

// validateFixture returns a model with a few chains and sets for rules to
// refer to.
func validateFixture() *Model {
	m := NewModel(FamilyINet, "t")
	m.SetChain(&Chain{Name: "filter-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput}})
	m.SetChain(&Chain{Name: "filter-pi-default.allow"})
	m.SetSet(&Set{Name: "v4", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	m.SetSet(&Set{Name: "ports", Key: []KeyType{TypeInetService}, Interval: true})
	m.SetSet(&Set{Name: "rpf", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true})
	m.SetSet(&Set{Name: "from-wl", Key: []KeyType{TypeIfName}, Data: DataVerdict})
	m.SetSet(&Set{Name: "ep-mark", Key: []KeyType{TypeIfName}, Data: DataMark})
	return m
}

func TestValidateChain(t *testing.T) {
	pfx := netip.MustParsePrefix
	tcp := L4Proto{Protos: []uint8{6}}
	code := uint8(0)
	rule := func(r Rule) *Chain {
		return &Chain{Name: "filter-tw-cali12ab", Rules: []*Rule{{Action: Verdict{Kind: Accept}}, {Action: Verdict{Kind: Drop}}, &r}}
	}
	for _, tc := range []struct {
		name  string
		chain *Chain
		err   string // exact message; "" for valid
	}{
		{"valid", rule(Rule{Match: []Match{IfName{Dir: In, Name: "cali12ab"}, tcp, Port{Dir: Out, Set: "ports"}}, Action: Verdict{Kind: Jump, Chain: "filter-pi-default.allow"}}), ""},
		{"jump to unknown chain", rule(Rule{Action: Verdict{Kind: Jump, Chain: "filter-pi-default.deny"}}),
			`chain "filter-tw-cali12ab": rule 3: jump to unknown chain "filter-pi-default.deny"`},
		{"goto base chain", rule(Rule{Action: Verdict{Kind: Goto, Chain: "filter-input"}}),
			`chain "filter-tw-cali12ab": rule 3: goto to base chain "filter-input"`},
		{"accept with chain", rule(Rule{Action: Verdict{Kind: Accept, Chain: "x"}}),
			`chain "filter-tw-cali12ab": rule 3: accept verdict with a chain ("x")`},
		{"name with space", &Chain{Name: "bad name"}, `chain "bad name": name "bad name" has character ' ', which nft would quote`},
		{"name starting with digit", &Chain{Name: "1chain"}, `chain "1chain": name "1chain" does not start with a letter`},
		{"name too long", &Chain{Name: "c" + strings.Repeat("x", 255)}, `chain "c` + strings.Repeat("x", 255) + `": name is 256 bytes, more than 255`},
		{"unknown hook", &Chain{Name: "b", Base: &BaseChain{Type: ChainTypeFilter, Hook: "ingress"}}, `chain "b": hook "ingress" is not valid in family inet`},
		{"base chain type", &Chain{Name: "b", Base: &BaseChain{Type: "route", Hook: HookInput}}, `chain "b": base chain type "route" (nftep uses "filter" and "nat")`},
		{"nat chain at forward", &Chain{Name: "b", Base: &BaseChain{Type: ChainTypeNAT, Hook: HookForward}}, `chain "b": base chain type "nat" at hook forward: nat chains have no forward hook`},
		{"empty rule", rule(Rule{}), `chain "filter-tw-cali12ab": rule 3: empty rule`},
		{"ifname too long", rule(Rule{Match: []Match{IfName{Dir: In, Name: "cali0123456789ab"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: interface name "cali0123456789ab" is 16 bytes, more than 15`},
		{"empty wildcard", rule(Rule{Match: []Match{IfName{Dir: Out, Wildcard: true}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: empty interface name prefix (a wildcard needs at least one character)`},
		{"star in name", rule(Rule{Match: []Match{IfName{Dir: Out, Name: "cali*"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: interface name "cali*" has character '*'`},
		{"addr family mismatch", rule(Rule{Match: []Match{Addr{Family: IPv6, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.0/8")}}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: prefix 10.0.0.0/8 is not an IPv6 prefix`},
		{"host bits", rule(Rule{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.1/8")}}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: prefix 10.0.0.1/8 has host bits set (want 10.0.0.0/8)`},
		{"overlapping prefixes", rule(Rule{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.0/8"), pfx("10.1.0.0/16")}}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: prefixes 10.0.0.0/8 and 10.1.0.0/16 overlap`},
		{"prefixes and set", rule(Rule{Match: []Match{Addr{Family: IPv4, Dir: In, Prefixes: []netip.Prefix{pfx("10.0.0.0/8")}, Set: "v4"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: address match needs exactly one of Prefixes and Set`},
		{"conflicting families", rule(Rule{Match: []Match{NFProto{Family: IPv6}, Addr{Family: IPv4, Dir: In, Set: "v4"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 2: IPv4 match in a rule that already matches IPv6`},
		{"address set of the wrong type", rule(Rule{Match: []Match{Addr{Family: IPv6, Dir: In, Set: "v4"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: set "v4" has key type ipv4_addr, the match needs ipv6_addr`},
		{"unknown set", rule(Rule{Match: []Match{Addr{Family: IPv4, Dir: In, Set: "v5"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: reference to unknown set "v5"`},
		{"port range backwards", rule(Rule{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{2000, 1000}}}}}),
			`chain "filter-tw-cali12ab": rule 3: match 2: port range 2000-1000 runs backwards`},
		{"port without protocol", rule(Rule{Match: []Match{Port{Dir: Out, Ranges: []PortRange{{22, 22}}}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: port match needs an earlier protocol match of tcp, udp, sctp, dccp or udplite`},
		{"port after icmp protocol", rule(Rule{Match: []Match{L4Proto{Protos: []uint8{6, 1}}, Port{Dir: Out, Ranges: []PortRange{{22, 22}}}}}),
			`chain "filter-tw-cali12ab": rule 3: match 2: port match needs an earlier protocol match of tcp, udp, sctp, dccp or udplite`},
		{"overlapping ports", rule(Rule{Match: []Match{tcp, Port{Dir: Out, Ranges: []PortRange{{20, 30}, {30, 40}}}}}),
			`chain "filter-tw-cali12ab": rule 3: match 2: port ranges 20-30 and 30-40 overlap`},
		{"icmp after tcp", rule(Rule{Match: []Match{tcp, ICMP{Family: IPv4, Type: 8}}}),
			`chain "filter-tw-cali12ab": rule 3: match 2: icmp match in a rule that matches protocol [6]`},
		{"negated icmp code", rule(Rule{Match: []Match{ICMP{Family: IPv4, Type: 3, Code: &code, Negate: true}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: a negated icmp match with a code: nft cannot express it`},
		{"unknown ct state bit", rule(Rule{Match: []Match{CtStateMatch{States: 1 << 5}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: ct state bits 0x20 have no name in nft`},
		{"mark outside mask", rule(Rule{Match: []Match{Mark{Mask: 0xff, Value: 0x100}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: mark value 0x00000100 has bits outside mask 0x000000ff: it never matches`},
		{"lookup key types", rule(Rule{Match: []Match{Lookup{Keys: []Selector{SelIIFName, SelIP6Saddr}, Set: "rpf"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: set "rpf" has key type ifname . ipv4_addr, the match needs ifname . ipv6_addr`},
		{"lookup in a map", rule(Rule{Match: []Match{Lookup{Keys: []Selector{SelIIFName}, Set: "from-wl"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: set "from-wl" has data type "verdict", the match needs none (a set)`},
		{"vmap on a plain set", rule(Rule{Action: VMap{Key: SelIPSaddr, Map: "v4"}}),
			`chain "filter-tw-cali12ab": rule 3: set "v4" has data type "", the match needs verdict`},
		{"vmap to unknown map", rule(Rule{Action: VMap{Key: SelOIFName, Map: "to-wl"}}),
			`chain "filter-tw-cali12ab": rule 3: reference to unknown map "to-wl"`},
		{"vmap mask on an interface key", rule(Rule{Action: VMap{Key: SelIIFName, Map: "from-wl", Mask: 0xff00}}),
			`chain "filter-tw-cali12ab": rule 3: vmap mask 0x0000ff00 on key "iifname": only "meta mark" takes a mask`},
		{"arp operation in an inet table", rule(Rule{Match: []Match{ARPOperation{Op: ARPOpReply}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: nft.ARPOperation applies only to the arp family, not inet`},
		{"arp sender address in an inet table", rule(Rule{Match: []Match{IfName{Dir: Out, Name: "cali1"}, ARPSenderIP{Addr: netip.MustParseAddr("10.0.0.1")}}}),
			`chain "filter-tw-cali12ab": rule 3: match 2: nft.ARPSenderIP applies only to the arp family, not inet`},
		{"mark map of the wrong key", rule(Rule{Action: SetMarkFromMap{Key: SelMark, Map: "ep-mark"}}),
			`chain "filter-tw-cali12ab": rule 3: set "ep-mark" has key type ifname, the match needs mark`},
		{"comment too long", rule(Rule{Action: Verdict{Kind: Drop}, Comment: strings.Repeat("c", 129)}),
			`chain "filter-tw-cali12ab": rule 3: comment is 129 bytes, more than 128`},
		{"comment with quote", rule(Rule{Action: Verdict{Kind: Drop}, Comment: `say "hi"`}),
			`chain "filter-tw-cali12ab": rule 3: comment "say \"hi\"" has character '"', which nft cannot print back`},
		{"nflog prefix too long", rule(Rule{Action: NFLog{Group: 1, Prefix: strings.Repeat("p", 64)}}),
			`chain "filter-tw-cali12ab": rule 3: nflog prefix is 64 bytes, more than 63`},
		{"tcp reset without tcp", rule(Rule{Match: []Match{L4Proto{Protos: []uint8{6, 17}}}, Action: Reject{With: RejectTCPReset}}),
			"chain \"filter-tw-cali12ab\": rule 3: reject with tcp reset needs an earlier `meta l4proto tcp` match"},
		{"no-op mark set", rule(Rule{Action: SetMark{And: 0xffffffff}}),
			`chain "filter-tw-cali12ab": rule 3: mark set that changes nothing (And 0xffffffff, Xor 0)`},
		{"limit rate zero", rule(Rule{Match: []Match{Limit{}}}), `chain "filter-tw-cali12ab": rule 3: match 1: limit rate 0`},
		{"too many key fields", rule(Rule{Match: []Match{Lookup{Keys: []Selector{SelMark, SelMark, SelMark, SelMark, SelMark, SelMark}, Set: "x"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: key of 6 fields, more than 5`},
		{"key too long", rule(Rule{Match: []Match{Lookup{Keys: []Selector{SelIIFName, SelOIFName, SelIP6Saddr, SelIP6Daddr, SelMark}, Set: "x"}}}),
			`chain "filter-tw-cali12ab": rule 3: match 1: key [iifname oifname ip6 saddr ip6 daddr meta mark] is 68 bytes, more than 64`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateChain(validateFixture(), tc.chain)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("no error, want %q", tc.err)
			case err != nil:
				if err.Error() != tc.err {
					t.Errorf("error\n got: %s\nwant: %s", err, tc.err)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
				}
			}
		})
	}
}

func TestValidateARPFamily(t *testing.T) {
	m := NewModel(FamilyARP, "arp")
	m.SetSet(&Set{Name: "s", Key: []KeyType{TypeIfName}})
	m.SetSet(&Set{Name: "marks", Key: []KeyType{TypeMark}, Data: DataVerdict})
	ok := &Chain{Name: "in", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput}, Rules: []*Rule{
		{Match: []Match{IfName{Dir: In, Name: "cali1"}, Lookup{Keys: []Selector{SelIIFName}, Set: "s"}}, Action: Verdict{Kind: Drop}},
		{Match: []Match{IfName{Dir: Out, Name: "cali1"}, ARPOperation{Op: ARPOpReply}, ARPSenderIP{Addr: netip.MustParseAddr("10.0.0.1")}}, Action: Verdict{Kind: Drop}},
		{Action: VMap{Key: SelMark, Map: "marks", Mask: 0xff00}},
	}}
	if err := validateChain(m, ok); err != nil {
		t.Errorf("valid arp chain: %v", err)
	}
	for _, tc := range []struct {
		chain *Chain
		err   string
	}{
		{&Chain{Name: "fwd", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookForward}}, `chain "fwd": hook "forward" is not valid in family arp`},
		{&Chain{Name: "c", Rules: []*Rule{{Match: []Match{CtStateMatch{States: CtStateNew}}}}}, `chain "c": rule 1: match 1: nft.CtStateMatch does not apply to the arp family`},
		{&Chain{Name: "c", Rules: []*Rule{{Action: Reject{}}}}, `chain "c": rule 1: nft.Reject does not apply to the arp family`},
		{&Chain{Name: "c", Rules: []*Rule{{Match: []Match{ARPSenderIP{Addr: netip.MustParseAddr("fd00::1")}}}}},
			`chain "c": rule 1: match 1: arp sender address fd00::1 is not an IPv4 address`},
		{&Chain{Name: "c", Rules: []*Rule{{Match: []Match{ARPSenderIP{Addr: netip.MustParseAddr("::ffff:10.0.0.1")}}}}},
			`chain "c": rule 1: match 1: arp sender address ::ffff:10.0.0.1 is not an IPv4 address`},
		{&Chain{Name: "c", Rules: []*Rule{{Match: []Match{ARPSenderIP{}}}}},
			`chain "c": rule 1: match 1: arp sender address invalid IP is not an IPv4 address`},
	} {
		if err := validateChain(m, tc.chain); err == nil || err.Error() != tc.err {
			t.Errorf("validateChain = %v, want %q", err, tc.err)
		}
	}
}

func TestValidateChainWithoutModel(t *testing.T) {
	c := &Chain{Name: "c", Rules: []*Rule{{Action: Verdict{Kind: Jump, Chain: "anywhere"}}, {Action: VMap{Key: SelIIFName, Map: "m"}}}}
	if err := validateChain(nil, c); err != nil {
		t.Errorf("validateChain(nil, c) = %v, want nil: references are not checked without a model", err)
	}
}

func TestValidateSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *Set
		err  string
	}{
		{"valid concat interval", &Set{Name: "rpf", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true, Elements: map[string]Element{
			"cali* . 10.0.0.0/8": {Key: "cali* . 10.0.0.0/8"}}}, ""},
		{"no key", &Set{Name: "s"}, `set "s": no key type`},
		{"unknown key type", &Set{Name: "s", Key: []KeyType{"ether_addr"}}, `set "s": unknown key type "ether_addr"`},
		{"interval marks", &Set{Name: "s", Key: []KeyType{TypeMark}, Interval: true}, `set "s": flags interval on a set of mark`},
		{"key too long", &Set{Name: "s", Key: []KeyType{TypeIfName, TypeIfName, TypeIPv6Addr, TypeIPv6Addr, TypeMark}},
			`set "s": key type ifname . ifname . ipv6_addr . ipv6_addr . mark is 68 bytes, more than 64`},
		{"bad data type", &Set{Name: "s", Key: []KeyType{TypeMark}, Data: "counter"}, `set "s": unknown data type "counter"`},
		{"comment too long", &Set{Name: "s", Key: []KeyType{TypeMark}, Comment: strings.Repeat("x", 200)}, `set "s": comment is 200 bytes, more than 128`},
		{"stored under another key", &Set{Name: "s", Key: []KeyType{TypeIPv4Addr}, Elements: map[string]Element{"10.0.0.1": {Key: "10.0.0.2"}}},
			`set "s": element "10.0.0.2" is stored under key "10.0.0.1"`},
		{"overlap", &Set{Name: "s", Key: []KeyType{TypeIPv4Addr}, Interval: true, Elements: map[string]Element{
			"10.0.0.0/8": {Key: "10.0.0.0/8"}, "10.1.2.3": {Key: "10.1.2.3"}}},
			`set "s": elements "10.0.0.0/8" and "10.1.2.3" overlap`},
		{"concat overlap", &Set{Name: "rpf", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true, Elements: map[string]Element{
			"a . 10.0.0.0/8": {Key: "a . 10.0.0.0/8"}, "a . 10.1.0.0/16": {Key: "a . 10.1.0.0/16"}, "b . 10.1.0.0/16": {Key: "b . 10.1.0.0/16"}}},
			`set "rpf": elements "a . 10.0.0.0/8" and "a . 10.1.0.0/16" overlap`},
		{"concat overlap through a wildcard", &Set{Name: "rpf", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true, Elements: map[string]Element{
			"cali1 . 10.0.0.1": {Key: "cali1 . 10.0.0.1"}, "ca* . 10.0.0.0/24": {Key: "ca* . 10.0.0.0/24"}}},
			`set "rpf": elements "ca* . 10.0.0.0/24" and "cali1 . 10.0.0.1" overlap`},
		{"concat disjoint in one field", &Set{Name: "svc", Key: []KeyType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Interval: true, Elements: map[string]Element{
			"10.0.0.0/8 . tcp . 80-90": {Key: "10.0.0.0/8 . tcp . 80-90"}, "10.0.0.0/8 . udp . 80-90": {Key: "10.0.0.0/8 . udp . 80-90"},
			"10.1.0.0/16 . tcp . 91-100": {Key: "10.1.0.0/16 . tcp . 91-100"}}}, ""},
		{"concat overlap in every field", &Set{Name: "svc", Key: []KeyType{TypeIPv4Addr, TypeInetProto, TypeInetService}, Interval: true, Elements: map[string]Element{
			"10.0.0.0/8 . tcp . 80-90": {Key: "10.0.0.0/8 . tcp . 80-90"}, "10.1.0.0/16 . tcp . 90-100": {Key: "10.1.0.0/16 . tcp . 90-100"}}},
			`set "svc": elements "10.0.0.0/8 . tcp . 80-90" and "10.1.0.0/16 . tcp . 90-100" overlap`},
		{"bad element", &Set{Name: "s", Key: []KeyType{TypeIPv4Addr}, Elements: map[string]Element{"10.0.0.0/8": {Key: "10.0.0.0/8"}}},
			`set "s": element "10.0.0.0/8": field 1 is a range, prefix or wildcard, but the set has no interval flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateSet(nil, tc.set)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("no error, want %q", tc.err)
			case err != nil && err.Error() != tc.err:
				t.Errorf("error\n got: %s\nwant: %s", err, tc.err)
			}
		})
	}
}

func TestValidateElement(t *testing.T) {
	m := validateFixture()
	vmap := m.Set("from-wl")
	marks := m.Set("ep-mark")
	rpf := m.Set("rpf")
	v4 := m.Set("v4")
	svc := &Set{Name: "svc", Key: []KeyType{TypeIPv4Addr, TypeInetProto, TypeInetService}}
	for _, tc := range []struct {
		name string
		set  *Set
		elem Element
		err  string
	}{
		{"vmap jump", vmap, Element{Key: "cali1", Verdict: &Verdict{Kind: Jump, Chain: "filter-pi-default.allow"}}, ""},
		{"vmap without verdict", vmap, Element{Key: "cali1"}, `set "from-wl": element "cali1": verdict map element without a verdict`},
		{"vmap to unknown chain", vmap, Element{Key: "cali1", Verdict: &Verdict{Kind: Goto, Chain: "nope"}},
			`set "from-wl": element "cali1": goto to unknown chain "nope"`},
		{"vmap to base chain", vmap, Element{Key: "cali1", Verdict: &Verdict{Kind: Jump, Chain: "filter-input"}},
			`set "from-wl": element "cali1": jump to base chain "filter-input"`},
		{"name too long", vmap, Element{Key: "cali0123456789abc", Verdict: &Verdict{Kind: Drop}},
			`set "from-wl": element "cali0123456789abc": interface name "cali0123456789abc" is 17 bytes, more than 15`},
		{"wildcard in a hash map", vmap, Element{Key: "cali*", Verdict: &Verdict{Kind: Drop}},
			`set "from-wl": element "cali*": field 1 is a range, prefix or wildcard, but the set has no interval flag`},
		{"mark map with verdict", marks, Element{Key: "cali1", Verdict: &Verdict{Kind: Drop}},
			`set "ep-mark": element "cali1": mark map element with a verdict`},
		{"mark map", marks, Element{Key: "cali1", Mark: 0x10}, ""},
		{"set element with value", v4, Element{Key: "10.0.0.1", Mark: 1}, `set "v4": element "10.0.0.1": set element with a value`},
		{"not canonical prefix", v4, Element{Key: "10.0.0.1/32"}, `set "v4": element "10.0.0.1/32": key is not canonical: nft prints it as "10.0.0.1"`},
		{"not canonical range", v4, Element{Key: "10.0.0.0-10.0.0.255"}, `set "v4": element "10.0.0.0-10.0.0.255": key is not canonical: nft prints it as "10.0.0.0/24"`},
		{"host bits", v4, Element{Key: "10.0.0.1/24"}, `set "v4": element "10.0.0.1/24": prefix 10.0.0.1/24 has host bits set (want 10.0.0.0/24)`},
		{"wrong family", v4, Element{Key: "fd00::1"}, `set "v4": element "fd00::1": address fd00::1 is not of type ipv4_addr`},
		{"too few fields", rpf, Element{Key: "cali1"}, `set "rpf": element "cali1": key has 1 fields, the set's type ifname . ipv4_addr has 2`},
		{"concat canonical", rpf, Element{Key: "cali1 . 10.65.0.7"}, ""},
		{"concat not canonical", rpf, Element{Key: "cali1 . 10.65.0.7/32"}, `set "rpf": element "cali1 . 10.65.0.7/32": key is not canonical: nft prints it as "cali1 . 10.65.0.7"`},
		{"protocol by number", svc, Element{Key: "10.0.0.1 . 6 . 80"}, `set "svc": element "10.0.0.1 . 6 . 80": key is not canonical: nft prints it as "10.0.0.1 . tcp . 80"`},
		{"protocol by name", svc, Element{Key: "10.0.0.1 . tcp . 80"}, ""},
		{"bad port", svc, Element{Key: "10.0.0.1 . tcp . 70000"}, `set "svc": element "10.0.0.1 . tcp . 70000": bad port "70000"`},
		{"comment", v4, Element{Key: "10.0.0.1", Comment: "a\nb"}, `set "v4": element "10.0.0.1": comment "a\nb" has character '\n', which nft cannot print back`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateElement(m, tc.set, tc.elem)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && err == nil:
				t.Fatalf("no error, want %q", tc.err)
			case err != nil:
				if err.Error() != tc.err {
					t.Errorf("error\n got: %s\nwant: %s", err, tc.err)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
				}
			}
		})
	}
}

func TestValidateVocabModel(t *testing.T) {
	if err := vocabModel("nftep").Validate(); err != nil {
		t.Errorf("vocabModel: %v", err)
	}
	m := vocabModel("nftep")
	m.SetElement("filter-from-wl", Element{Key: "cali9", Verdict: &Verdict{Kind: Jump, Chain: "raw-prerouting"}})
	if err := m.Validate(); err == nil || err.Error() != `set "filter-from-wl": element "cali9": jump to base chain "raw-prerouting"` {
		t.Errorf("Validate with a jump to a base chain = %v", err)
	}
}

// TestValidateIfNameErrorBytes checks that the error names the offending
// byte as it is: a non-ASCII byte in hex, not as the Latin-1 letter of its
// value ('Ã' for the first byte of "é").
func TestValidateIfNameErrorBytes(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"calié", `interface name "calié" has byte '\xc3'`},
		{"cali\xff", `interface name "cali\xff" has byte '\xff'`},
		{"cali\u00a0x", `interface name "cali\u00a0x" has byte '\xc2'`},
		{"cali*", `interface name "cali*" has character '*'`},
		{"cali\tx", `interface name "cali\tx" has character '\t'`},
		{"cali\x7f", `interface name "cali\x7f" has character '\x7f'`},
		{`cali"x`, `interface name "cali\"x" has character '"'`},
		{`cali\x`, `interface name "cali\\x" has character '\\'`},
	} {
		err := ValidateIfName(tc.name)
		if err == nil || err.Error() != tc.want {
			t.Errorf("ValidateIfName(%q) = %v, want %s", tc.name, err, tc.want)
		}
		if err != nil && strings.ContainsAny(err.Error(), "ÃÂÿ") {
			t.Errorf("ValidateIfName(%q) = %v: a byte printed as a Latin-1 letter", tc.name, err)
		}
	}
	if err := ValidateName("filter-é"); err == nil || err.Error() != `name "filter-é" has byte '\xc3', which nft would quote` {
		t.Errorf("ValidateName(%q) = %v", "filter-é", err)
	}
}

func TestExportedChecks(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"cali12ab", true}, {"eth0.100", true}, {"", false}, {"cali0123456789ab", false}, {"cali*", false}, {"a b", false}, {"a:b", false}, {"é", false}} {
		err := ValidateIfName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateIfName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateIfName(%q): %v is not ErrInvalid", tc.name, err)
		}
		// The same check as an IfName match in a rule.
		m := validateFixture()
		c := &Chain{Name: "c", Rules: []*Rule{{Match: []Match{IfName{Dir: In, Name: tc.name}}, Action: Verdict{Kind: Accept}}}}
		if (validateChain(m, c) == nil) != tc.ok {
			t.Errorf("ValidateIfName(%q) disagrees with validateChain", tc.name)
		}
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"filter-pi-default.allow", true}, {"x", true}, {"1x", false}, {"a b", false}, {"", false}} {
		if err := ValidateName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestSanitizeComment(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"pod default/web-0", "pod default/web-0"},
		{`say "hi" \o/`, `say _hi_ _o/`},
		{"a\tb\nc\x7fd\x00", "a_b_c_d_"},
		{"bad\xffutf8", "bad_utf8"},
		{"ünïcödé ok", "ünïcödé ok"},
		{strings.Repeat("x", 200), strings.Repeat("x", 128)},
		{"x" + long, "x" + strings.Repeat("é", 63)}, // 127 bytes: the 64th é would split at 128
	} {
		got := SanitizeComment(tc.in)
		if got != tc.want {
			t.Errorf("SanitizeComment(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if err := checkText("comment", got, maxCommentLen); err != nil {
			t.Errorf("SanitizeComment(%q) = %q, refused: %v", tc.in, got, err)
		}
		if !utf8.ValidString(got) {
			t.Errorf("SanitizeComment(%q) = %q is not valid UTF-8", tc.in, got)
		}
	}
}
