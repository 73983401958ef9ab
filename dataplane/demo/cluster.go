package demo

// The demo's second part: two nodes whose pods talk over VXLAN.
//
//	[pod-a] 10.65.1.1 ─ cali-a ─┐                               ┌─ cali-c ─ 10.65.2.1 [pod-c]
//	[pod-b] 10.65.1.2 ─ cali-b ─┤ [node1] eth0 ──── eth0 [node2] ┘
//	                             192.168.60.11     192.168.60.12
//	                             vxlan.calico 10.65.1.0   vxlan.calico 10.65.2.0
//
// Each node applies its part of the example cluster
// (examples/cluster-node1.yaml, cluster-node2.yaml): nftep makes the VXLAN
// device, the remote VTEP's neighbour and FDB entry, the route to the
// other node's block and the blackhole of its own, and the rules; pod-c
// admits tcp 8080 from pod-a only, across the tunnel.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/examples"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/overlay"
)

// clusterNode is one node of the second part.
type clusterNode struct {
	name, addr string // node1, 192.168.60.11/24
	state      []byte
	pods       []*pod
	ns         *netnsutil.NS
}

func clusterNodes() []*clusterNode {
	return []*clusterNode{
		{name: "node1", addr: "192.168.60.11/24", state: examples.ClusterNode1, pods: []*pod{
			{name: "pod-a", iface: "cali-a", addr: "10.65.1.1", mac: "02:00:0a:41:01:01", note: "may open tcp 8080 on pod-c"},
			{name: "pod-b", iface: "cali-b", addr: "10.65.1.2", mac: "02:00:0a:41:01:02", note: "may not"},
		}},
		{name: "node2", addr: "192.168.60.12/24", state: examples.ClusterNode2, pods: []*pod{
			{name: "pod-c", iface: "cali-c", addr: "10.65.2.1", mac: "02:00:0a:41:02:01", ports: []int{8080}, note: "accepts tcp 8080 from pod-a only"},
		}},
	}
}

// clusterChecks are the connections across the nodes.
var clusterChecks = []Check{
	{From: "node1/pod-a", To: "node2/pod-c", Port: 8080, Want: true, Why: "node2's policy demo/allow-a-to-c-8080 admits pod-a's address"},
	{From: "node1/pod-b", To: "node2/pod-c", Port: 8080, Want: false, Why: "pod-b is not in the policy's IP set: node2 drops it out of the tunnel"},
}

// ClusterResult is what the second part saw.
type ClusterResult struct {
	// Checks are the connections across the nodes.
	Checks []Check
	// Kernel is node1's cluster networking after the apply (what `nftep
	// show` prints after the tables).
	Kernel *overlay.Kernel
	// VXLANPackets counts the packets node1's vxlan.calico sent during the
	// checks.
	VXLANPackets uint64
}

// runCluster runs the second part. Its namespaces are added to
// res.Namespaces as they are made; the returned cleanup (never nil)
// removes them.
func runCluster(ctx context.Context, p *printer, prefix, tmp string, opts Options, res *Result) (cleanup func(remove bool) error, err error) {
	var made madeNS
	cleanup = made.cleanup
	create := func(name string) (*netnsutil.NS, error) {
		ns, err := netnsutil.Create(name)
		if err != nil {
			return nil, err
		}
		made = append(made, ns)
		res.Namespaces = append(res.Namespaces, ns.Name)
		return ns, nil
	}
	nodes := clusterNodes()
	byName := map[string]*pod{}
	for _, n := range nodes {
		if n.ns, err = create(prefix + "-" + n.name); err != nil {
			return cleanup, err
		}
		if err := n.ns.Do(func() error {
			return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0)
		}); err != nil {
			return cleanup, fmt.Errorf("%s: enable forwarding: %w", n.name, err)
		}
	}
	// The fabric: one veth between the nodes' eth0.
	if err := netnsutil.Veth(nodes[0].ns, "eth0", nodes[1].ns, "eth0", nil); err != nil {
		return cleanup, fmt.Errorf("fabric: %w", err)
	}
	for _, n := range nodes {
		nl, err := n.ns.Netlink()
		if err != nil {
			return cleanup, err
		}
		if err := addAddr(nl, "eth0", n.addr); err != nil {
			return cleanup, fmt.Errorf("%s: %w", n.name, err)
		}
		for _, pd := range n.pods {
			if pd.ns, err = create(prefix + "-" + n.name + "-" + pd.name); err != nil {
				return cleanup, err
			}
			if err := wirePod(n.ns, nl, pd); err != nil {
				return cleanup, fmt.Errorf("%s/%s: %w", n.name, pd.name, err)
			}
			byName[n.name+"/"+pd.name] = pd
		}
	}

	p.section("8. Two nodes over VXLAN")
	for _, n := range nodes {
		p.line("%s  eth0 %s (namespace %s)", n.name, strings.TrimSuffix(n.addr, "/24"), n.ns.Name)
		for _, pd := range n.pods {
			p.line("  %-6s %-10s ── %-6s  %s", pd.name, pd.addr, pd.iface, pd.note)
		}
	}
	listeners, err := listen(nodes[1].pods)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	if err != nil {
		return cleanup, err
	}
	for _, n := range nodes {
		state := filepath.Join(tmp, "cluster-"+n.name+".yaml")
		if err := os.WriteFile(state, n.state, 0o644); err != nil {
			return cleanup, fmt.Errorf("write %s's state: %w", n.name, err)
		}
		dopts := dataplane.Options{Table: opts.Table, Namespace: n.ns, RunDir: filepath.Join(tmp, "run-"+n.name), Logger: opts.Logger}
		start := time.Now()
		ar, err := dataplane.Apply(ctx, dopts, state)
		if err != nil {
			return cleanup, fmt.Errorf("%s: %w", n.name, err)
		}
		p.line("nftep apply --state cluster-%s.yaml: table inet %s and cluster networking in %s", n.name, ar.Table, time.Since(start).Round(time.Millisecond))
	}
	nl1, err := nodes[0].ns.Netlink()
	if err != nil {
		return cleanup, err
	}
	cr := &ClusterResult{}
	res.Cluster = cr
	if cr.Kernel, err = overlay.ReadKernel(nl1, overlay.Config{}.ExclusiveProtocol()); err != nil {
		return cleanup, fmt.Errorf("node1: %w", err)
	}
	p.line("node1's VXLAN device, remote VTEP (neighbour, FDB) and cluster routes (nftep show prints them after the tables):")
	p.block(strings.Join(cr.Kernel.Commands(), "\n"))

	sent := func() uint64 {
		l, err := nl1.LinkByName(overlay.VXLANDevice)
		if err != nil || l.Attrs().Statistics == nil {
			return 0
		}
		return l.Attrs().Statistics.TxPackets
	}
	before := sent()
	cr.Checks = tryAll(ctx, byName, clusterChecks, opts.Timeout)
	cr.VXLANPackets = sent() - before
	p.line("connections across the nodes (real TCP, %s timeout):", opts.Timeout)
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for _, c := range cr.Checks {
		mark, verdict := "✓", "as expected"
		if !c.OK() {
			mark, verdict = "✗", "UNEXPECTED: expected "+allowedWord(c.Want)
		}
		fmt.Fprintf(tw, "  %s %s → %s tcp/%d\t%s, %s\t(%s)\n", mark, c.From, c.To, c.Port, allowedWord(c.Got), verdict, c.Why)
	}
	tw.Flush()
	carried := "carried them"
	if cr.VXLANPackets == 0 {
		carried = "carried none of them"
	}
	p.line("node1's vxlan.calico %s: VXLAN, VNI %d, UDP port %d, to %s", carried,
		overlay.DefaultVNI, overlay.DefaultPort, remoteVTEP(cr.Kernel))
	if err := ctx.Err(); err != nil {
		return cleanup, fmt.Errorf("interrupted: %w", err)
	}
	return cleanup, nil
}

// remoteVTEP names the FDB entries' destinations.
func remoteVTEP(k *overlay.Kernel) string {
	var out []string
	for _, f := range k.FDB {
		out = append(out, f.Dst)
	}
	if len(out) == 0 {
		return "nowhere (no FDB entry)"
	}
	return strings.Join(out, ", ")
}
