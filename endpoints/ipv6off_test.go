package endpoints

import (
	"strings"
	"testing"

	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// ipv6Off is Ipv6Support false, as the dataplane sets it: both configs.
func ipv6Off(c *Config, r *render.Config) { c.IPv6, r.IPv6 = false, false }

// With Ipv6Support false a dual-stack workload is programmed from its IPv4
// half alone: IPv4 routes, the IPv4 spoofing allowance, and nothing for
// IPv6 anywhere in the table (no RPF-skip set or element, no ND allowance,
// no IPv6 match). Its ipv6_nets and ipv6_nat are not even read, so a bad
// one does not cost it its IPv4 programming, as with Felix's IPv4-only
// endpoint manager. Host endpoints still match expected IPv6 addresses
// (Felix's IPv4 manager matches both families); their chains are IPv4.
func TestIPv6OffWorkloadAndHost(t *testing.T) {
	h := newHarness(t, ipv6Off)
	ep := workloadEp(ifAB, tier("default", "policy1"))
	ep.Ipv6Nets = append(ep.Ipv6Nets, "2001:db8::g/128")
	ep.Ipv6Nat = []*proto.NatInfo{{ExtIp: "2001:db8:9::9"}, {ExtIp: "nope"}}
	ep.Ipv4Nat = []*proto.NatInfo{{ExtIp: "172.16.0.9"}}
	ep.AllowSpoofedSourcePrefixes = []string{"8.8.8.8/32", "2001:feed::1/64"}
	h.step(append(hostIfaces(), ifaceUp(ifAB), wlUpdate("pod-11", ep),
		hepUpdate("id1", hostEpIPs(nil, []string{"2001:db8::10.0.240.10"}, tier("default", "policy1"))))...)
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp, hepKey("id1"): StatusUp})
	h.wantRoutes(0, ifAB+": 10.0.240.0/24 01:02:03:04:05:06 1024", ifAB+": 172.16.0.9/32 01:02:03:04:05:06 1024")
	h.wantRoutes(1)
	h.wantElems(render.SetRPFSkipV4, ifAB+" . 8.8.8.8")
	if s := h.table.Set(render.SetRPFSkipV6); s != nil {
		t.Errorf("IPv6 off: %s exists", s.Name)
	}
	h.wantEndpointChains(twAB, fwAB, smAB,
		chainName(render.LayerFilter, render.KindToHost, "eth0"), chainName(render.LayerFilter, render.KindFromHost, "eth0"),
		chainName(render.LayerFilter, render.KindToHostForward, "eth0"), chainName(render.LayerFilter, render.KindFromHostForward, "eth0"),
		chainName(render.LayerMangle, render.KindToHost, "eth0"), chainName(render.LayerFilter, render.KindSetMark, "eth0"))
	h.wantValidKeys()
	for _, l := range strings.Split(h.table.String(), "\n") {
		if s := strings.ToLower(l); strings.Contains(s, "ip6") || strings.Contains(s, "ipv6") || strings.Contains(s, "-v6") {
			t.Errorf("IPv6 off: the table has %q", strings.TrimSpace(l))
		}
	}
}
