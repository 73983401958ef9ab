package render

import (
	"testing"

	"github.com/nftep/nftep/nft"
)

// kubeProxyMasq is kube-proxy's masquerade mark (its default
// --iptables-masquerade-bit 14), which it sets on IPVS service traffic. It
// is outside nftep's default mark mask (0xffff0000).
const kubeProxyMasq = 0x4000

// TestEndpointMarkForeignBits traces IPVS traffic with kube-proxy's
// masquerade bit set, with the default marks (endpoint field 0xffe00000):
// the set-endpoint-mark chains keep the foreign bit, and the mark → from
// chain dispatch looks up the endpoint field only, so the foreign bit does
// not make it miss (which would drop the packet as "Unknown interface").
func TestEndpointMarkForeignBits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EndpointMarks = true
	m := cfg.Marks
	if m.Endpoint != 0xffe00000 || m.Endpoint&kubeProxyMasq != 0 {
		t.Fatalf("default endpoint field %#x; the test wants 0xffe00000, clear of %#x", m.Endpoint, kubeProxyMasq)
	}
	marks := NewMarkMapper(m.Endpoint, m.NonCali)
	allowAll := tier("default", pols(gnp("allow-all")), pols(gnp("allow-all")))
	var outs []Output
	epMark := map[string]uint32{}
	for _, w := range []struct {
		iface, pod, ip string
		allow          bool
	}{
		{"cali1", "pod-1", "10.65.0.1", true},
		{"cali2", "pod-2", "10.65.0.2", false}, // no policy: egress denied
	} {
		mark, err := marks.EndpointMark(w.iface)
		if err != nil {
			t.Fatal(err)
		}
		epMark[w.iface] = mark
		ep := wep(w.iface, w.ip)
		if w.allow {
			ep = wep(w.iface, w.ip, allowAll)
		}
		outs = append(outs, Workload(cfg, WorkloadInput{ID: wlID("default", w.pod), Endpoint: ep, Mark: mark}))
	}
	model := buildModel(t, cfg, map[string]policyBehaviour{
		"filter-pi-default.allow-all": allowPolicy,
		"filter-po-default.allow-all": allowPolicy,
	}, outs...)

	for _, tc := range []struct {
		name, iif, src string
		want           string
	}{
		{"allowed source endpoint", "cali1", "10.65.0.1", "accept"},
		{"denied source endpoint", "cali2", "10.65.0.2", "drop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Input: the pod connects to a NodePort on the host; the
			// packet already carries the masquerade bit. It leaves input
			// with its endpoint mark, and the foreign bit still set.
			in := tracePacket(t, model, packet{path: pathInput, iif: tc.iif, src: tc.src, dst: "10.0.240.10",
				proto: protoTCP, dport: 30080, mark: kubeProxyMasq})
			if in.verdict != "accept" || in.mark&m.Endpoint != epMark[tc.iif] || in.mark&kubeProxyMasq == 0 {
				t.Fatalf("NodePort input: got %s; want accept with endpoint mark %#x and %#x", in, epMark[tc.iif], kubeProxyMasq)
			}
			// Output: IPVS sends it on to a backend pod with the same mark;
			// the dispatch finds the source endpoint's egress chain.
			got := tracePacket(t, model, packet{path: pathOutput, oif: "cali1", src: tc.src, dst: "10.65.0.1",
				proto: protoTCP, dport: 80, mark: in.mark})
			if got.verdict != tc.want {
				t.Errorf("IPVS output: got %s; want %s", got, tc.want)
			}
			fw := chainName(LayerFilter, KindFromWorkload, tc.iif)
			if _, ok := got.firstRuleOf[fw]; !ok {
				t.Errorf("the endpoint-mark dispatch did not reach %s:\n%s", fw, got)
			}
			if got.mark&kubeProxyMasq == 0 {
				t.Errorf("the foreign bit %#x was cleared: final mark %#x", kubeProxyMasq, got.mark)
			}
		})
	}

	// The dispatch rule is the masked lookup.
	want := nft.VMap{Key: nft.SelMark, Map: MapFromEndpointMark, Mask: m.Endpoint}
	if r := model.Chain(ChainFromEndpointMark).Rules[0]; r.Action != want {
		t.Errorf("from-endpoint-mark dispatch: %s; want the action %+v", r, want)
	}
}
