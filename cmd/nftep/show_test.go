package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/overlay"
)

// TestKernelShow applies the demo state to a namespace and checks that
// `nftep show` prints what `nft list table` prints, line for line, even
// without a run directory; that `show --diff` finds nothing to report; and
// that it names a rule another process inserted, and a rule it deleted.
func TestKernelShow(t *testing.T) {
	ns := netnstest.New(t)
	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	runDir := t.TempDir()
	if err := run(t.Context(), []string{"--netns", ns.Name, "--run-dir", runDir, "apply", "--state", demoState}, io.Discard, io.Discard); err != nil {
		t.Fatalf("apply: %v", err)
	}

	// No run directory: show reads the kernel only.
	out, _, err := nftep(t, "--netns", ns.Name, "--run-dir", filepath.Join(t.TempDir(), "none"), "show")
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	want := ns.Run(t, "nft", "list", "table", "inet", "nftep") + ns.Run(t, "nft", "list", "table", "arp", "nftep")
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(out, "\n")); diff != "" {
		t.Errorf("show differs from nft list table (-nft +show):\n%s", diff)
	}

	out, _, err = nftep(t, "--netns", ns.Name, "--run-dir", runDir, "show", "--diff")
	if err != nil {
		t.Fatalf("show --diff: %v", err)
	}
	if !strings.HasSuffix(out, "# no differences\n") {
		t.Errorf("show --diff right after apply:\n%s", out)
	}

	// A foreign rule, and a rule of ours deleted.
	ns.Run(t, "nft", "insert", "rule", "inet", "nftep", "filter-fw-cali-a", "drop")
	handles := ns.Run(t, "nft", "-a", "list", "chain", "inet", "nftep", "filter-tw-cali-b")
	var handle, deleted string
	for _, l := range strings.Split(handles, "\n") {
		if i := strings.Index(l, " # handle "); i > 0 && strings.Contains(l, "ct state") {
			handle, deleted = l[i+len(" # handle "):], strings.TrimSpace(l[:i])
			break
		}
	}
	if handle == "" {
		t.Fatalf("no ct state rule in filter-tw-cali-b:\n%s", handles)
	}
	ns.Run(t, "nft", "delete", "rule", "inet", "nftep", "filter-tw-cali-b", "handle", handle)

	out, _, err = nftep(t, "--netns", ns.Name, "--run-dir", runDir, "show", "--diff")
	if err != nil {
		t.Fatalf("show --diff: %v", err)
	}
	for _, w := range []string{
		"+ chain filter-fw-cali-a rule 1: drop (foreign)\n",
		"- chain filter-tw-cali-b rule 1: " + deleted + " (missing)\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("show --diff does not say %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "\n+ ") + strings.Count(out, "\n- ") + strings.Count(out, "\n~ "); n != 2 {
		t.Errorf("show --diff reports %d differences, want 2:\n%s", n, out)
	}
	t.Logf("show --diff:\n%s", out)

	// Objects added later are listed in creation order, wherever their
	// names sort; show keeps the kernel's order.
	ns.Run(t, "nft", "add", "chain", "inet", "nftep", "aaa-foreign")
	ns.Run(t, "nft", "add", "rule", "inet", "nftep", "aaa-foreign", "meta", "l4proto", "tcp", "tcp", "flags", "syn", "counter", "masquerade", "persistent")
	ns.Run(t, "nft", "add", "set", "inet", "nftep", "aaa-set", "{ type ipv4_addr; }")
	out, _, err = nftep(t, "--netns", ns.Name, "show")
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	want = ns.Run(t, "nft", "list", "table", "inet", "nftep") + ns.Run(t, "nft", "list", "table", "arp", "nftep")
	// nft knows the foreign rule's expressions; nftep prints them as unknown
	// (a persistent masquerade is not nftep's).
	want = strings.Replace(want, "tcp flags syn counter packets 0 bytes 0 masquerade persistent",
		"meta l4proto tcp # unknown expression payload # unknown expression bitwise # unknown expression cmp counter packets 0 bytes 0 # unknown expression masq", 1)
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(out, "\n")); diff != "" {
		t.Errorf("show after foreign additions differs from nft list table (-nft +show):\n%s", diff)
	}
	out, _, err = nftep(t, "--netns", ns.Name, "--run-dir", runDir, "show", "--diff")
	if err != nil {
		t.Fatalf("show --diff: %v", err)
	}
	for _, w := range []string{"+ chain aaa-foreign (foreign, 1 rules)\n", "+ set aaa-set (foreign)\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("show --diff does not say %q:\n%s", w, out)
		}
	}
}

// clusterNode is a namespace with an eth0 (a veth whose peer stays in the
// namespace) holding a node's address of examples/cluster-node1.yaml
// (192.168.60.11/24, the default) or cluster-node2.yaml: the VXLAN
// device's parent.
func clusterNode(t *testing.T, addr ...string) *netnstest.NS {
	t.Helper()
	ns := netnstest.New(t)
	a := "192.168.60.11/24"
	if len(addr) > 0 {
		a = addr[0]
	}
	ns.Run(t, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p")
	ns.AddAddr(t, "eth0", a)
	ns.Run(t, "ip", "link", "set", "eth0p", "up")
	ns.Run(t, "ip", "link", "set", "eth0", "up")
	return ns
}

// TestKernelShowClusterNetworking applies node1 of the example cluster over
// VXLAN and checks that `nftep show` prints, after the tables, the tunnel
// device, the remote VTEP's neighbour and FDB entry and the cluster routes
// as the commands that make them; that those commands, run in a fresh
// namespace, make the same state; and that `show --json` carries the same
// in clusterNetworking.
func TestKernelShowClusterNetworking(t *testing.T) {
	ns := clusterNode(t)
	state := filepath.Join("..", "..", "examples", "cluster-node1.yaml")
	_, _, err := nftep(t, "--netns", ns.Name, "--run-dir", t.TempDir(), "apply", "--state", state)
	require.NoError(t, err)

	out, _, err := nftep(t, "--netns", ns.Name, "--run-dir", t.TempDir(), "show")
	require.NoError(t, err)
	tables := ns.Run(t, "nft", "list", "table", "inet", "nftep") + ns.Run(t, "nft", "list", "table", "arp", "nftep")
	require.True(t, strings.HasPrefix(out, tables), "show starts with what nft list table prints:\n%s", out)
	want := testutil.Dedent(`

		# cluster networking in the kernel: tunnel devices, remote VTEPs (neighbours, FDB), cluster routes
		# ip link add vxlan.calico address 66:f9:37:c3:7e:94 mtu 1450 type vxlan id 4096 local 192.168.60.11 dev eth0 dstport 4789 nolearning
		# ip address add 10.65.1.0/32 dev vxlan.calico
		# ip link set vxlan.calico up
		# ip neigh add 10.65.2.0 lladdr 66:2d:bf:44:a6:8b dev vxlan.calico nud permanent
		# bridge fdb add 66:2d:bf:44:a6:8b dev vxlan.calico dst 192.168.60.12 self permanent
		# ip route add blackhole 10.65.1.0/26 proto 80
		# ip route add 10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450
		`)
	assert.Equal(t, want, strings.TrimPrefix(out, tables))

	// The commands make the same state in a namespace of their own.
	fresh := clusterNode(t)
	for _, l := range strings.Split(strings.TrimSpace(want), "\n")[1:] {
		args := strings.Fields(strings.TrimPrefix(l, "# "))
		fresh.Run(t, args[0], args[1:]...)
	}
	k1, err := overlay.ReadKernel(ns.Netlink(), 80)
	require.NoError(t, err)
	k2, err := overlay.ReadKernel(fresh.Netlink(), 80)
	require.NoError(t, err)
	assert.Equal(t, k1, k2, "the printed commands make what nftep programmed")

	out, _, err = nftep(t, "--netns", ns.Name, "--run-dir", t.TempDir(), "show", "--json")
	require.NoError(t, err)
	var js struct {
		ClusterNetworking *overlay.Kernel `json:"clusterNetworking"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	assert.Equal(t, k1, js.ClusterNetworking)
}
