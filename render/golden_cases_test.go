package render

import (
	"fmt"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// goldenCase is one rendering case: a configuration, what to render, and
// the nft text it must print. The same cases are loaded into a kernel
// table by TestGoldensLoadInKernel.
type goldenCase struct {
	name string
	line string
	// config adjusts the default configuration.
	config func(*Config)
	// render returns the outputs and any extra chains (dispatch chains
	// for a "*" state) the case prints.
	render func(cfg Config) ([]Output, []*nft.Chain)
	// arp prints the arp table's chains and elements too.
	arp bool
}

// specMarks are the marks of Felix's own tests (accept 0x8, pass 0x10,
// scratch0 0x20, scratch1 0x40, drop 0x80, endpoint field 0xff00, non-Calico
// 0x100), used where a case checks endpoint-mark values against the marks
// Felix's tests expect.
func specMarks(cfg *Config) {
	cfg.MarkMask = 0xfff8
	cfg.Marks = Marks{Accept: 0x8, Pass: 0x10, Scratch0: 0x20, Scratch1: 0x40, Drop: 0x80, Endpoint: 0xff00, NonCali: 0x100}
}

func fullyLoaded() *proto.WorkloadEndpoint {
	ep := wep("cali1234", "10.65.0.2",
		tier("default", pols(gnp("ai"), gnp("bi")), pols(gnp("ae"), gnp("be"))))
	ep.ProfileIds = []string{"prof1", "prof2"}
	return ep
}

// ownSelector gives every policy a selector of its own.
func ownSelector(id *proto.PolicyID) (string, bool) { return "name == '" + id.GetName() + "'", true }

func one(o Output) ([]Output, []*nft.Chain) { return []Output{o}, nil }

func hep(id string, ep *proto.HostEndpoint) func(Config) ([]Output, []*nft.Chain) {
	return func(cfg Config) ([]Output, []*nft.Chain) {
		return one(Host(cfg, HostInput{ID: id, Interface: "eth0", Endpoint: ep}))
	}
}

func wl(pod string, ep *proto.WorkloadEndpoint) func(Config) ([]Output, []*nft.Chain) {
	return func(cfg Config) ([]Output, []*nft.Chain) {
		return one(Workload(cfg, WorkloadInput{ID: wlID("default", pod), Endpoint: ep}))
	}
}

var goldenCases = []goldenCase{}

// The cases: acceptance cases 41–53 (docs/acceptance-cases.md), adapted to
// verdict-map dispatch, and host endpoint cases 3, 7, 8 and 9 (named
// "10.1-N"). Their wanted text is in testdata/<case>.nft (see goldenFile).
func goldenCaseList() []goldenCase {
	withProfiles := func(ep *proto.WorkloadEndpoint, ps ...string) *proto.WorkloadEndpoint {
		ep.ProfileIds = ps
		return ep
	}
	tierA := func() []*proto.TierInfo {
		return []*proto.TierInfo{tier("tierA", pols(gnp("polA")), pols(gnp("polA")))}
	}
	return []goldenCase{
		{name: "41 minimal workload", line: getLine(),
			render: wl("pod-1", wep("cali1234", "10.65.0.2"))},
		{name: "41 minimal workload with endpoint marks", line: getLine(),
			config: func(c *Config) { specMarks(c); c.EndpointMarks = true },
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				marks := NewMarkMapper(cfg.Marks.Endpoint, cfg.Marks.NonCali)
				mark, _ := marks.EndpointMark("cali1234")
				return one(Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: wep("cali1234", "10.65.0.2"), Mark: mark}))
			}},
		{name: "42 disabled workload", line: getLine(),
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				ep := fullyLoaded()
				ep.State = "inactive"
				return one(Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: ep}))
			}},
		// Every policy has its own selector, so each is its own (inlined)
		// group, as in Felix's renderer test.
		{name: "43 fully loaded", line: getLine(),
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				return one(Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: fullyLoaded(), Selectors: ownSelector}))
			}},
		{name: "43 fully loaded with flow logs", line: getLine(),
			config: func(c *Config) { c.FlowLogs = true },
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				return one(Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: fullyLoaded(), Selectors: ownSelector}))
			}},
		{name: "43 fully loaded, one selector: a group chain", line: getLine(),
			render: wl("pod-1", fullyLoaded())},
		{name: "44 staged policies", line: getLine(),
			config: func(c *Config) { c.FlowLogs = true },
			render: wl("pod-1", wep("cali1234", "10.65.0.2",
				tier("default", pols(staged("s1"), gnp("ai")), pols(staged("se"))),
			))},
		{name: "45 tier default action pass", line: getLine(),
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				t := tier("tier1", pols(gnp("ai")), nil)
				t.DefaultAction = "Pass"
				return one(Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"),
					Endpoint: withProfiles(wep("cali1234", "10.65.0.2", t), "prof1")}))
			}},
		{name: "46 host filter chains", line: getLine(),
			config: func(c *Config) { specMarks(c); c.EndpointMarks = true },
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				marks := NewMarkMapper(cfg.Marks.Endpoint, cfg.Marks.NonCali)
				mark, _ := marks.EndpointMark("eth0")
				return one(Host(cfg, HostInput{ID: "hep1", Interface: "eth0", Mark: mark, Endpoint: &proto.HostEndpoint{
					Name:         "eth0",
					Tiers:        []*proto.TierInfo{tier("default", pols(gnp("ai")), pols(gnp("ae")))},
					ForwardTiers: []*proto.TierInfo{tier("default", pols(gnp("afi")), pols(gnp("afe")))},
					ProfileIds:   []string{"prof1"},
				}}))
			}},
		{name: "47 raw untracked and mangle pre-DNAT", line: getLine(),
			render: hep("hep1", &proto.HostEndpoint{
				Name:           "eth0",
				UntrackedTiers: []*proto.TierInfo{tier("default", pols(gnp("ui")), pols(gnp("ue")))},
				PreDnatTiers:   []*proto.TierInfo{tier("default", pols(gnp("pi")), nil)},
			})},
		{name: "48 QoS limits", line: getLine(),
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				ep := wep("cali1234", "10.65.0.2")
				ep.QosControls = &proto.QoSControls{
					IngressPacketRate: 2000, IngressPacketBurst: 4000,
					EgressPacketRate: 1000, EgressPacketBurst: 2000,
					IngressMaxConnections: 10, EgressMaxConnections: 20,
				}
				return one(Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: ep}))
			}},
		{name: "49 no invalid check, allow action return", line: getLine(),
			config: func(c *Config) { c.DisableConntrackInvalidCheck = true; c.FilterAllowAction = ActionReturn },
			render: wl("pod-1", wep("cali1234", "10.65.0.2"))},
		{name: "50 VXLAN allowed", line: getLine(),
			config: func(c *Config) { c.AllowVXLANFromWorkloads = true },
			render: wl("pod-1", wep("cali1234", "10.65.0.2"))},
		{name: "50 IPIP allowed, reject", line: getLine(),
			config: func(c *Config) { c.AllowIPIPFromWorkloads = true; c.FilterDenyAction = ActionReject },
			render: wl("pod-1", wep("cali1234", "10.65.0.2"))},
		{name: "51 policy group", line: getLine(),
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				var in []*proto.PolicyID
				for _, n := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7"} {
					in = append(in, gnp(n))
				}
				in = append(in[:2], append(pols(staged("s1")), in[2:]...)...)
				sel := func(id *proto.PolicyID) (string, bool) { return "app == 'web'", true }
				return one(Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Selectors: sel,
					Endpoint: wep("cali1234", "10.65.0.2", tier("default", in, pols(gnp("single"))))}))
			}},
		{name: "52 workload dispatch", line: getLine(),
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				chains, _ := Static(cfg)
				var extra []*nft.Chain
				for _, c := range chains {
					if c.Name == ChainFromWorkload || c.Name == ChainToWorkload {
						extra = append(extra, c)
					}
				}
				var outs []Output
				for i, name := range []string{"cali1234", "cali2333", "cali2444", "tap1"} {
					outs = append(outs, Workload(cfg, WorkloadInput{ID: wlID("default", name), Endpoint: wep(name, fmt.Sprintf("10.65.0.%d", i+1))}))
				}
				outs = sharedOnly(outs)
				return outs, extra
			}},
		{name: "52 endpoint mark dispatch", line: getLine(),
			config: func(c *Config) { specMarks(c); c.EndpointMarks = true; c.InterfacePrefixes = []string{"cali", "tap"} },
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				marks := NewMarkMapper(cfg.Marks.Endpoint, cfg.Marks.NonCali)
				var outs []Output
				for _, name := range []string{"cali1234", "cali2333", "cali2444"} {
					m, _ := marks.EndpointMark(name)
					outs = append(outs, Workload(cfg, WorkloadInput{ID: wlID("default", name), Endpoint: wep(name, "10.65.0.1"), Mark: m}))
				}
				m, _ := marks.EndpointMark("eth0")
				outs = append(outs, Host(cfg, HostInput{ID: "hep1", Interface: "eth0", Endpoint: &proto.HostEndpoint{Name: "eth0"}, Mark: m}))
				outs = elementsOnly(outs, MapEndpointMark, MapFromEndpointMark)
				chains, _ := Static(cfg)
				var extra []*nft.Chain
				for _, c := range chains {
					switch c.Name {
					case ChainSetEndpointMark, ChainFromEndpointMark, ChainForwardCheck, ChainForwardEndpointMk:
						extra = append(extra, c)
					}
				}
				return outs, extra
			}},
		{name: "53 host dispatch without *", line: getLine(),
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				o := Host(cfg, HostInput{ID: "hep1", Interface: "eth0", Endpoint: &proto.HostEndpoint{
					Name:           "eth0",
					UntrackedTiers: []*proto.TierInfo{tier("default", pols(gnp("u")), nil)},
					PreDnatTiers:   []*proto.TierInfo{tier("default", pols(gnp("p")), nil)},
				}})
				return elementsOnly([]Output{o}), HostDispatch(cfg, nil)
			}},
		{name: "53 host dispatch with *", line: getLine(),
			config: func(c *Config) { c.InterfacePrefixes = []string{"cali", "tap"} },
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				star := &proto.HostEndpoint{Name: "*", PreDnatTiers: []*proto.TierInfo{tier("default", pols(gnp("p")), nil)}}
				o := Host(cfg, HostInput{ID: "hep-star", Interface: AnyInterface, Endpoint: star})
				if len(o.Elements) != 0 {
					panic("the * endpoint rendered map elements")
				}
				return []Output{{Chains: o.Chains}}, HostDispatch(cfg, star)
			}},
		{name: "10.1-3 host endpoint with tierA", line: getLine(),
			render: hep("id1", &proto.HostEndpoint{Name: "eth0", Tiers: tierA()})},
		{name: "10.1-7 untracked host endpoint", line: getLine(),
			render: hep("id1", &proto.HostEndpoint{Name: "eth0", UntrackedTiers: tierA()})},
		{name: "10.1-8 apply-on-forward host endpoint", line: getLine(),
			render: hep("id1", &proto.HostEndpoint{Name: "eth0", ForwardTiers: tierA()})},
		{name: "10.1-8 pre-DNAT host endpoint", line: getLine(),
			render: hep("id1", &proto.HostEndpoint{Name: "eth0",
				PreDnatTiers: []*proto.TierInfo{tier("tierA", pols(gnp("polA")), nil)}})},
		{name: "10.1-9 ingress-only host endpoint", line: getLine(),
			render: hep("id1", &proto.HostEndpoint{Name: "eth0",
				Tiers: []*proto.TierInfo{tier("tierA", pols(gnp("polA")), nil)}})},
		{name: "10.1-9 egress-only host endpoint", line: getLine(),
			render: hep("id1", &proto.HostEndpoint{Name: "eth0",
				Tiers: []*proto.TierInfo{tier("tierA", nil, pols(gnp("polA")))}})},
		{name: "rpf skip and arp", line: getLine(), arp: true,
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				ep := wep("cali23456-cd", "10.65.0.7")
				ep.Ipv6Nets = []string{"fd00:65::7/128"}
				ep.AllowSpoofedSourcePrefixes = []string{"8.8.8.8/32", "2001:feed::1/64"}
				o := Workload(cfg, WorkloadInput{ID: wlID("default", "pod-7"), Endpoint: ep})
				return []Output{{Elements: o.Elements, ARPElements: o.ARPElements}}, nil
			}},
		// Acceptance case 40: one rule per IPv4 net, in order, the
		// address without its prefix length (host bits kept); IPv6 nets,
		// unparsable nets and repeats add none.
		{name: "arp suppression, several addresses", line: getLine(), arp: true,
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				ep := wep("cali1", "10.65.0.7")
				ep.Ipv4Nets = append(ep.Ipv4Nets, "10.65.1.9/24", "bogus", "10.65.0.7", "192.168.3.4")
				ep.Ipv6Nets = []string{"fd00:65::7/128"}
				o := Workload(cfg, WorkloadInput{ID: wlID("default", "pod-8"), Endpoint: ep})
				return []Output{{ARPElements: o.ARPElements}}, nil
			}},
		// IDs and names from the datastore with what nft cannot print
		// back: comments and nflog prefixes are sanitised (and stay
		// within their limits); overlapping spoofed prefixes collapse.
		{name: "hostile names and overlapping spoofed prefixes", line: getLine(), arp: true,
			config: func(c *Config) { c.FlowLogs = true },
			render: hostileNames},
		// Ipv6Support false: a dual-stack workload with spoofing
		// allowances of both families and failsafe entries limited to
		// nets of both families renders nothing for IPv6: no IPv6
		// RPF-skip element (nor set, nor rule in raw-ep-prerouting), no
		// ND allowance in filter-wl-to-host, no failsafe rule for the
		// IPv6 net.
		{name: "IPv6 off", line: getLine(), arp: true,
			config: func(c *Config) {
				c.IPv6 = false
				var err error
				c.FailsafeInbound, err = ParseFailsafe("tcp:22,tcp:10.0.0.0/8:179,tcp:[fd00::/8]:179")
				if err != nil {
					panic(err)
				}
			},
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				ep := wep("cali1", "10.65.0.7", tier("default", pols(gnp("ai")), nil))
				ep.Ipv6Nets = []string{"fd00:65::7/128"}
				ep.AllowSpoofedSourcePrefixes = []string{"8.8.8.8/32", "2001:feed::1/64", "::ffff:9.9.9.9"}
				o := Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: ep})
				chains, _ := Static(cfg)
				var extra []*nft.Chain
				for _, c := range chains {
					switch c.Name {
					case ChainRawPreroutingEP, ChainWorkloadToHost, ChainFailsafeIn:
						extra = append(extra, c)
					}
				}
				return []Output{o}, extra
			}},
		{name: "shared endpoint chains", line: getLine(),
			config: func(c *Config) { c.SharedEndpointChains = true },
			render: func(cfg Config) ([]Output, []*nft.Chain) {
				a := Workload(cfg, WorkloadInput{ID: wlID("default", "pod-a"), Endpoint: withProfiles(wep("cali1", "10.65.0.1"), "kns.default")})
				b := Workload(cfg, WorkloadInput{ID: wlID("default", "pod-b"), Endpoint: withProfiles(wep("cali2", "10.65.0.2"), "kns.default")})
				return []Output{a, b}, nil
			}},
	}
}

// sharedOnly keeps only the dispatch elements of outs (the dispatch cases
// print the maps, not the endpoint chains).
func sharedOnly(outs []Output) []Output {
	return elementsOnly(outs, MapFromWorkload, MapToWorkload)
}

// elementsOnly keeps only the elements of outs in the given sets (all sets
// if none are given).
func elementsOnly(outs []Output, sets ...string) []Output {
	keep := map[string]bool{}
	for _, s := range sets {
		keep[s] = true
	}
	var res []Output
	for _, o := range outs {
		var r Output
		for _, e := range o.Elements {
			if len(sets) == 0 || keep[e.Set] {
				r.Elements = append(r.Elements, e)
			}
		}
		res = append(res, r)
	}
	return res
}

// hostileNames renders a workload and a host endpoint whose IDs, tier,
// policy and profile names hold quotes, backslashes, control characters and
// invalid UTF-8, and whose spoofed prefixes overlap and repeat.
func hostileNames(cfg Config) ([]Output, []*nft.Chain) {
	t1 := tier(`t"x`, pols(&proto.PolicyID{Name: "p\\q\n", Kind: "GlobalNetworkPolicy"}), nil)
	// A tier name long enough for the nflog prefix to be cut inside a
	// multi-byte character.
	t2 := tier("é\xff"+strings.Repeat("é", 40), nil, pols(gnp("pol")))
	ep := wep("cali1", "10.65.0.7", t1, t2)
	ep.ProfileIds = []string{`prof"\`}
	ep.AllowSpoofedSourcePrefixes = []string{"10.1.0.0/16", "10.0.0.0/8", "10.1.2.3", "10.0.0.0/8",
		"192.168.0.0/24", "2001:db8::/32", "2001:db8:1::/48", "2001:db8::1"}
	w := Workload(cfg, WorkloadInput{
		ID:       &proto.WorkloadEndpointID{OrchestratorId: "k8s\\", WorkloadId: "ns/pod\t", EndpointId: `e"0`},
		Endpoint: ep,
	})
	h := Host(cfg, HostInput{ID: "hep\"\x01\xfe", Interface: "eth0", Endpoint: &proto.HostEndpoint{
		Name: "eth0", Tiers: []*proto.TierInfo{t1}, ProfileIds: []string{`prof"\`},
	}})
	return []Output{w, h}, nil
}
