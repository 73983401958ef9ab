package tracer_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/tracer"
)

// natModel is the static table with natOutgoing on 10.65.0.0/16 and a plain
// pool 10.66.0.0/16, NATPortRange set, and VXLAN's tunnel rules.
func natModel(t *testing.T) *nft.Model {
	cfg, err := render.ParseConfig(map[string]string{render.KeyNATPortRange: "32768:65535", render.KeyIPv4VXLANTunnelAddr: "10.65.1.0"})
	require.NoError(t, err)
	m := nft.NewModel(nft.FamilyINet, "nftep")
	chains, sets := render.Static(cfg)
	for _, s := range append(sets, render.ClusterSets(cfg)...) {
		m.SetSet(s)
	}
	for _, c := range chains {
		m.SetChain(c)
	}
	for _, c := range render.Tunnel(cfg, render.Encap{VXLAN: true}) {
		m.SetChain(c)
	}
	m.SetChain(render.NATOutgoing(cfg, [2]bool{true, false}))
	m.SetElement("all-pools-v4", nft.Element{Key: "10.65.0.0/16"})
	m.SetElement("all-pools-v4", nft.Element{Key: "10.66.0.0/16"})
	m.SetElement("masq-pools-v4", nft.Element{Key: "10.65.0.0/16"})
	m.SetElement("vxlan-sources-v4", nft.Element{Key: "192.168.60.12"})
	require.NoError(t, m.Validate())
	return m
}

// TestTraceNATOutgoing: which packets from a pod are masqueraded, by which
// rule, to which address.
func TestTraceNATOutgoing(t *testing.T) {
	m := natModel(t)
	a := netip.MustParseAddr
	local := []netip.Addr{a("192.168.60.11"), a("127.0.0.1"), a("10.65.1.0")}
	pkt := func(src, dst string, proto uint8) tracer.Packet {
		return tracer.Packet{Path: tracer.Forward, IIF: "eth9", OIF: "eth0", Src: a(src), Dst: a(dst), Proto: proto, SPort: 40000, DPort: 443,
			Local: local, OIFAddrs: []netip.Addr{a("192.168.60.11")}, LocalKnown: true}
	}
	for _, tc := range []struct {
		name     string
		p        tracer.Packet
		want     string // "" for no NAT
		rule     string // a part of the deciding rule's comment
		hasPorts bool
	}{
		{"natOutgoing pod to the internet, tcp", pkt("10.65.1.1", "1.1.1.1", tracer.ProtoTCP), "192.168.60.11", "TCP source ports 32768-65535", true},
		{"natOutgoing pod to the internet, icmp", pkt("10.65.1.1", "1.1.1.1", tracer.ProtoICMP), "192.168.60.11", "leaving the pools", false},
		{"natOutgoing pod to another pool", pkt("10.65.1.1", "10.66.2.1", tracer.ProtoTCP), "", "", false},
		{"plain pod to the internet", pkt("10.66.1.1", "1.1.1.1", tracer.ProtoTCP), "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tracer.Trace(m, tc.p)
			require.NoError(t, err)
			assert.Equal(t, "accept", res.Verdict)
			if tc.want == "" {
				assert.Nil(t, res.NAT)
				return
			}
			require.NotNil(t, res.NAT)
			assert.Equal(t, "masquerade", res.NAT.Kind)
			assert.Equal(t, tc.want, res.NAT.To.String())
			assert.Equal(t, tc.hasPorts, res.NAT.Ports != nil)
			assert.True(t, res.NAT.FullyRandom)
			st := res.Steps[res.NATStep]
			assert.Equal(t, render.ChainNATOutgoing, st.Chain)
			assert.Contains(t, st.Rule.Comment, tc.rule)
		})
	}
	// An established packet does not meet the nat chain.
	p := pkt("10.65.1.1", "1.1.1.1", tracer.ProtoTCP)
	p.Ct = nft.CtStateEstablished
	res, err := tracer.Trace(m, p)
	require.NoError(t, err)
	assert.Nil(t, res.NAT)

	// Without the host's addresses, a fib address-type rule on the path
	// cannot be evaluated: the tracer refuses rather than guesses.
	p = pkt("192.168.60.12", "192.168.60.11", tracer.ProtoUDP)
	p.Path, p.OIF, p.DPort, p.LocalKnown = tracer.Input, "", 4789, false
	_, err = tracer.Trace(m, p)
	var te *tracer.Error
	require.True(t, errors.As(err, &te), "error %v", err)
	assert.Contains(t, te.Reason, "addresses were not given")
	// With them, VXLAN from a Calico host is accepted by the tunnel rule.
	p.LocalKnown = true
	res, err = tracer.Trace(m, p)
	require.NoError(t, err)
	assert.Equal(t, "accept", res.Verdict)
	assert.True(t, res.Notrack, "VXLAN is not tracked")
}
