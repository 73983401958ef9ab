package dataplane

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/policy"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/routes"
)

// The tests in this file run tricky Felix strings through every consumer
// of Felix input and want one verdict, and one meaning, from all of them:
//
//   - the state-file checker (NewSnapshot), which refuses the file;
//   - the endpoint manager, which refuses the endpoint (error status) or
//     programs it (its ARP rules and RPF-skip elements show the values);
//   - the policy manager, which leaves a bad IP-set member out of its set,
//     and fails a policy with a bad rule CIDR closed;
//   - render, given only the endpoint's strings, which renders what parses.
//
// All of them parse through package felix; these tests keep it that way.

// fiWepID is the workload endpoint of these tests.
var fiWepID = &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "ns/pod", EndpointId: "eth0"}

const fiIface = "cali1"

func fiEnvelope(t *testing.T, msg gproto.Message) *proto.ToDataplane {
	t.Helper()
	switch m := msg.(type) {
	case *proto.WorkloadEndpointUpdate:
		return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: m}}
	case *proto.IPSetUpdate:
		return &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: m}}
	case *proto.ActivePolicyUpdate:
		return &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: m}}
	}
	t.Fatalf("fiEnvelope: %T", msg)
	return nil
}

// fiStateFile is the state-file checker's verdict on msgs.
func fiStateFile(t *testing.T, msgs ...gproto.Message) error {
	sf := &StateFile{Path: "felixinput.yaml"}
	for _, m := range msgs {
		sf.Updates = append(sf.Updates, fiEnvelope(t, m))
	}
	_, err := NewSnapshot(sf)
	return err
}

// fiEngine runs msgs through the endpoint and policy managers (a dry run:
// the models are validated as nft.Table would before sending them).
func fiEngine(t *testing.T, msgs ...any) *engine {
	t.Helper()
	cfg, err := ParseConfig(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(cfg, dryKernel{}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.update(routes.InterfaceStateUpdate{Name: fiIface, State: routes.IfaceUp, Index: 5})
	for _, m := range msgs {
		e.update(m)
	}
	if err := e.compute(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.program(context.Background(), false, false); err != nil {
		t.Fatalf("the managers wrote a table nft would refuse: %v", err)
	}
	return e
}

// fiStatus is the endpoint manager's status of the test's workload.
func fiStatus(t *testing.T, e *engine) endpoints.EndpointStatus {
	t.Helper()
	for _, s := range e.eps.Statuses() {
		if s.ID == "k8s/ns/pod/eth0" {
			return s
		}
	}
	t.Fatal("no status for the workload")
	return endpoints.EndpointStatus{}
}

func fiWep(ep *proto.WorkloadEndpoint) *proto.WorkloadEndpointUpdate {
	if ep.Name == "" {
		ep.Name = fiIface
	}
	ep.State = "active"
	return &proto.WorkloadEndpointUpdate{Id: fiWepID, Endpoint: ep}
}

func fiPolicy(name string, rules ...*proto.Rule) *proto.ActivePolicyUpdate {
	return &proto.ActivePolicyUpdate{
		Id:     &proto.PolicyID{Name: name},
		Policy: &proto.Policy{Tier: "default", InboundRules: rules},
	}
}

// fiWepWithPolicies is a good workload whose ingress runs names.
func fiWepWithPolicies(names ...string) *proto.WorkloadEndpointUpdate {
	tier := &proto.TierInfo{Name: "default"}
	for _, n := range names {
		tier.IngressPolicies = append(tier.IngressPolicies, &proto.PolicyID{Name: n})
	}
	return fiWep(&proto.WorkloadEndpoint{Ipv4Nets: []string{"10.65.0.1/32"}, Tiers: []*proto.TierInfo{tier}})
}

func fiHasElement(m *nft.Model, set, key string) bool {
	s := m.Set(set)
	if s == nil {
		return false
	}
	_, ok := s.Elements[key]
	return ok
}

func fiPrefixKey(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

func verdict(err error) string {
	if err != nil {
		return "refused: " + err.Error()
	}
	return "accepted"
}

// TestFelixInputCIDRsOneVerdict: a CIDR is accepted or refused alike in a
// workload's nets, its allowed spoofed prefixes, a NET IP set and a rule's
// nets, by every consumer, and means the same thing to each.
func TestFelixInputCIDRsOneVerdict(t *testing.T) {
	v4, v6 := felix.IPv4, felix.IPv6
	for _, tc := range []struct {
		in string
		// list is the workload field the string goes in: ipv4Nets or
		// ipv6Nets.
		list felix.Family
		// ok: the string is a CIDR of list's family; anyOK: of either
		// (allowSpoofedSourcePrefixes, IP sets and rules take both).
		ok, anyOK bool
		// host is the parsed CIDR with its host bits, net masked.
		host, net string
	}{
		{"10.0.0.1/24", v4, true, true, "10.0.0.1/24", "10.0.0.0/24"},
		{"10.0.0.1", v4, true, true, "10.0.0.1/32", "10.0.0.1/32"},
		{"::ffff:10.0.0.1", v4, true, true, "10.0.0.1/32", "10.0.0.1/32"},
		{"::ffff:10.0.0.0/104", v4, true, true, "10.0.0.0/8", "10.0.0.0/8"},
		{"::ffff:10.0.0.7/120", v4, true, true, "10.0.0.7/24", "10.0.0.0/24"},
		{"::ffff:10.0.0.0/95", v6, true, true, "::ffff:10.0.0.0/95", "::fffe:0:0/95"},
		{"fd00::1/64", v6, true, true, "fd00::1/64", "fd00::/64"},
		{"fd00::1", v6, true, true, "fd00::1/128", "fd00::1/128"},
		// Right string, wrong list: refused where the list says the
		// family, accepted where both are taken.
		{"::ffff:10.0.0.1", v6, false, true, "10.0.0.1/32", "10.0.0.1/32"},
		{"fd00::1/128", v4, false, true, "fd00::1/128", "fd00::1/128"},
		// Not CIDRs anywhere.
		{"10.0.0.0/33", v4, false, false, "", ""},
		{"10.0.0.300", v4, false, false, "", ""},
		{"fe80::1%eth0", v6, false, false, "", ""},
		{" 10.0.0.1", v4, false, false, "", ""},
		{"10.0.0.1,tcp:80", v4, false, false, "", ""},
		{"", v4, false, false, "", ""},
	} {
		t.Run(tc.list.String()+" "+tc.in, func(t *testing.T) {
			var host, net netip.Prefix
			if tc.anyOK {
				host, net = netip.MustParsePrefix(tc.host), netip.MustParsePrefix(tc.net)
			}
			inList := func(ep *proto.WorkloadEndpoint) *proto.WorkloadEndpoint {
				if tc.list == v4 {
					ep.Ipv4Nets = []string{tc.in}
				} else {
					ep.Ipv6Nets = []string{tc.in}
				}
				return ep
			}
			want := func(what string, ok bool, got error) {
				t.Helper()
				if (got == nil) != ok {
					t.Errorf("%s: %s, want %s", what, verdict(got), map[bool]string{true: "accepted", false: "refused"}[ok])
				}
			}
			check := func(what string, ok, got bool) {
				t.Helper()
				if ok != got {
					t.Errorf("%s: %v, want %v", what, got, ok)
				}
			}

			// The package itself.
			p, err := felix.ParseCIDR(tc.in)
			want("felix.ParseCIDR", tc.anyOK, err)
			if err == nil && p != host {
				t.Errorf("felix.ParseCIDR = %v, want %v", p, host)
			}

			// The state-file checker.
			want("state file: workload nets", tc.ok, fiStateFile(t, fiWep(inList(&proto.WorkloadEndpoint{}))))
			want("state file: allowSpoofedSourcePrefixes", tc.anyOK,
				fiStateFile(t, fiWep(&proto.WorkloadEndpoint{AllowSpoofedSourcePrefixes: []string{tc.in}})))
			want("state file: NET set member", tc.anyOK,
				fiStateFile(t, &proto.IPSetUpdate{Id: "s:t", Type: proto.IPSetUpdate_NET, Members: []string{tc.in}}))
			want("state file: rule srcNet", tc.anyOK, fiStateFile(t, fiPolicy("p", &proto.Rule{Action: "allow", SrcNet: []string{tc.in}})))

			// The endpoint manager: the endpoint's status, and the ARP
			// element (host bits kept) or RPF-skip element (masked) it
			// programs.
			e := fiEngine(t, fiWep(inList(&proto.WorkloadEndpoint{})))
			st := fiStatus(t, e)
			check("endpoint manager: workload nets accepted (status "+st.Status+" "+st.Reason+")", tc.ok, st.Status != endpoints.StatusError)
			arpRule := `"cali1" . ` + host.Addr().String() + ` comment`
			if tc.ok && host.Addr().Is4() {
				if !strings.Contains(e.arp.Desired().String(), arpRule) {
					t.Errorf("endpoint manager: no %q in the ARP table:\n%s", arpRule, e.arp.Desired())
				}
			}
			e = fiEngine(t, fiWep(&proto.WorkloadEndpoint{AllowSpoofedSourcePrefixes: []string{tc.in}}))
			st = fiStatus(t, e)
			check("endpoint manager: allowSpoofedSourcePrefixes accepted ("+st.Reason+")", tc.anyOK, st.Status != endpoints.StatusError)
			rpfSet := render.SetRPFSkipV4
			if net.Addr().Is6() {
				rpfSet = render.SetRPFSkipV6
			}
			rpfKey := fiIface + " . " + fiPrefixKey(net)
			if tc.anyOK {
				check("endpoint manager: RPF-skip element "+rpfKey, true, fiHasElement(e.inet.Desired(), rpfSet, rpfKey))
			}

			// The policy manager: the member is in the set or left out;
			// the rule is rendered or its policy fails closed.
			e = fiEngine(t,
				&proto.IPSetUpdate{Id: "s:t", Type: proto.IPSetUpdate_NET, Members: []string{tc.in}},
				fiPolicy("p-set", &proto.Rule{Action: "allow", SrcIpSetIds: []string{"s:t"}}),
				fiPolicy("p-net", &proto.Rule{Action: "allow", SrcNet: []string{tc.in}}),
				fiWepWithPolicies("p-set", "p-net"))
			fam := nft.IPv4
			if net.Addr().Is6() {
				fam = nft.IPv6
			}
			if tc.anyOK {
				check("policy manager: NET member "+fiPrefixKey(net), true, fiHasElement(e.inet.Desired(), policy.IPSetName("s:t", fam), fiPrefixKey(net)))
			} else {
				for _, f := range []nft.IPFamily{nft.IPv4, nft.IPv6} {
					if s := e.inet.Desired().Set(policy.IPSetName("s:t", f)); s == nil || len(s.Elements) != 0 {
						t.Errorf("policy manager: set %s should be there, empty: %v", policy.IPSetName("s:t", f), s)
					}
				}
			}
			pnet := e.inet.Desired().Chain(render.PolicyChainName(render.LayerFilter, render.Ingress, "default", &proto.PolicyID{Name: "p-net"}))
			if pnet == nil {
				t.Fatal("policy manager: no chain for p-net")
			}
			failedClosed := strings.Contains(pnet.Rules[0].Comment, "fail closed")
			check("policy manager: rule srcNet rendered", tc.anyOK, !failedClosed)
			if tc.anyOK && !strings.Contains(e.inet.Desired().String(), " saddr "+fiPrefixKey(net)+" ") {
				t.Errorf("policy manager: no match on %s:\n%s", fiPrefixKey(net), e.inet.Desired())
			}

			// render, given only the strings: it renders what parses,
			// with the same meaning.
			out := render.Workload(render.DefaultConfig(), render.WorkloadInput{ID: fiWepID,
				Endpoint: fiWep(inList(&proto.WorkloadEndpoint{AllowSpoofedSourcePrefixes: []string{tc.in}})).Endpoint})
			var arp, rpf bool
			for _, e := range out.ARPElements {
				if strings.HasSuffix(e.Elem.Key, " . "+host.Addr().String()) {
					arp = true
				}
			}
			for _, el := range out.Elements {
				if el.Set == rpfSet && el.Elem.Key == rpfKey {
					rpf = true
				}
			}
			check("render: ARP rule for "+host.Addr().String(), tc.ok && host.Addr().Is4(), arp)
			check("render: RPF-skip element "+rpfKey, tc.anyOK, rpf)
		})
	}
}

// TestFelixInputMembersOneVerdict: an IP-set member is accepted by the
// state-file checker exactly when the policy manager puts it in its set,
// as the element felix.ParseMember says.
func TestFelixInputMembersOneVerdict(t *testing.T) {
	ipp, ip, netT := proto.IPSetUpdate_IP_AND_PORT, proto.IPSetUpdate_IP, proto.IPSetUpdate_NET
	for _, tc := range []struct {
		typ proto.IPSetUpdate_IPSetType
		in  string
		// key is the element in the set of family fam; "" means refused.
		key string
		fam nft.IPFamily
	}{
		{ipp, "10.0.0.1,tcp:80", "10.0.0.1 . tcp . 80", nft.IPv4},
		{ipp, "10.0.0.1/32,tcp:80", "10.0.0.1 . tcp . 80", nft.IPv4},
		{ipp, "fd00::1,udp:53", "fd00::1 . udp . 53", nft.IPv6},
		{ipp, "fd00::1/128,sctp:9", "fd00::1 . sctp . 9", nft.IPv6},
		{ipp, "::ffff:10.0.0.1,TCP:80", "10.0.0.1 . tcp . 80", nft.IPv4},
		{ipp, "10.0.0.0/24,tcp:80", "", 0},
		{ipp, "10.0.0.1,icmp:1", "", 0},
		{ipp, "10.0.0.1,tcp:99999", "", 0},
		{ipp, "10.0.0.1,tcp:", "", 0},
		{ipp, "10.0.0.1:80", "", 0},
		{ipp, "10.0.0.1,tcp", "", 0},
		{ipp, "[fd00::1],tcp:80", "", 0},
		{ipp, "fe80::1%eth0,tcp:80", "", 0},
		{ip, "10.0.0.1/32", "10.0.0.1", nft.IPv4},
		{ip, "::ffff:10.0.0.1", "10.0.0.1", nft.IPv4},
		{ip, "10.0.0.0/24", "", 0},
		{netT, "10.0.0.1/24", "10.0.0.0/24", nft.IPv4},
		{netT, "::ffff:10.0.0.0/104", "10.0.0.0/8", nft.IPv4},
		{netT, "10.0.0.1,tcp:80", "", 0},
	} {
		t.Run(tc.typ.String()+" "+tc.in, func(t *testing.T) {
			ok := tc.key != ""
			set := &proto.IPSetUpdate{Id: "s:t", Type: tc.typ, Members: []string{tc.in}}
			if err := fiStateFile(t, set); (err == nil) != ok {
				t.Errorf("state file: %s, want accepted=%v", verdict(err), ok)
			}
			_, err := felix.ParseMember(tc.typ, tc.in)
			if (err == nil) != ok {
				t.Errorf("felix.ParseMember: %s, want accepted=%v", verdict(err), ok)
			}
			rule := &proto.Rule{Action: "allow", SrcIpSetIds: []string{"s:t"}}
			if tc.typ == ipp {
				rule = &proto.Rule{Action: "allow", Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}}, DstIpPortSetIds: []string{"s:t"}}
			}
			e := fiEngine(t, set, fiPolicy("p", rule), fiWepWithPolicies("p"))
			var n int
			for _, f := range []nft.IPFamily{nft.IPv4, nft.IPv6} {
				s := e.inet.Desired().Set(policy.IPSetName("s:t", f))
				if s == nil {
					t.Fatalf("policy manager: no set %s", policy.IPSetName("s:t", f))
				}
				n += len(s.Elements)
			}
			if ok && !fiHasElement(e.inet.Desired(), policy.IPSetName("s:t", tc.fam), tc.key) {
				t.Errorf("policy manager: no element %q in the %v set", tc.key, tc.fam)
			}
			if !ok && n != 0 {
				t.Errorf("policy manager: the refused member made %d elements", n)
			}
		})
	}
}

// TestFelixInputEndpointFieldsOneVerdict: interface names and MACs get one
// verdict from the state-file checker and the endpoint manager, and a name
// they accept is one nft's own validator accepts.
func TestFelixInputEndpointFieldsOneVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		ep   *proto.WorkloadEndpoint
		ok   bool
	}{
		{"name of 15 bytes", &proto.WorkloadEndpoint{Name: "cali0123456789a"}, true},
		{"name of 16 bytes", &proto.WorkloadEndpoint{Name: "cali0123456789ab"}, false},
		{"name with a quote", &proto.WorkloadEndpoint{Name: `cali"x`}, false},
		{"name with a newline", &proto.WorkloadEndpoint{Name: "cali\nx"}, false},
		{"name with a colon", &proto.WorkloadEndpoint{Name: "cali:1"}, false},
		{"non-ASCII name", &proto.WorkloadEndpoint{Name: "calié"}, false},
		{"MAC", &proto.WorkloadEndpoint{Mac: "02:00:0a:41:00:01"}, true},
		{"short MAC", &proto.WorkloadEndpoint{Mac: "02:00:0a:41:00"}, false},
		{"NAT IP", &proto.WorkloadEndpoint{Ipv4Nat: []*proto.NatInfo{{ExtIp: "::ffff:172.16.0.1", IntIp: "10.65.0.1"}}}, true},
		{"NAT IP of the other family", &proto.WorkloadEndpoint{Ipv4Nat: []*proto.NatInfo{{ExtIp: "fd00::1", IntIp: "10.65.0.1"}}}, false},
		{"empty lists", &proto.WorkloadEndpoint{Ipv4Nets: []string{}, Ipv6Nets: nil, AllowSpoofedSourcePrefixes: []string{}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.ep.Name
			wep := fiWep(tc.ep)
			if err := fiStateFile(t, wep); (err == nil) != tc.ok {
				t.Errorf("state file: %s, want accepted=%v", verdict(err), tc.ok)
			}
			e := fiEngine(t, routes.InterfaceStateUpdate{Name: wep.Endpoint.Name, State: routes.IfaceUp, Index: 6}, wep)
			if st := fiStatus(t, e); (st.Status != endpoints.StatusError) != tc.ok {
				t.Errorf("endpoint manager: status %s %q, want accepted=%v", st.Status, st.Reason, tc.ok)
			}
			if name != "" {
				if err := nft.ValidateIfName(name); (err == nil) != tc.ok {
					t.Errorf("nft.ValidateIfName: %s, want accepted=%v", verdict(err), tc.ok)
				}
			}
		})
	}
}

// TestFelixInputCommentsOneSanitiser: names with quotes and newlines reach
// comments through one sanitiser, nft.SanitizeComment, whether render
// (endpoint IDs) or the policy manager (policy names) writes them, and the
// table they make is one nft accepts.
func TestFelixInputCommentsOneSanitiser(t *testing.T) {
	id := &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "ns/po\"d\nx", EndpointId: `eth\0`}
	pol := "p\"q\nr"
	tier := &proto.TierInfo{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: pol}}}
	wep := &proto.WorkloadEndpointUpdate{Id: id, Endpoint: &proto.WorkloadEndpoint{State: "active", Name: fiIface, Tiers: []*proto.TierInfo{tier}}}
	polMsg := fiPolicy(pol, &proto.Rule{Action: "allow", SrcNet: []string{"10.0.0.0/8"}})
	if err := fiStateFile(t, polMsg, wep); err != nil {
		t.Errorf("state file: %v", err)
	}
	e := fiEngine(t, polMsg, wep)
	text := e.inet.Desired().String()
	for _, want := range []string{
		nft.SanitizeComment("endpoint k8s/ns/po\"d\nx/eth\\0"), // render
		nft.SanitizeComment("policy default/p\"q\nr inbound"),  // the policy manager
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no comment with %q in:\n%s", want, text)
		}
	}
	for _, name := range e.inet.Desired().ChainNames() {
		c := e.inet.Desired().Chain(name)
		for _, s := range append([]string{c.Comment}, ruleComments(c)...) {
			if s != nft.SanitizeComment(s) {
				t.Errorf("chain %s: comment %q was not sanitised", name, s)
			}
		}
	}
}

func ruleComments(c *nft.Chain) []string {
	var out []string
	for _, r := range c.Rules {
		out = append(out, r.Comment)
	}
	return out
}
