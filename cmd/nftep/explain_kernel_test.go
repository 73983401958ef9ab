package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/explain"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
)

// explainNode is the topology of testdata/explain.yaml: a node namespace,
// a namespace per pod wired to it by a veth (cali-a … cali-x), and an
// external host behind the host endpoint hep0.
type explainNode struct {
	node, ext *netnstest.NS
	pods      map[string]*netnstest.NS // by interface: "cali-a"
	runDir    string
}

func newExplainNode(t *testing.T) *explainNode {
	n := &explainNode{node: netnstest.New(t), ext: netnstest.New(t), pods: map[string]*netnstest.NS{}, runDir: t.TempDir()}
	for _, p := range []struct{ iface, addr, mac string }{
		{"cali-a", "10.65.0.1", "02:00:0a:41:00:01"},
		{"cali-b", "10.65.0.2", "02:00:0a:41:00:02"},
		{"cali-c", "10.65.0.3", "02:00:0a:41:00:03"},
		{"cali-e", "10.65.0.5", "02:00:0a:41:00:05"},
		{"cali-x", "10.65.0.99", "02:00:0a:41:00:99"},
	} {
		pod := netnstest.New(t)
		netnstest.Veth(t, n.node, p.iface, pod, "eth0")
		mac, _ := net.ParseMAC(p.mac)
		if err := pod.Netlink().LinkSetHardwareAddr(pod.Link(t, "eth0"), mac); err != nil {
			t.Fatal(err)
		}
		pod.AddAddr(t, "eth0", p.addr+"/32")
		pod.AddRoute(t, "169.254.1.1/32", "eth0", "")
		pod.AddRoute(t, "0.0.0.0/0", "eth0", "169.254.1.1")
		// The pods reach the node's side of the veth without proxy ARP,
		// which nftep sets only on interfaces of active endpoints.
		hostMAC := n.node.Link(t, p.iface).Attrs().HardwareAddr
		if err := pod.Netlink().NeighAdd(&netlink.Neigh{LinkIndex: pod.Link(t, "eth0").Attrs().Index, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP("169.254.1.1"), HardwareAddr: hostMAC}); err != nil {
			t.Fatal(err)
		}
		n.pods[p.iface] = pod
	}
	// cali-x has no endpoint; its route is the CNI plugin's, so that the
	// reverse-path check passes and the unknown interface is what drops.
	n.node.AddRoute(t, "10.65.0.99/32", "cali-x", "")
	// pod-c's endpoint is admin down, so nftep programs no route to it;
	// the CNI plugin's keeps the reverse-path check passing.
	n.node.AddRoute(t, "10.65.0.3/32", "cali-c", "")
	netnstest.Veth(t, n.node, "hep0", n.ext, "eth0")
	n.node.AddAddr(t, "hep0", "192.168.99.1/24")
	n.ext.AddAddr(t, "eth0", "192.168.99.2/24")
	n.node.AddRoute(t, "0.0.0.0/0", "hep0", "192.168.99.2")
	// pod-a also owns an address nftep does not know: a spoofed source.
	n.pods["cali-a"].AddAddr(t, "eth0", "10.65.0.77/32")
	return n
}

// dial opens a TCP connection from namespace from (with source address
// src when valid) to addr in namespace to, and says whether it connected.
func dial(t *testing.T, from, to *netnstest.NS, src netip.Addr, addr string) bool {
	t.Helper()
	var ln net.Listener
	if err := to.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	if src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	var conn net.Conn
	err := from.Do(func() (err error) { conn, err = d.Dial("tcp", addr); return err })
	if err == nil {
		conn.Close()
		return true
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("dial %s: %v (neither connected nor timed out: not what a drop does)", addr, err)
	}
	return false
}

// TestKernelExplainAgreesWithPackets sends real packets through a node
// programmed from testdata/explain.yaml, for every reason nftep drops a
// packet and the allows beside them, and runs `nftep explain` on each: its
// verdict must be what the packet met, and it must name the deciding rule.
func TestKernelExplainAgreesWithPackets(t *testing.T) {
	withEnv(t)
	n := newExplainNode(t)
	g := []string{"--netns", n.node.Name, "--run-dir", n.runDir}
	if out, stderr, err := nftep(t, append(g, "apply", "--state", filepath.Join("testdata", "explain.yaml"))...); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, stderr)
	}

	for _, tc := range []struct {
		name     string
		from, to *netnstest.NS
		src      string // a source address other than the pod's
		addr     string // destination address:port
		args     []string
		want     string // verdict
		decider  string // a part of the deciding rule's comment
		allowed  string // a part of the allowing rule's comment
	}{{
		name: "tier allows after a pass", from: n.pods["cali-a"], to: n.pods["cali-b"], addr: "10.65.0.2:8080",
		args: []string{"--from", "pod-a", "--to", "pod-b", "--dport", "8080"},
		want: "accept", decider: "Policy explicitly accepted packet", allowed: "policy default/demo/allow-a-to-b-8080 inbound rule 0",
	}, {
		name: "pass to the next tier, then its end", from: n.pods["cali-a"], to: n.pods["cali-b"], addr: "10.65.0.2:9090",
		args: []string{"--from", "k8s/demo/pod-a/eth0", "--to", "cali-b", "--dport", "9090"},
		want: "drop", decider: "pod-b/eth0: End of tier default",
	}, {
		name: "end of a tier", from: n.pods["cali-e"], to: n.pods["cali-b"], addr: "10.65.0.2:8080",
		args: []string{"--from", "pod-e", "--to", "10.65.0.2", "--dport", "8080"},
		want: "drop", decider: "pod-b/eth0: End of tier security",
	}, {
		name: "profile's final drop", from: n.pods["cali-b"], to: n.pods["cali-a"], addr: "10.65.0.1:8080",
		args: []string{"--from", "pod-b", "--to", "pod-a", "--dport", "8080"},
		want: "drop", decider: "pod-a/eth0: Drop if no profiles matched",
	}, {
		name: "unknown interface", from: n.pods["cali-x"], to: n.pods["cali-b"], addr: "10.65.0.2:8080",
		args: []string{"--from", "cali-x", "--to", "pod-b", "--dport", "8080"},
		want: "drop", decider: "Unknown workload interface",
	}, {
		name: "reverse-path check", from: n.pods["cali-a"], to: n.pods["cali-b"], src: "10.65.0.77", addr: "10.65.0.2:8080",
		args: []string{"--from", "pod-a", "--src", "10.65.0.77", "--to", "pod-b", "--dport", "8080"},
		want: "drop", decider: "fail the strict RPF check",
	}, {
		name: "admin-down endpoint", from: n.pods["cali-c"], to: n.pods["cali-b"], addr: "10.65.0.2:8080",
		args: []string{"--from", "pod-c", "--src", "10.65.0.3", "--to", "pod-b", "--dport", "8080"},
		want: "drop", decider: "pod-c/eth0: Endpoint admin disabled",
	}, {
		name: "workload to host", from: n.pods["cali-a"], to: n.node, addr: "192.168.99.1:9000",
		args: []string{"--from", "pod-a", "--to", "192.168.99.1", "--dport", "9000"},
		want: "drop", decider: "DefaultEndpointToHostAction",
	}, {
		name: "host endpoint policy allows", from: n.ext, to: n.node, addr: "192.168.99.1:9000",
		args: []string{"--from", "192.168.99.2", "--to", "host", "--dport", "9000"},
		want: "accept", decider: "Host endpoint policy accepted packet", allowed: "policy default/host-9000 inbound rule 0",
	}, {
		name: "host endpoint policy drops", from: n.ext, to: n.node, addr: "192.168.99.1:8080",
		args: []string{"--from", "192.168.99.2", "--to", "192.168.99.1", "--dport", "8080"},
		want: "drop", decider: "host endpoint hep-0: End of tier default",
	}, {
		name: "failsafe", from: n.ext, to: n.node, addr: "192.168.99.1:22",
		args: []string{"--from", "192.168.99.2", "--to", "host", "--dport", "22"},
		want: "accept", decider: "Failsafe inbound tcp:22",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var src netip.Addr
			if tc.src != "" {
				src = netip.MustParseAddr(tc.src)
			}
			got := "drop"
			if dial(t, tc.from, tc.to, src, tc.addr) {
				got = "accept"
			}
			if got != tc.want {
				t.Errorf("the packet: %s, want %s (the case is wrong, not explain)", got, tc.want)
			}
			out, stderr, err := nftep(t, append(append(g, "explain", "--json"), tc.args...)...)
			if err != nil {
				t.Fatalf("explain: %v\n%s", err, stderr)
			}
			var rep explain.ReportJSON
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rep); err != nil {
				t.Fatalf("explain --json: %v\n%s", err, out)
			}
			text, _, _ := nftep(t, append(append(g, "explain"), tc.args...)...)
			if rep.Verdict != got {
				t.Errorf("explain says %s, the packet was %s\n%s", rep.Verdict, got, text)
			}
			if rep.DecidedBy == nil || !strings.Contains(rep.DecidedBy.Comment, tc.decider) {
				t.Errorf("deciding rule: %+v, want a comment with %q\n%s", rep.DecidedBy, tc.decider, text)
			}
			if tc.allowed != "" && (rep.AllowedBy == nil || !strings.Contains(rep.AllowedBy.Comment, tc.allowed)) {
				t.Errorf("allowing rule: %+v, want a comment with %q\n%s", rep.AllowedBy, tc.allowed, text)
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("nftep explain %s\n%s", strings.Join(tc.args, " "), text)
			}

			// --confirm: the kernel's trace of a real probe agrees, and
			// the table is as it was: the listing equal, the generation
			// moved by exactly the trace table's add and delete.
			listing := n.node.Run(t, "nft", "list", "table", "inet", "nftep")
			gen0 := generation(t, n.node)
			out, stderr, err = nftep(t, append(append(g, "explain", "--confirm", "--timeout", "500ms", "--json"), tc.args...)...)
			if err != nil {
				t.Fatalf("explain --confirm: %v\n%s", err, stderr)
			}
			rep = explain.ReportJSON{}
			dec = json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rep); err != nil {
				t.Fatalf("explain --confirm --json: %v\n%s", err, out)
			}
			text, _, _ = nftep(t, append(append(g, "explain", "--confirm", "--timeout", "500ms"), tc.args...)...)
			if c := rep.Confirm; c == nil || !c.Agrees || c.Verdict != got {
				t.Errorf("--confirm: %+v, want agreement on %s\n%s", c, got, text)
			}
			if gen1 := generation(t, n.node); gen1 != gen0+4 {
				t.Errorf("ruleset generation %d → %d around two --confirm runs, want +4 (each: the trace table added and deleted)", gen0, gen1)
			}
			if after := n.node.Run(t, "nft", "list", "table", "inet", "nftep"); after != listing {
				t.Errorf("--confirm changed the table:\nbefore:\n%s\nafter:\n%s", listing, after)
			}
			if tables := n.node.Run(t, "nft", "list", "tables"); strings.Contains(tables, "nftep-trace") {
				t.Errorf("the trace table is left:\n%s", tables)
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("nftep explain --confirm %s\n%s", strings.Join(tc.args, " "), text)
			}
		})
	}
}

// generation reads the ruleset generation of ns.
func generation(t *testing.T, ns *netnstest.NS) uint32 {
	t.Helper()
	g, err := nft.GetGeneration(context.Background(), ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestKernelConfirmLeavesNoTrace interrupts `explain --confirm` while its
// probe waits for an answer that never comes: cancelled as Ctrl-C
// cancels it, it deletes the trace table itself; killed with SIGKILL (a
// copy of this test binary runs it), the kernel deletes the table it
// owned. Either way nftep's table is as it was.
func TestKernelConfirmLeavesNoTrace(t *testing.T) {
	withEnv(t)
	n := newExplainNode(t)
	g := []string{"--netns", n.node.Name, "--run-dir", n.runDir}
	if out, stderr, err := nftep(t, append(g, "apply", "--state", filepath.Join("testdata", "explain.yaml"))...); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, stderr)
	}
	listing := n.node.Run(t, "nft", "list", "table", "inet", "nftep")
	// Dropped at pod-b's tier: the probe waits its whole --timeout.
	args := append(g, "explain", "--from", "pod-e", "--to", "pod-b", "--dport", "8080", "--confirm", "--timeout", "30s")
	traced := func() bool { return strings.Contains(n.node.Run(t, "nft", "list", "tables"), "nftep-trace") }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	t.Run("ctrl-c", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, args, io.Discard, io.Discard) }()
		waitFor("the trace table", traced)
		cancel()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("interrupted explain --confirm returned no error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("explain --confirm did not stop when cancelled")
		}
		if traced() {
			t.Errorf("the trace table outlived the cancelled explain")
		}
	})

	t.Run("killed", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNftep$")
		cmd.Env = append(os.Environ(), "NFTEP_HELPER_ARGS="+strings.Join(args, "\x1f"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor("the trace table", traced)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		waitFor("the kernel to delete the owned trace table", func() bool { return !traced() })
	})

	if after := n.node.Run(t, "nft", "list", "table", "inet", "nftep"); after != listing {
		t.Errorf("nftep's table changed:\nbefore:\n%s\nafter:\n%s", listing, after)
	}
}

// TestHelperNftep runs nftep with the arguments in NFTEP_HELPER_ARGS, for
// tests that need it as a process of its own (to kill it); it does
// nothing in a normal run.
func TestHelperNftep(t *testing.T) {
	a := os.Getenv("NFTEP_HELPER_ARGS")
	if a == "" {
		return // a normal run: not a helper process
	}
	if err := run(context.Background(), strings.Split(a, "\x1f"), os.Stdout, os.Stderr); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestKernelExplainAcrossNodes: on node1 of the example cluster over VXLAN
// (examples/cluster-node1.yaml), `nftep explain` for pod-a to a pod of
// node2 names the route through vxlan.calico, the VXLAN encapsulation with
// the remote VTEP's underlay address from the FDB, and the forward path's
// rules; on node2 (cluster-node2.yaml), pod-b's packet from across the
// tunnel is dropped by pod-c's policy, which admits pod-a only.
func TestKernelExplainAcrossNodes(t *testing.T) {
	n1, n2 := clusterNode(t), clusterNode(t, "192.168.60.12/24")
	for _, x := range []struct {
		node   *netnstest.NS
		state  string
		ifaces map[string]string // workload interface → pod address
	}{
		{n1, "cluster-node1.yaml", map[string]string{"cali-a": "10.65.1.1", "cali-b": "10.65.1.2"}},
		{n2, "cluster-node2.yaml", map[string]string{"cali-c": "10.65.2.1"}},
	} {
		for iface, addr := range x.ifaces {
			pod := netnstest.New(t)
			netnstest.Veth(t, x.node, iface, pod, "eth0")
			pod.AddAddr(t, "eth0", addr+"/32")
		}
		_, _, err := nftep(t, "--netns", x.node.Name, "--run-dir", t.TempDir(), "apply", "--state", filepath.Join("..", "..", "examples", x.state))
		require.NoError(t, err)
	}

	out, _, err := nftep(t, "--netns", n1.Name, "explain", "--from", "pod-a", "--to", "10.65.2.1", "--dport", "8080")
	require.NoError(t, err)
	t.Logf("node1:\n%s", out)
	for _, w := range []string{
		"to:     address (vxlan.calico, 10.65.2.1)\n",
		"route:  10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450\n",
		"encap:  VXLAN, VNI 4096, UDP port 4789: outer 192.168.60.11 → 192.168.60.12, the remote VTEP of 10.65.2.0 (neighbour lladdr 66:2d:bf:44:a6:8b, FDB dst 192.168.60.12)\n",
		"    chain filter-fw-cali-a\n",
		"verdict: ACCEPT\n",
	} {
		assert.Contains(t, out, w)
	}
	out, _, err = nftep(t, "--netns", n1.Name, "explain", "--json", "--from", "pod-a", "--to", "10.65.2.1", "--dport", "8080")
	require.NoError(t, err)
	var rep explain.ReportJSON
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotNil(t, rep.Egress)
	assert.Equal(t, explain.Encap{Kind: "vxlan", VNI: 4096, Port: 4789, NextHop: "10.65.2.0", RemoteMAC: "66:2d:bf:44:a6:8b",
		Local: "192.168.60.11", Remote: "192.168.60.12"}, rep.Egress.Encap)
	assert.Equal(t, "10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450", rep.Egress.Route.String())

	out, _, err = nftep(t, "--netns", n2.Name, "explain", "--from", "10.65.1.2", "--to", "pod-c", "--dport", "8080")
	require.NoError(t, err)
	t.Logf("node2:\n%s", out)
	assert.Contains(t, out, "from:   address (vxlan.calico, 10.65.1.2)\n")
	assert.Contains(t, out, "verdict: DROP\n")
	assert.Contains(t, out, "allow-a-to-c-8080")
	assert.NotContains(t, out, "route:", "the destination is on this node")
}
