package render

import (
	"testing"

	"github.com/nftep/nftep/proto"
)

// TestARPEndpointNoIPv4 checks that a workload without a usable IPv4 net gets
// no ARP chain and no dispatch element (ARP suppression is per IPv4 address),
// and that turning ARP suppression off renders none either.
func TestARPEndpointNoIPv4(t *testing.T) {
	cfg := DefaultConfig()
	for _, nets := range [][]string{nil, {"bogus"}, {"::ffff:zz"}} {
		ep := &proto.WorkloadEndpoint{State: "active", Name: "cali1", Ipv4Nets: nets, Ipv6Nets: []string{"fd00:65::7/128"}}
		o := Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: ep})
		if len(o.ARPElements) != 0 {
			t.Errorf("IPv4 nets %q: ARP elements %v; want none", nets, o.ARPElements)
		}
	}
	cfg.ARPSuppression = false
	o := Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: wep("cali1", "10.65.0.1")})
	if len(o.ARPElements) != 0 {
		t.Errorf("ARP suppression off: ARP elements %v; want none", o.ARPElements)
	}
}
