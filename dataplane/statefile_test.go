package dataplane

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

func snapshotOf(t *testing.T, yaml string) *Snapshot {
	t.Helper()
	sf, err := ParseStateFile("node.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSnapshot(sf)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStateFileErrors: every error names the file, the update and the
// field, in the words of the file's author.
func TestStateFileErrors(t *testing.T) {
	wep := func(endpoint string) string {
		return "updates:\n  - workloadEndpointUpdate:\n      id: {orchestratorId: k8s, workloadId: ns/a, endpointId: eth0}\n      endpoint: " + endpoint + "\n"
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"yaml syntax", "config: {\nupdates: [", `state file "node.yaml": yaml: line 2: did not find expected node content`},
		{"empty", "", `state file "node.yaml": the file is empty`},
		{"unknown top-level key", "update: []", `state file "node.yaml": update: unknown key (want config and updates)`},
		{"config not scalar", "config: {Foo: [1]}", `state file "node.yaml": config: Foo: want a string, number or boolean, not a list`},
		{"bad config value", "config: {VXLANPort: 0}", `state file "node.yaml": config: VXLANPort="0": not a port`},
		{"updates not a list", "updates: {a: 1}", `state file "node.yaml": updates: want a list of Felix messages`},
		{"unknown field", wep("{name: cali-a, ipv4Net: [10.0.0.1]}"), `state file "node.yaml": updates[0] (workloadEndpointUpdate k8s/ns/a/eth0): endpoint: unknown field "ipv4Net"`},
		{"unknown message", "updates:\n  - serviceUpdate: {}", `state file "node.yaml": updates[0]: unknown field "serviceUpdate"`},
		{"empty update", "updates: [{}]", `updates[0]: no Felix message in this update`},
		{"config update", "updates: [{configUpdate: {}}]", `updates[0] (configUpdate): configUpdate does not belong in updates: put the settings in the top-level config map`},
		{"no interface", wep("{ipv4Nets: [10.0.0.1/32]}"), `updates[0] (workloadEndpointUpdate k8s/ns/a/eth0): endpoint.name: missing`},
		{"long interface", wep("{name: cali0123456789abc}"), `endpoint.name: interface name "cali0123456789abc" is longer than 15 bytes`},
		{"v6 in v4", wep("{name: cali-a, ipv4Nets: [10.0.0.1/32, 'fd00::1/128']}"), `endpoint.ipv4Nets[1]: "fd00::1/128" is not an IPv4 CIDR or address`},
		{"bad mac", wep("{name: cali-a, mac: 'ee:ee'}"), `endpoint.mac: "ee:ee" is not a MAC address`},
		{"missing id", "updates:\n  - workloadEndpointUpdate: {endpoint: {name: x}}", `updates[0] (workloadEndpointUpdate //): id.orchestratorId: missing`},
		{"unknown profile", wep("{name: cali-a, profileIds: [nope]}"), `updates[0] (workloadEndpointUpdate k8s/ns/a/eth0): endpoint.profileIds[0]: profile "nope" is not defined by any activeProfileUpdate`},
		{"unknown policy", wep("{name: cali-a, tiers: [{name: default, egressPolicies: [{name: p}]}]}"), `endpoint.tiers[0].egressPolicies[0]: policy p is not defined by any activePolicyUpdate`},
		{"unknown ip set", "updates:\n  - activePolicyUpdate: {id: {name: p}, policy: {inboundRules: [{action: allow, srcIpSetIds: [s:x]}]}}",
			`updates[0] (activePolicyUpdate p): policy.inboundRules[0].srcIpSetIds[0]: IP set "s:x" is not defined by any ipsetUpdate`},
		{"bad member", "updates:\n  - ipsetUpdate: {id: s:x, type: IP_AND_PORT, members: ['10.0.0.1,icmp:0']}",
			`updates[0] (ipsetUpdate s:x): members[0]: "10.0.0.1,icmp:0": protocol "icmp" is not tcp, udp or sctp`},
		{"bad rule net", "updates:\n  - activePolicyUpdate: {id: {name: p}, policy: {outboundRules: [{action: allow, dstNet: [10.0.0.0/8, 10.0.0.0/33]}]}}",
			`updates[0] (activePolicyUpdate p): policy.outboundRules[0].dstNet[1]: "10.0.0.0/33" is not a CIDR or address`},
		{"nft cannot match the name", wep(`{name: 'cali"x'}`), `endpoint.name: interface name "cali\"x" has character '"': nftables cannot match it`},
		{"bad NAT IP", wep("{name: cali-a, ipv4Nat: [{extIp: 'fd00::1'}]}"), `endpoint.ipv4Nat[0].extIp: "fd00::1" is not an IPv4 address`},
		{"delta of unknown set", "updates:\n  - ipsetDeltaUpdate: {id: s:x, addedMembers: [10.0.0.1]}",
			`updates[0] (ipsetDeltaUpdate s:x): id: IP set "s:x" is not defined by an earlier ipsetUpdate`},
		{"host endpoint without name", "updates:\n  - hostEndpointUpdate: {id: {endpointId: h}, endpoint: {}}",
			`updates[0] (hostEndpointUpdate h): endpoint: needs a name (an interface, or "*") or expected addresses`},
		// Cluster networking, checked as the overlay manager reads it.
		{"bad route dst", "updates:\n  - routeUpdate: {dst: 10.65.0.0/33, types: REMOTE_WORKLOAD}",
			`updates[0] (routeUpdate 10.65.0.0/33): dst: "10.65.0.0/33" is not a CIDR or address`},
		{"route node IP of another family", "updates:\n  - routeUpdate: {dst: 10.65.1.0/26, dstNodeIp: 'fd00::1'}",
			`updates[0] (routeUpdate 10.65.1.0/26): dstNodeIp: fd00::1 is not of dst's family (IPv4)`},
		{"unknown pool type", "updates:\n  - routeUpdate: {dst: 10.65.1.0/26, ipPoolType: 9}",
			`updates[0] (routeUpdate 10.65.1.0/26): ipPoolType: unknown pool type 9`},
		{"route type bits Felix lacks", "updates:\n  - routeUpdate: {dst: 10.65.1.0/26, types: 64}",
			`updates[0] (routeUpdate 10.65.1.0/26): types: 64 has bits Felix does not define`},
		{"bad VTEP MAC", "updates:\n  - vtepUpdate: {node: n2, mac: 'zz', ipv4Addr: 10.65.2.0, parentDeviceIp: 192.168.60.12}",
			`updates[0] (vtepUpdate n2): mac: "zz" is not a MAC address`},
		{"host address", "updates:\n  - hostMetadataUpdate: {hostname: n2, ipv4Addr: 'fd00::2/64'}",
			`updates[0] (hostMetadataUpdate n2): ipv4Addr: "fd00::2/64" is not an IPv4 address`},
		{"bad VXLAN VNI", "config: {VXLANVNI: 0}", `config: VXLANVNI: 0 is out of range 1-16777215`},
		{"bad cluster routes mode", "config: {ProgramClusterRoutes: Sometimes}", `config: ProgramClusterRoutes="Sometimes": want one of Enabled, Disabled, EnabledIPIPOnly, EnabledNoEncapOnly`},
		{"bad tunnel address", "config: {IpInIpTunnelAddr: 'fd00::1'}", `config: IpInIpTunnelAddr="fd00::1": not an IPv4 address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sf, err := ParseStateFile("node.yaml", []byte(tc.file))
			if err == nil {
				_, err = NewSnapshot(sf)
			}
			if err == nil {
				_, err = ParseConfig(sf.Config, "")
				if err != nil {
					err = &StateFileError{File: "node.yaml", Index: -1, Field: "config", Err: err}
				}
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error:\n  %s\nwant it to contain:\n  %s", err, tc.want)
			}
		})
	}
}

// TestStateFileFoldsUpdates: the updates are applied in order; the
// snapshot holds each object's last state.
func TestStateFileFoldsUpdates(t *testing.T) {
	s := snapshotOf(t, `
config: {VXLANPort: 4790, Ipv6Support: false}
updates:
  - ipsetUpdate: {id: "s:x", type: NET, members: [10.0.0.0/24, 10.1.0.1/32]}
  - ipsetDeltaUpdate: {id: "s:x", addedMembers: [10.2.0.0/16], removedMembers: [10.1.0.1/32]}
  - activeProfileUpdate: {id: {name: gone}}
  - activeProfileRemove: {id: {name: gone}}
  - workload_endpoint_update: {id: {orchestrator_id: k8s, workload_id: ns/a, endpoint_id: eth0}, endpoint: {name: cali-a}}
  - workloadEndpointUpdate: {id: {orchestratorId: k8s, workloadId: ns/a, endpointId: eth0}, endpoint: {name: cali-b}}
  - inSync: {}
`)
	if diff := cmp.Diff(map[string]string{"VXLANPort": "4790", "Ipv6Support": "false"}, s.Config); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	var got []string
	for _, m := range s.Messages() {
		b, _ := protojson.Marshal(m)
		got = append(got, string(b))
	}
	want := []string{
		`{"id":"s:x","members":["10.0.0.0/24","10.2.0.0/16"],"type":"NET"}`,
		`{"id":{"orchestratorId":"k8s","workloadId":"ns/a","endpointId":"eth0"},"endpoint":{"name":"cali-b"}}`,
	}
	if diff := cmp.Diff(want, normalizeJSON(got)); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

// normalizeJSON removes the spaces protojson may put after separators (it
// varies them on purpose).
func normalizeJSON(ss []string) []string {
	for i, s := range ss {
		ss[i] = strings.NewReplacer(" ", "", "\u00a0", "").Replace(s)
	}
	return ss
}

// TestDiff: a changed file becomes Felix's messages in Felix's order:
// dependencies first, removals in reverse, unchanged objects silent.
func TestDiff(t *testing.T) {
	old := snapshotOf(t, `
updates:
  - ipsetUpdate: {id: "s:keep", type: NET, members: [10.0.0.1/32]}
  - ipsetUpdate: {id: "s:gone", type: NET, members: [10.0.0.2/32]}
  - activePolicyUpdate: {id: {name: pol}, policy: {inboundRules: [{action: allow, srcIpSetIds: ["s:gone"]}]}}
  - activeProfileUpdate: {id: {name: prof}}
  - workloadEndpointUpdate: {id: {orchestratorId: k8s, workloadId: ns/a, endpointId: eth0}, endpoint: {name: cali-a, profileIds: [prof], tiers: [{name: default, ingressPolicies: [{name: pol}]}]}}
  - workloadEndpointUpdate: {id: {orchestratorId: k8s, workloadId: ns/b, endpointId: eth0}, endpoint: {name: cali-b}}
`)
	new := snapshotOf(t, `
updates:
  - ipsetUpdate: {id: "s:keep", type: NET, members: [10.0.0.1/32, 10.0.0.3/32]}
  - activeProfileUpdate: {id: {name: prof}}
  - workloadEndpointUpdate: {id: {orchestratorId: k8s, workloadId: ns/a, endpointId: eth0}, endpoint: {name: cali-a, profileIds: [prof]}}
  - workloadEndpointUpdate: {id: {orchestratorId: k8s, workloadId: ns/b, endpointId: eth0}, endpoint: {name: cali-b}}
`)
	var got []string
	for _, m := range Diff(old, new) {
		got = append(got, string(gproto.MessageName(m).Name())+" "+objectID(m))
	}
	want := []string{
		"IPSetUpdate s:keep",
		"WorkloadEndpointUpdate k8s/ns/a/eth0",
		"ActivePolicyRemove pol",
		"IPSetRemove s:gone",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diff (-want +got):\n%s", diff)
	}
	if d := Diff(new, new); len(d) != 0 {
		t.Errorf("Diff of a snapshot with itself = %v, want nothing", d)
	}
}

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Render.TableName != "nftep" || !cfg.Endpoints.IPv6 || cfg.NftablesRefresh != 180*time.Second ||
		cfg.RouteRefresh != 90*time.Second || cfg.RouteProtocol != 3 || !cfg.RemoveExternalRoutes {
		t.Errorf("defaults = %+v", cfg)
	}
	cfg, err = ParseConfig(map[string]string{
		"ipv6support": "false", "NftablesRefreshInterval": "2.5", "RouteRefreshInterval": "0",
		"FloatingIPs": "Enabled", "DeviceRouteProtocol": "80", "NftepTableName": "x",
	}, "flag")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Render.TableName != "flag" || cfg.Endpoints.IPv6 || cfg.NftablesRefresh != 2500*time.Millisecond ||
		cfg.RouteRefresh != 0 || !cfg.Endpoints.FloatingIPs || cfg.RouteProtocol != 80 {
		t.Errorf("parsed = %+v", cfg)
	}
	_, err = ParseConfig(map[string]string{"Ipv6Support": "maybe", "FloatingIPs": "x", "NftablesRefreshInterval": "-1"}, "")
	for _, want := range []string{`Ipv6Support="maybe": not a boolean`, `FloatingIPs="x": want Enabled or Disabled`, `NftablesRefreshInterval="-1": not a number of seconds`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestRoutesAdapter: the targets of both families of an interface reach
// the route table together, and an empty list removes them all.
func TestRoutesAdapter(t *testing.T) {
	k := newFakeKernel()
	ra := routesAdapter{k.routes}
	ra.SetRoutes("cali1", []endpoints.RouteTarget{
		{CIDR: netip.MustParsePrefix("10.0.0.1/32")},
		{CIDR: netip.MustParsePrefix("fd00::1/128")},
	})
	got := func() []string {
		var out []string
		for _, tg := range k.routeTargets("cali1") {
			out = append(out, tg.CIDR.String())
		}
		return out
	}
	if diff := cmp.Diff([]string{"10.0.0.1/32", "fd00::1/128"}, got()); diff != "" {
		t.Errorf("both families (-want +got):\n%s", diff)
	}
	ra.SetRoutes("cali1", nil)
	if len(got()) != 0 {
		t.Errorf("targets left: %v", got())
	}
}

// TestIfaceCacheReplay: a new engine hears the current interfaces, not
// their history.
func TestIfaceCacheReplay(t *testing.T) {
	c := newIfaceCache()
	for _, u := range append(append(upIface("eth0", 2, "192.168.0.1"), upIface("cali1", 3)...),
		routes.InterfaceStateUpdate{Name: "cali1", State: routes.IfaceGone, Index: 3},
		routes.InterfaceAddrsUpdate{Name: "cali1"},
		routes.InterfaceStateUpdate{Name: "eth0", State: routes.IfaceDown, Index: 2}) {
		if !c.record(u) {
			t.Fatalf("record(%v) = false", u)
		}
	}
	if c.record(&proto.InSync{}) {
		t.Errorf("record took a Felix message")
	}
	want := []any{
		routes.InterfaceStateUpdate{Name: "eth0", State: routes.IfaceDown, Index: 2},
		routes.InterfaceAddrsUpdate{Name: "eth0", Addrs: []netip.Addr{netip.MustParseAddr("192.168.0.1")}},
	}
	if diff := cmp.Diff(want, c.replay(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
}

// TestDryRunDemoState: the example the demo applies is valid and gives
// the endpoints it documents.
func TestDryRunDemoState(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = append(upIface("cali-a", 2), upIface("cali-b", 3)...)
	res, err := DryRun(Options{Kernel: k}, filepath.Join("..", "examples", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []EndpointStatus{
		{Kind: "workload", ID: "k8s/demo/pod-a/eth0", Status: "up"},
		{Kind: "workload", ID: "k8s/demo/pod-b/eth0", Status: "up"},
		{Kind: "workload", ID: "k8s/demo/pod-c/eth0", Status: "down", Reason: `state is "inactive", not "active"; interface cali-c is not up`},
	}
	if diff := cmp.Diff(want, res.Statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	for _, s := range []string{"chain filter-pi-default.demo/allow-a-to-b-8080 {", "table arp nftep {"} {
		if !strings.Contains(res.Ruleset, s) {
			t.Errorf("ruleset lacks %q", s)
		}
	}
	if n := k.table("inet nftep").applies; n != 0 {
		t.Errorf("a dry run applied %d times", n)
	}
}

// TestStatusFile: the status file round-trips and prints for an operator.
func TestStatusFile(t *testing.T) {
	dir := t.TempDir()
	s := &Status{Mode: "run", Source: "node.yaml", Table: "nftep", PID: 42, InSync: true,
		Updated: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), LastError: "boom",
		Endpoints: []EndpointStatus{{Kind: "workload", ID: "k8s/ns/a/eth0", Status: "down", Reason: "interface cali-a is not up"}, {Kind: "host", ID: "h", Status: "up"}}}
	if err := writeStatus(dir, s, "table inet nftep {\n}\n", nil); err != nil {
		t.Fatal(err)
	}
	got, err := ReadStatus(filepath.Join(dir, StatusFileName))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, RulesetFileName)); string(b) != "table inet nftep {\n}\n" {
		t.Errorf("ruleset.nft = %q", b)
	}
	var out strings.Builder
	FormatStatuses(&out, s.Endpoints)
	want := "KIND      ENDPOINT       STATUS  REASON\n" +
		"workload  k8s/ns/a/eth0  down    interface cali-a is not up\n" +
		"host      h              up\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("FormatStatuses (-want +got):\n%s", diff)
	}
}
