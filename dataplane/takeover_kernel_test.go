package dataplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/metrics"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// takeoverNode is the node of the recorded leftovers (testdata/felix/
// leftovers/README.md): pods p1, p2, p3 on cali1..3 with 10.65.0.N, and an
// external host on eth0 (the node 192.168.50.1, the host 192.168.50.2 and
// 203.0.113.7).
type takeoverNode struct {
	node, ext *netnstest.NS
	pods      [3]*netnstest.NS
}

func newTakeoverNode(t *testing.T) *takeoverNode {
	n := &takeoverNode{node: netnstest.New(t), ext: netnstest.New(t)}
	n.node.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	for i := range n.pods {
		pod := netnstest.New(t)
		iface := "cali" + string(rune('1'+i))
		netnstest.Veth(t, n.node, iface, pod, "eth0")
		pod.AddAddr(t, "eth0", "10.65.0."+string(rune('1'+i))+"/32")
		pod.AddRoute(t, "169.254.1.1/32", "eth0", "")
		pod.AddRoute(t, "0.0.0.0/0", "eth0", "169.254.1.1")
		n.node.Run(t, "sysctl", "-qw", "net.ipv4.conf."+iface+".proxy_arp=1")
		n.node.Run(t, "sysctl", "-qw", "net.ipv4.neigh."+iface+".proxy_delay=0")
		n.pods[i] = pod
	}
	netnstest.Veth(t, n.node, "eth0", n.ext, "eth0")
	n.node.AddAddr(t, "eth0", "192.168.50.1/24")
	n.ext.AddAddr(t, "eth0", "192.168.50.2/24")
	n.ext.AddAddr(t, "eth0", "203.0.113.7/32")
	n.ext.AddRoute(t, "10.0.0.0/8", "eth0", "192.168.50.1")
	// The pods' gateway, 169.254.1.1, is answered by proxy ARP on the
	// cali interfaces, which needs a route to it elsewhere.
	n.node.AddRoute(t, "0.0.0.0/0", "eth0", "192.168.50.2")
	return n
}

// probe connects from one namespace to addr: nil if it connected.
func probe(t *testing.T, from, to *netnstest.NS, addr string) error {
	t.Helper()
	return testutil.Connect(t, from, to, addr, 700*time.Millisecond)
}

// probeVia listens on listen in namespace to and connects from namespace
// from to service (an address that DNAT sends to listen): nil if it
// connected.
func probeVia(t *testing.T, from, to *netnstest.NS, listen, service string) error {
	t.Helper()
	defer acceptAll(t, to, listen)()
	return dial(from, net.Dialer{Timeout: 700 * time.Millisecond}, service)
}

// probeFrom connects from the address src of namespace from to addr in
// namespace to: nil if it connected.
func probeFrom(t *testing.T, from *netnstest.NS, src string, to *netnstest.NS, addr string) error {
	t.Helper()
	defer acceptAll(t, to, addr)()
	return dial(from, net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 700 * time.Millisecond}, addr)
}

// acceptAll listens on addr in namespace ns and accepts (and closes) every
// connection until the function it returns is called.
func acceptAll(t *testing.T, ns *netnstest.NS, addr string) (stop func()) {
	t.Helper()
	var ln net.Listener
	require.NoError(t, ns.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return func() { ln.Close() }
}

// dial connects with d from namespace ns to addr: nil if it connected.
func dial(ns *netnstest.NS, d net.Dialer, addr string) error {
	return ns.Do(func() error {
		c, err := d.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
}

// takeoverState is nftep's state for the node: p2 now accepts TCP 8080 and
// 9090 (the recorded Felix allowed 8080 only), p3 accepts TCP 7000 only,
// p1 accepts anything; every pod may send anything.
func takeoverState(t *testing.T, n *takeoverNode, path string, config map[string]string) {
	t.Helper()
	tcp := &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}}
	policy := func(name string, ports ...int32) *proto.ToDataplane {
		var rules []*proto.Rule
		for _, p := range ports {
			rules = append(rules, &proto.Rule{Action: "allow", Protocol: tcp, DstPorts: []*proto.PortRange{{First: p, Last: p}}, RuleId: name})
		}
		return &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
			Id:     &proto.PolicyID{Name: name, Kind: "GlobalNetworkPolicy"},
			Policy: &proto.Policy{Tier: "default", InboundRules: rules, OutboundRules: []*proto.Rule{{Action: "allow", RuleId: name + "-out"}}},
		}}}
	}
	msgs := []*proto.ToDataplane{
		policy("p2-8080-9090", 8080, 9090), policy("p3-7000", 7000),
		{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
			Id: &proto.PolicyID{Name: "p1-any", Kind: "GlobalNetworkPolicy"},
			Policy: &proto.Policy{Tier: "default", InboundRules: []*proto.Rule{{Action: "allow", RuleId: "any"}},
				OutboundRules: []*proto.Rule{{Action: "allow", RuleId: "any-out"}}},
		}}},
	}
	for i, pol := range []string{"p1-any", "p2-8080-9090", "p3-7000"} {
		iface := "cali" + string(rune('1'+i))
		msgs = append(msgs, &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
			Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "default/p" + string(rune('1'+i)), EndpointId: "eth0"},
			Endpoint: &proto.WorkloadEndpoint{State: "active", Name: iface, Mac: n.pods[i].Link(t, "eth0").Attrs().HardwareAddr.String(),
				Ipv4Nets: []string{"10.65.0." + string(rune('1'+i)) + "/32"},
				Tiers:    []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{{Name: pol, Kind: "GlobalNetworkPolicy"}}, EgressPolicies: []*proto.PolicyID{{Name: pol, Kind: "GlobalNetworkPolicy"}}}}},
		}}})
	}
	writeStateFile(t, path, config, msgs)
}

// leftoverFile returns a recording of testdata/felix/leftovers.
func leftoverFile(t *testing.T, name string) string {
	return testutil.FelixRecording(t, "leftovers/"+name)
}

var legacyWarningLine = regexp.MustCompile(`# Warning: ip6?tables-legacy tables present, use ip6?tables-legacy-save to see them\n`)

// restoreInto feeds data to a command inside ns.
func restoreInto(t *testing.T, ns *netnstest.NS, data []byte, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s: %s", name, out)
}

// loadFelixLeftovers loads both recorded leftovers of a real Felix:
// nftables mode's tables and iptables mode's ipsets and iptables-nft rules.
func loadFelixLeftovers(t *testing.T, ns *netnstest.NS) {
	t.Helper()
	ns.Run(t, "nft", "-f", leftoverFile(t, "felix-nft-mode.nft"))
	read := func(name string) []byte {
		b, err := os.ReadFile(leftoverFile(t, name))
		require.NoError(t, err)
		return legacyWarningLine.ReplaceAll(b, nil)
	}
	restoreInto(t, ns, read("felix-iptables-nft.ipset-save"), "ipset", "restore")
	restoreInto(t, ns, read("felix-iptables-nft.iptables-save"), "iptables-nft-restore", "--noflush")
	restoreInto(t, ns, read("felix-iptables-nft.ip6tables-save"), "ip6tables-nft-restore", "--noflush")
}

// kubeProxyIptables is kube-proxy in iptables mode over iptables-nft: two
// ClusterIPs, to p2:8080 (nftep's policy allows it) and to p3:7001 (it does
// not).
const kubeProxyIptables = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-WEB - [0:0]
:KUBE-SVC-DENIED - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.20/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-WEB
-A KUBE-SERVICES -d 10.96.0.21/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-DENIED
-A KUBE-SVC-WEB -p tcp -j DNAT --to-destination 10.65.0.2:8080
-A KUBE-SVC-DENIED -p tcp -j DNAT --to-destination 10.65.0.3:7001
COMMIT
`

// kernelState lists what `nftep cleanup` must restore: routes, neighbours,
// links and the bridge FDB of the node.
func kernelState(t *testing.T, ns *netnstest.NS) map[string]string {
	t.Helper()
	// IPv6 forwarding, a sysctl nftep sets on workload interfaces and
	// leaves (docs/migration.md says why), makes the kernel add the
	// subnet-router anycast route fe80:: and join the all-routers
	// multicast groups (33:33:… FDB entries): the kernel's, not nftep's.
	// iproute2 also prints "Peer netns reference is invalid" on stderr
	// when another test's namespace comes or goes during the listing.
	kernels := regexp.MustCompile(`(?m)^(anycast fe80:: dev cali\d .*|33:33:\S+ dev cali\d self permanent|Error: Peer netns reference is invalid\.)\n`)
	show := func(args ...string) string { return kernels.ReplaceAllString(ns.Run(t, args[0], args[1:]...), "") }
	return map[string]string{
		"ip route":    show("ip", "route", "show", "table", "all"),
		"ip -6 route": show("ip", "-6", "route", "show", "table", "all"),
		"ip neigh":    show("ip", "neigh", "show", "nud", "permanent"),
		"ip link":     show("ip", "-o", "link", "show"),
		"bridge fdb":  show("bridge", "fdb", "show"),
	}
}

// tablesOf lists every table of ns as `nft -a -s list table` by "family
// name".
func tablesOf(t *testing.T, ns *netnstest.NS) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(ns.Run(t, "nft", "list", "tables")), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			out[f[1]+" "+f[2]] = ns.Run(t, "nft", "-a", "-s", "list", "table", f[1], f[2])
		}
	}
	return out
}

// TestKernelTakeOverFromFelix is issue 25 end to end. A node holds what a
// real Felix left (both modes' recordings) beside kube-proxy (nftables
// mode and iptables-nft mode), firewalld, Docker, a user's rule and a
// Tailscale-like table, and an iptables-legacy rule. Before nftep, the
// leftovers deny what nftep's state allows (p2:9090); nftep run takes over:
// traffic follows nftep's state alone, the neighbours' tables are byte for
// byte as they were and their traffic keeps its verdicts, no Calico ipset
// is left, a re-added leftover is gone within a second, the status reports
// the take-over and the legacy table; `nftep cleanup` then leaves no trace
// of nftep in the ruleset, routes, neighbours, links and FDB.
func TestKernelTakeOverFromFelix(t *testing.T) {
	for _, tool := range []string{"nft", "ipset", "iptables-nft-restore", "iptables-legacy", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (.ci/run installs it)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	n := newTakeoverNode(t)
	node, ext := n.node, n.ext
	p1, p2, p3 := n.pods[0], n.pods[1], n.pods[2]

	// The neighbours, then a snapshot of their tables.
	node.Run(t, "nft", "-f", filepath.Join(repoRoot(t), "takeover", "testdata", "neighbours.nft"))
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "takeover", "testdata", "neighbours.iptables"))
	require.NoError(t, err)
	restoreInto(t, node, b, "iptables-nft-restore", "--noflush")
	restoreInto(t, node, []byte(kubeProxyIptables), "iptables-nft-restore", "--noflush")
	node.Run(t, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "--dport", "5555", "-j", "DROP")
	neighbours := tablesOf(t, node)

	// What a killed Felix left.
	loadFelixLeftovers(t, node)
	for i := 1; i <= 3; i++ {
		node.AddRoute(t, "10.65.0."+string(rune('0'+i))+"/32", "cali"+string(rune('0'+i)), "")
	}
	require.NoError(t, probe(t, p1, p2, "10.65.0.2:8080"), "before: p2:8080 (the recorded policy allows it)")
	require.Error(t, probe(t, p1, p2, "10.65.0.2:9090"), "before: the leftovers deny p2:9090")
	require.Error(t, probe(t, p3, p2, "10.65.0.2:9090"), "before: the leftovers deny p2:9090")
	for i := 1; i <= 3; i++ {
		node.Run(t, "ip", "route", "del", "10.65.0."+string(rune('0'+i))+"/32")
	}
	// The kernel's own link-local addresses settle first (duplicate
	// address detection), so that the snapshot does not catch one still
	// tentative.
	require.Eventually(t, func() bool {
		return strings.TrimSpace(node.Run(t, "ip", "-6", "addr", "show", "tentative")) == ""
	}, 10*time.Second, 20*time.Millisecond)
	before := kernelState(t, node)

	state := filepath.Join(t.TempDir(), "node.json")
	takeoverState(t, n, state, map[string]string{"RouteRefreshInterval": "2"})
	obs := metrics.New(metrics.Options{NoRuntime: true})
	opts := dataplane.Options{Namespace: openNS(t, node), RunDir: t.TempDir(), Observer: obs}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dataplane.Run(ctx, opts, state, nil) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
	}
	defer stop()
	statusFile := filepath.Join(opts.RunDir, dataplane.StatusFileName)
	require.Eventually(t, func() bool {
		st, err := dataplane.ReadStatus(statusFile)
		return err == nil && !st.LastApply.IsZero() && st.InSync
	}, 10*time.Second, 20*time.Millisecond)
	tables := tablesOf(t, node)
	for _, gone := range []string{"ip calico", "ip6 calico", "arp calico-arp"} {
		assert.NotContains(t, tables, gone)
	}
	assert.Contains(t, tables, "inet nftep")

	t.Run("traffic follows nftep's state", func(t *testing.T) {
		require.Eventually(t, func() bool { return probe(t, p1, p2, "10.65.0.2:9090") == nil }, 5*time.Second, 10*time.Millisecond)
		assert.NoError(t, probe(t, p3, p2, "10.65.0.2:9090"))
		assert.NoError(t, probe(t, p1, p2, "10.65.0.2:8080"))
		assert.NoError(t, probe(t, p1, p3, "10.65.0.3:7000"))
		assert.Error(t, probe(t, p1, p3, "10.65.0.3:7001"), "nftep's policy denies p3:7001")
	})
	t.Run("kube-proxy", func(t *testing.T) {
		// nftables mode (ip kube-proxy) and iptables-nft mode (ip nat):
		// policy sees the pod's address after DNAT.
		assert.NoError(t, probeVia(t, p1, p2, "10.65.0.2:8080", "10.96.0.10:80"), "nftables-mode ClusterIP to p2:8080")
		assert.Error(t, probeVia(t, p1, p3, "10.65.0.3:7001", "10.96.0.11:80"), "nftables-mode ClusterIP to p3:7001")
		assert.NoError(t, probeVia(t, p1, p2, "10.65.0.2:8080", "10.96.0.20:80"), "iptables-mode ClusterIP to p2:8080")
		assert.Error(t, probeVia(t, p1, p3, "10.65.0.3:7001", "10.96.0.21:80"), "iptables-mode ClusterIP to p3:7001")
		// Without nftep's policy both would pass: p3 listens on 7001.
		assert.NoError(t, probeVia(t, p1, p3, "10.65.0.3:7000", "10.65.0.3:7000"))
	})
	t.Run("neighbours keep their verdicts", func(t *testing.T) {
		assert.NoError(t, probe(t, ext, node, "192.168.50.1:8088"))
		assert.Error(t, probe(t, ext, node, "192.168.50.1:7777"), "firewalld rejects 7777")
		assert.Error(t, probe(t, ext, node, "192.168.50.1:5555"), "the iptables-legacy rule drops 5555")
		assert.NoError(t, probe(t, ext, node, "192.168.50.1:2222"), "from 192.168.50.2")
		assert.Error(t, probeFrom(t, ext, "203.0.113.7", node, "192.168.50.1:2222"), "the user's rule in ip filter drops 203.0.113.7")
	})
	t.Run("neighbours byte-identical", func(t *testing.T) {
		now := tablesOf(t, node)
		for tbl, want := range neighbours {
			assert.Equal(t, want, now[tbl], "table %s", tbl)
		}
	})
	t.Run("no Calico ipset", func(t *testing.T) {
		assert.NotContains(t, node.Run(t, "ipset", "list", "-n"), "cali")
	})
	t.Run("status", func(t *testing.T) {
		st, err := dataplane.ReadStatus(statusFile)
		require.NoError(t, err)
		require.NotNil(t, st.Takeover)
		assert.Equal(t, 3, st.Takeover.RemovedTables)
		assert.Equal(t, 10, st.Takeover.RemovedIPSets)
		require.Len(t, st.Takeover.Legacy, 1)
		assert.Equal(t, "filter", st.Takeover.Legacy[0].Table)
		assert.Equal(t, 1, st.Takeover.Legacy[0].Rules)
		raw, err := os.ReadFile(statusFile)
		require.NoError(t, err)
		var j map[string]any
		require.NoError(t, json.Unmarshal(raw, &j))
		assert.Contains(t, j, "takeover")
		var text bytes.Buffer
		st.Format(&text)
		assert.Contains(t, text.String(), "iptables-legacy table ipv4 filter: 1 rules, 0 cali- chains")
		assert.Contains(t, text.String(), "remove Calico's: iptables-legacy-save -t filter |")
	})
	t.Run("metrics", func(t *testing.T) {
		var b strings.Builder
		require.NoError(t, obs.Registry().WriteText(&b))
		for _, line := range []string{
			`nftep_iptables_legacy_rules{family="ipv4",table="filter"} 1`,
			`nftep_calico_leftovers_removed_total{kind="table"} 3`,
			`nftep_calico_leftovers_removed_total{kind="ipset"} 10`,
			`nftep_calico_ipsets_kept 0`,
		} {
			assert.Contains(t, b.String(), line+"\n")
		}
	})
	t.Run("re-added leftovers gone within 1 s", func(t *testing.T) {
		var (
			mu      sync.Mutex
			commits []nft.Commit
		)
		wctx, wcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			_ = nft.WatchCommits(wctx, node.Fd(), func(c nft.Commit) {
				mu.Lock()
				commits = append(commits, c)
				mu.Unlock()
			})
		})
		defer func() { wcancel(); wg.Wait() }()
		time.Sleep(100 * time.Millisecond)
		var lat []time.Duration
		for round := 0; round < 5; round++ {
			mu.Lock()
			commits = nil
			mu.Unlock()
			node.Run(t, "nft", "-f", leftoverFile(t, "felix-nft-mode.nft"))
			var added, removed time.Time
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range commits {
					if c.Touches(nft.FamilyIP, "calico") {
						if c.Writer != nil && c.Writer.Name == "nft" {
							added = c.At
						} else if !added.IsZero() {
							removed = c.At
							return true
						}
					}
				}
				return false
			}, 2*time.Second, 5*time.Millisecond)
			lat = append(lat, removed.Sub(added))
			assert.NotContains(t, node.Run(t, "nft", "list", "tables"), "calico")
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		t.Logf("re-added leftovers removed after: p50 %v, max %v", lat[len(lat)/2], lat[len(lat)-1])
		assert.Less(t, lat[len(lat)-1], time.Second)
		assert.NoError(t, probe(t, p1, p2, "10.65.0.2:9090"))
	})

	stop()
	t.Run("cleanup leaves nothing of nftep", func(t *testing.T) {
		_, err := dataplane.Cleanup(context.Background(), opts, nil)
		require.NoError(t, err)
		now := tablesOf(t, node)
		for tbl := range now {
			assert.NotContains(t, []string{"inet nftep", "arp nftep"}, tbl)
			if _, ok := neighbours[tbl]; !ok {
				// Tables iptables-nft-restore created for Felix's
				// rules: iptables-nft's own, with empty base chains.
				assert.NotContains(t, now[tbl], "cali", "table %s", tbl)
			}
		}
		for tbl, want := range neighbours {
			assert.Equal(t, want, now[tbl], "table %s", tbl)
		}
		after := kernelState(t, node)
		for k, want := range before {
			assert.Equal(t, want, after[k], "%s after cleanup", k)
		}
	})
}
