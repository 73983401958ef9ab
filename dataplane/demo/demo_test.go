package demo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/dataplane/demo"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
)

// TestDemo runs `nftep demo` end to end: real namespaces, real packets,
// every connection as expected (on one node, and across two nodes over
// VXLAN), and nothing left behind.
func TestDemo(t *testing.T) {
	netnstest.RequireRoot(t)
	var out strings.Builder
	res, err := demo.Run(context.Background(), demo.Options{Out: &out})
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}

	for _, c := range res.Before {
		if !c.Got {
			t.Errorf("before nftep: %s → %s tcp/%d: %s", c.From, c.To, c.Port, c.Outcome)
		}
	}
	var got []string
	for _, c := range res.Checks {
		got = append(got, strings.Join([]string{c.From, c.To, map[bool]string{true: "allowed", false: "denied"}[c.Got], c.Outcome}, " "))
	}
	want := []string{
		"pod-a pod-b allowed connected",
		"pod-a pod-b denied timed out: dropped",
		"pod-b pod-a denied timed out: dropped",
		"pod-c pod-b denied timed out: dropped",
		"pod-a pod-c denied timed out: dropped",
		"pod-x pod-b denied timed out: dropped",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connections (-want +got):\n%s", diff)
	}
	if n := res.Unexpected(); n != 0 {
		t.Errorf("%d unexpected connections", n)
	}
	for _, line := range []string{
		"✓ pod-a → pod-b tcp/8080  allowed, as expected",
		"✓ pod-a → pod-b tcp/9090  denied, as expected",
		"✓ pod-b → pod-a tcp/8080  denied, as expected",
		"✓ pod-c → pod-b tcp/8080  denied, as expected",
		"✓ pod-a → pod-c tcp/8080  denied, as expected",
		"✓ pod-x → pod-b tcp/8080  denied, as expected",
		"all 6 connections below succeed without nftep",
		"chain filter-pi-default.demo/allow-a-to-b-8080 {",
		"✓ node1/pod-a → node2/pod-c tcp/8080  allowed, as expected",
		"✓ node1/pod-b → node2/pod-c tcp/8080  denied, as expected",
		"    bridge fdb add 66:2d:bf:44:a6:8b dev vxlan.calico dst 192.168.60.12 self permanent\n",
		"    ip route add 10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450\n",
		"node1's vxlan.calico carried them: VXLAN, VNI 4096, UDP port 4789, to 192.168.60.12",
		"removed the 10 namespaces",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q", line)
		}
	}
	if strings.Contains(out.String(), "✗") {
		t.Errorf("output has a ✗")
	}

	// The second part: two nodes over VXLAN.
	require.NotNil(t, res.Cluster)
	got = nil
	for _, c := range res.Cluster.Checks {
		got = append(got, strings.Join([]string{c.From, c.To, map[bool]string{true: "allowed", false: "denied"}[c.Got], c.Outcome}, " "))
	}
	assert.Equal(t, []string{
		"node1/pod-a node2/pod-c allowed connected",
		"node1/pod-b node2/pod-c denied timed out: dropped",
	}, got)
	assert.Positive(t, res.Cluster.VXLANPackets, "the connections crossed vxlan.calico")
	require.Len(t, res.Cluster.Kernel.FDB, 1)
	assert.Equal(t, "192.168.60.12", res.Cluster.Kernel.FDB[0].Dst)

	wantStatus := []dataplane.EndpointStatus{
		{Kind: "workload", ID: "k8s/demo/pod-a/eth0", Status: "up"},
		{Kind: "workload", ID: "k8s/demo/pod-b/eth0", Status: "up"},
		{Kind: "workload", ID: "k8s/demo/pod-c/eth0", Status: "down", Reason: `state is "inactive", not "active"`},
	}
	if diff := cmp.Diff(wantStatus, res.Statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(res.Ruleset, res.KernelList) {
		t.Errorf("the kernel's table differs from nftep show:\n%s", cmp.Diff(res.KernelList, res.Ruleset))
	}

	for _, name := range res.Namespaces {
		if netnsutil.Exists(name) {
			t.Errorf("namespace %s left behind", name)
		}
	}
}

// TestDemoCancelled: Ctrl-C in the middle still removes the namespaces.
func TestDemoCancelled(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := demo.Run(ctx, demo.Options{Out: &strings.Builder{}})
	if err == nil {
		t.Fatal("a cancelled demo reported success")
	}
	if res == nil || len(res.Namespaces) == 0 {
		t.Fatalf("no namespaces recorded (err %v)", err)
	}
	for _, name := range res.Namespaces {
		if netnsutil.Exists(name) {
			t.Errorf("namespace %s left behind", name)
		}
	}
}
