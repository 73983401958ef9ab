package endpoints

// The tables as nft prints them, for the core cases: what `nftep show` and
// `nft list table inet nftep` show an operator.

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/render"
)

func (h *harness) wantChainText(name, want string) {
	h.t.Helper()
	if diff := cmp.Diff(testutil.Dedent(want), h.chain(name).String()); diff != "" {
		h.t.Errorf("chain %s (-want +got):\n%s", name, diff)
	}
}

// Cases 19 and 33 in nft syntax.
func TestGoldenWorkloadChains(t *testing.T) {
	h := newHarness(t)
	inactive := workloadEp(ifCD)
	inactive.State = "inactive"
	h.step(append(hostIfaces(), wlUpdate("pod-11", workloadEp(ifAB, tier("default", "policy1"))), wlUpdate("pod-12", inactive))...)

	h.wantChainText(twAB, `
		chain filter-tw-cali12345-ab {
			ct state established,related accept comment "endpoint k8s/pod-11/endpoint-id-11: Allow established and related"
			ct state invalid drop comment "endpoint k8s/pod-11/endpoint-id-11: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/pod-11/endpoint-id-11: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/pod-11/endpoint-id-11: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.policy1 comment "endpoint k8s/pod-11/endpoint-id-11: Policy default.policy1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/pod-11/endpoint-id-11: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/pod-11/endpoint-id-11: End of tier default. Drop if no policies passed packet"
			drop comment "endpoint k8s/pod-11/endpoint-id-11: Drop if no profiles matched"
		}
		`)
	h.wantChainText(fwAB, `
		chain filter-fw-cali12345-ab {
			ct state established,related accept comment "endpoint k8s/pod-11/endpoint-id-11: Allow established and related"
			ct state invalid drop comment "endpoint k8s/pod-11/endpoint-id-11: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/pod-11/endpoint-id-11: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/pod-11/endpoint-id-11: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/pod-11/endpoint-id-11: Drop IPinIP encapped packets originating in workloads"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/pod-11/endpoint-id-11: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-default.policy1 comment "endpoint k8s/pod-11/endpoint-id-11: Policy default.policy1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/pod-11/endpoint-id-11: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/pod-11/endpoint-id-11: End of tier default. Drop if no policies passed packet"
			drop comment "endpoint k8s/pod-11/endpoint-id-11: Drop if no profiles matched"
		}
		`)
	h.wantChainText(twCD, `
		chain filter-tw-cali12345-cd {
			drop comment "endpoint k8s/pod-12/endpoint-id-11: Endpoint admin disabled"
		}
		`)
	if diff := cmp.Diff(testutil.Dedent(`
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali12345-ab" comment "endpoint k8s/pod-11/endpoint-id-11" : goto filter-tw-cali12345-ab,
				     "cali12345-cd" comment "endpoint k8s/pod-12/endpoint-id-11" : goto filter-tw-cali12345-cd }
		}
		`), h.table.Set(render.MapToWorkload).String()); diff != "" {
		t.Errorf("map %s (-want +got):\n%s", render.MapToWorkload, diff)
	}
}

// Case 3 in nft syntax: host ingress with failsafe and tier, the forward
// default allow, and the mangle egress chain's return-allow.
func TestGoldenHostChains(t *testing.T) {
	h := newHarness(t)
	h.step(append(hostIfaces(), hepUpdate("id1", hostEp("eth0", tier("default", "polA"))))...)
	h.wantChainText(fhEth0, `
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.polA comment "host endpoint id1: Policy default.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier default. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		`)
	h.wantChainText(thfwEth0, `
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		`)
	h.wantChainText(mangleThEth0, `
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint id1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump mangle-po-default.polA comment "host endpoint id1: Policy default.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier default. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		`)
}
