package pools

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// Conventions: this node is node1 (192.168.60.11, fd00:60::11), node2 is
// 192.168.60.12; pools are 10.65.0.0/16 and fd00:65::/64 (natOutgoing in
// most tests), 10.66.0.0/16 (plain) and 10.96.0.0/16 (LoadBalancer only).

// node is a pools manager over a Fake-backed table holding the static
// chains, as the engine builds it.
type node struct {
	t     *testing.T
	m     *Manager
	table *nft.Table
	fake  *nft.Fake
}

func newNode(t *testing.T, kv map[string]string) *node {
	t.Helper()
	rcfg, err := render.ParseConfig(kv)
	require.NoError(t, err)
	fake := nft.NewFake()
	tbl, err := nft.NewTable(nft.TableConfig{Family: nft.FamilyINet, Name: rcfg.TableName, Transport: fake})
	require.NoError(t, err)
	chains, sets := render.Static(rcfg)
	for _, s := range sets {
		tbl.Desired().SetSet(s)
	}
	for _, c := range chains {
		tbl.Desired().SetChain(c)
	}
	n := &node{t: t, m: New(rcfg, Config{Hostname: "node1"}, tbl.Desired(), nil), table: tbl, fake: fake}
	n.send()
	return n
}

// send hands msgs to the manager as one batch and applies the result.
func (n *node) send(msgs ...any) *nft.Transaction {
	n.t.Helper()
	for _, m := range msgs {
		n.m.OnUpdate(m)
	}
	require.NoError(n.t, n.m.ResolveUpdateBatch())
	require.NoError(n.t, n.m.CompleteDeferredWork())
	_, err := n.table.Apply(context.Background())
	require.NoError(n.t, err)
	return n.table.LastTransaction()
}

// elements returns the keys of a set of the programmed table.
func (n *node) elements(set string) []string {
	s := n.table.Desired().Set(set)
	require.NotNil(n.t, s, "set %s", set)
	var out []string
	for _, e := range s.SortedElements() {
		out = append(out, e.Key)
	}
	return out
}

func (n *node) chain(name string) string {
	return n.table.Desired().Chain(name).String()
}

func pool(cidr string, masq bool, uses ...string) *proto.IPAMPoolUpdate {
	if len(uses) == 0 {
		uses = []string{"Workload", "Tunnel"}
	}
	return &proto.IPAMPoolUpdate{Id: strings.ReplaceAll(cidr, "/", "-"), Pool: &proto.IPAMPool{Cidr: cidr, Masquerade: masq, AllowedUses: uses}}
}

func host(name, v4, v6 string) *proto.HostMetadataUpdate {
	return &proto.HostMetadataUpdate{Hostname: name, Ipv4Addr: v4, Ipv6Addr: v6}
}

// TestPoolsSetsAndChain walks Felix's masquerade manager cases
// (masq_mgr_test.go): sets start empty, a natOutgoing pool fills both sets
// and activates the chain, a plain pool only the all-pools set, a
// LoadBalancer-only pool only the masq set; removing the natOutgoing pool
// empties the chain.
func TestPoolsSetsAndChain(t *testing.T) {
	n := newNode(t, nil)
	// 1. Nothing yet: empty sets, empty chain.
	assert.Empty(t, n.elements("all-pools-v4"))
	assert.Empty(t, n.table.Desired().Chain(render.ChainNATOutgoing).Rules)

	// 2. A natOutgoing pool, a plain one, a LoadBalancer-only one with
	// natOutgoing, and an IPv6 natOutgoing pool.
	n.send(pool("10.65.0.0/16", true), pool("10.66.0.0/16", false), pool("10.96.0.0/16", true, "LoadBalancer"), pool("fd00:65::/64", true))
	assert.Equal(t, []string{"10.65.0.0/16", "10.66.0.0/16"}, n.elements("all-pools-v4"))
	assert.Equal(t, []string{"10.65.0.0/16", "10.96.0.0/16"}, n.elements("masq-pools-v4"))
	assert.Equal(t, []string{"fd00:65::/64"}, n.elements("all-pools-v6"))
	assert.Equal(t, testutil.Dedent(`
		chain nat-outgoing {
			ip saddr @masq-pools-v4 ip daddr != @all-pools-v4 masquerade fully-random comment "natOutgoing: Masquerade IPv4 traffic from a natOutgoing pool leaving the pools"
			ip6 saddr @masq-pools-v6 ip6 daddr != @all-pools-v6 masquerade fully-random comment "natOutgoing: Masquerade IPv6 traffic from a natOutgoing pool leaving the pools"
		}
	`), n.chain(render.ChainNATOutgoing))

	// 3. natOutgoing off on the IPv6 pool: no IPv6 rule.
	n.send(pool("fd00:65::/64", false))
	assert.NotContains(t, n.chain(render.ChainNATOutgoing), "ip6")
	assert.Empty(t, n.elements("masq-pools-v6"))

	// 4. Remove the IPv4 natOutgoing pools: the chain is empty.
	n.send(&proto.IPAMPoolRemove{Id: "10.65.0.0-16"}, &proto.IPAMPoolRemove{Id: "10.96.0.0-16"})
	assert.Empty(t, n.table.Desired().Chain(render.ChainNATOutgoing).Rules)
	assert.Equal(t, []string{"10.66.0.0/16"}, n.elements("all-pools-v4"))

	// 5. A repeated batch with nothing new sends nothing.
	tx := n.send(pool("10.66.0.0/16", false))
	assert.Zero(t, tx.NumOperations(), "an unchanged pool: %s", tx)
}

// TestPoolChangeIsElementsOnly: once a family has a natOutgoing pool,
// adding another pool (natOutgoing or not) or changing one sends set
// elements only, never a chain.
func TestPoolChangeIsElementsOnly(t *testing.T) {
	n := newNode(t, nil)
	n.send(pool("10.65.0.0/16", true))
	for i, msgs := range [][]any{
		{pool("10.66.0.0/16", false)},                  // a plain pool
		{pool("10.67.0.0/16", true)},                   // another natOutgoing pool
		{pool("10.66.0.0/16", true)},                   // natOutgoing turned on
		{&proto.IPAMPoolRemove{Id: "10.67.0.0-16"}},    // one removed
		{host("node2", "192.168.60.12/24", "fd00::2")}, // a host
	} {
		tx := n.send(msgs...)
		require.NotZero(t, tx.NumOperations(), "step %d sent nothing", i+1)
		for _, op := range tx.Ops {
			assert.Contains(t, []nft.OpKind{nft.OpAddElements, nft.OpDeleteElements}, op.Kind, "step %d: %s", i+1, tx)
		}
	}
	// Adding the plain pool was one element: 10.66.0.0/16 in all-pools-v4.
	n2 := newNode(t, nil)
	n2.send(pool("10.65.0.0/16", true))
	tx := n2.send(pool("10.66.0.0/16", false))
	assert.Equal(t, 1, tx.NumOperations(), "one pool, one element: %s", tx)
}

// TestHostsAndVTEPs: all-hosts holds every node (this one too), with
// ExternalNodesCIDRList in IPv4; a node whose IPv4 address became empty stays
// until it is removed (Felix's quirk); vxlan-sources holds remote VTEPs'
// parents, not this node's, and ExternalNodesCIDRList by family.
func TestHostsAndVTEPs(t *testing.T) {
	n := newNode(t, map[string]string{render.KeyExternalNodesCIDRList: "172.16.0.0/12,fd00:99::/64"})
	n.send(host("node1", "192.168.60.11/24", "fd00:60::11/64"), host("node2", "192.168.60.12/24", "fd00:60::12/64"),
		&proto.VXLANTunnelEndpointUpdate{Node: "node1", Mac: "66:00:00:00:00:01", Ipv4Addr: "10.65.1.0", ParentDeviceIp: "192.168.60.11"},
		&proto.VXLANTunnelEndpointUpdate{Node: "node2", Mac: "66:2d:bf:44:a6:8b", Ipv4Addr: "10.65.2.0", ParentDeviceIp: "192.168.60.12",
			MacV6: "66:32:42:ed:de:d5", Ipv6Addr: "fd00:65::2:0", ParentDeviceIpv6: "fd00:60::12"})
	assert.Equal(t, []string{"172.16.0.0/12", "192.168.60.11", "192.168.60.12"}, n.elements("all-hosts-v4"))
	assert.Equal(t, []string{"fd00:60::11", "fd00:60::12"}, n.elements("all-hosts-v6"))
	assert.Equal(t, []string{"172.16.0.0/12", "192.168.60.12"}, n.elements("vxlan-sources-v4"))
	assert.Equal(t, []string{"fd00:60::12", "fd00:99::/64"}, n.elements("vxlan-sources-v6"))

	n.send(host("node2", "", "fd00:60::12/64"))
	assert.Contains(t, n.elements("all-hosts-v4"), "192.168.60.12", "Felix keeps a node whose address became empty")
	n.send(&proto.HostMetadataRemove{Hostname: "node2"}, &proto.VXLANTunnelEndpointRemove{Node: "node2"})
	assert.NotContains(t, n.elements("all-hosts-v4"), "192.168.60.12")
	assert.Equal(t, []string{"172.16.0.0/12"}, n.elements("vxlan-sources-v4"))
}

// TestEncapsulationFirstDecides: the first Encapsulation writes the tunnel
// rules; a different later one changes nothing (Felix restarts the driver).
func TestEncapsulationFirstDecides(t *testing.T) {
	n := newNode(t, map[string]string{render.KeyIPv4VXLANTunnelAddr: "10.65.1.0"})
	assert.Empty(t, n.table.Desired().Chain(render.ChainFilterTunnelInput).Rules, "nothing before Encapsulation")
	n.send(&proto.Encapsulation{VxlanEnabled: true})
	in := n.chain(render.ChainFilterTunnelInput)
	assert.Contains(t, in, "ip saddr @vxlan-sources-v4 udp dport 4789 fib daddr type local accept")
	assert.Contains(t, n.chain(render.ChainRawTunnelPrerouting), "udp dport 4789 notrack")
	assert.Contains(t, n.chain(render.ChainNATTunnelSource), `oifname "vxlan.calico"`)
	tx := n.send(&proto.Encapsulation{IpipEnabled: true})
	assert.Zero(t, tx.NumOperations())
	assert.Equal(t, in, n.chain(render.ChainFilterTunnelInput))
	e, ok := n.m.Encap()
	assert.True(t, ok)
	assert.Equal(t, render.Encap{VXLAN: true}, e)
}

// TestIPv6Off: with Ipv6Support=false there is no IPv6 set and no IPv6
// rule, whatever the pools.
func TestIPv6Off(t *testing.T) {
	n := newNode(t, map[string]string{render.KeyIpv6Support: "false"})
	n.send(pool("10.65.0.0/16", true), pool("fd00:65::/64", true), host("node1", "192.168.60.11/24", "fd00:60::11/64"))
	for _, name := range n.table.Desired().SetNames() {
		assert.False(t, strings.HasSuffix(name, "-v6"), "set %s with IPv6 off", name)
	}
	assert.NotContains(t, n.chain(render.ChainNATOutgoing), "ip6")
	assert.Contains(t, n.chain(render.ChainNATOutgoing), "ip saddr @masq-pools-v4")
	pools, nat := n.m.Counts()
	assert.Equal(t, [2]int{2, 2}, [2]int{pools, nat})
}

// TestReplayTwoNode replays the recorded real-Felix streams that carry
// pools (scenario 1: Felix starts, natOutgoing off; scenario 2: natOutgoing
// turned on for both pools) on each node, and checks the sets and the
// chain after each.
func TestReplayTwoNode(t *testing.T) {
	for _, nodeName := range []string{"n1", "n2"} {
		t.Run(nodeName, func(t *testing.T) {
			s1 := testutil.FelixMessages(t, "two-node/scenario1-"+nodeName+".bin")
			cfg := s1[0].GetConfigUpdate()
			require.NotNil(t, cfg, "the stream starts with ConfigUpdate")
			n := newNode(t, cfg.GetConfig())
			replay := func(msgs []*proto.ToDataplane) {
				var batch []any
				for _, m := range msgs[:] {
					if p := testutil.Payload(m); p != nil {
						if _, ok := p.(*proto.ConfigUpdate); !ok {
							batch = append(batch, p)
						}
					}
				}
				n.send(batch...)
			}
			replay(s1)
			assert.Equal(t, []string{"10.65.0.0/16"}, n.elements("all-pools-v4"))
			assert.Equal(t, []string{"fd00:65::/64"}, n.elements("all-pools-v6"))
			assert.Empty(t, n.elements("masq-pools-v4"))
			assert.Empty(t, n.table.Desired().Chain(render.ChainNATOutgoing).Rules, "scenario 1: natOutgoing off")
			assert.Equal(t, []string{"192.168.60.11", "192.168.60.12"}, n.elements("all-hosts-v4"))
			assert.Equal(t, []string{"fd00:60::11", "fd00:60::12"}, n.elements("all-hosts-v6"))
			assert.Empty(t, n.table.Desired().Chain(render.ChainFilterTunnelInput).Rules, "no encapsulation")

			replay(testutil.FelixMessages(t, "two-node/scenario2-delta-"+nodeName+".bin"))
			assert.Equal(t, []string{"10.65.0.0/16"}, n.elements("masq-pools-v4"))
			assert.Equal(t, []string{"fd00:65::/64"}, n.elements("masq-pools-v6"))
			assert.Equal(t, testutil.Dedent(`
				chain nat-outgoing {
					ip saddr @masq-pools-v4 ip daddr != @all-pools-v4 masquerade fully-random comment "natOutgoing: Masquerade IPv4 traffic from a natOutgoing pool leaving the pools"
					ip6 saddr @masq-pools-v6 ip6 daddr != @all-pools-v6 masquerade fully-random comment "natOutgoing: Masquerade IPv6 traffic from a natOutgoing pool leaving the pools"
				}
			`), n.chain(render.ChainNATOutgoing))
			// What the Fake holds is what the model says.
			assert.Contains(t, n.fake.DumpTable(nft.FamilyINet, "nftep"), "masquerade fully-random")
		})
	}
}
