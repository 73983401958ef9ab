package dataplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// foreignEditRounds is how many times each kind of foreign edit is made:
// NFTEP_FOREIGN_ROUNDS, or 3.
func foreignEditRounds() int {
	if n, err := strconv.Atoi(os.Getenv("NFTEP_FOREIGN_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// writeStateFile writes msgs and config as a JSON state file.
func writeStateFile(t testing.TB, path string, config map[string]string, msgs []*proto.ToDataplane) {
	t.Helper()
	var updates []json.RawMessage
	for _, m := range msgs {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		updates = append(updates, b)
	}
	b, err := json.Marshal(map[string]any{"config": config, "updates": updates})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestKernelForeignEditsRepairedInTime runs nftep (run mode) on a node of
// 1,000 endpoints while another process edits what nftep owns: it flushes
// the table, deletes a chain, inserts a rule, deletes a map element,
// deletes a route and rewrites a sysctl; and keeps tables of its own (an
// `inet filter` and an `ip kube-proxy`-like one). nftep repairs each of its
// objects and never touches the foreign tables. It reports the time from
// each edit to its repair: for nftables, from the foreign commit to
// nftep's next commit of its table (both seen by an event subscriber); for
// routes and sysctls, from the edit until they read back right (a route's
// deletion makes an event; sysctls are read back with each nftables
// refresh, or every RouteRefreshInterval without one, as here: 2 s, so
// that no periodic refresh repairs what the nftables events must).
func TestKernelForeignEditsRepairedInTime(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed")
	}
	const endpoints = 1000
	node := netnstest.New(t)
	pods := map[string]string{"calir1": "10.66.0.1", "calir2": "10.66.0.2"}
	msgs := benchNode(endpoints)
	for iface, addr := range pods {
		pod := netnstest.New(t)
		netnstest.Veth(t, node, iface, pod, "eth0")
		pod.AddAddr(t, "eth0", addr+"/32")
		msgs = append(msgs, &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
			Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "ns-0/" + iface, EndpointId: "eth0"},
			Endpoint: &proto.WorkloadEndpoint{State: "active", Name: iface, Mac: "ee:ee:0a:42:00:01", Ipv4Nets: []string{addr + "/32"},
				ProfileIds: []string{"kns.ns-0"}},
		}}})
	}
	state := filepath.Join(t.TempDir(), "node.json")
	writeStateFile(t, state, map[string]string{"RouteRefreshInterval": "2", "NftablesRefreshInterval": "0"}, msgs)

	// The foreign tables exist before nftep starts, and change nothing.
	foreign := filepath.Join(t.TempDir(), "foreign.nft")
	if err := os.WriteFile(foreign, []byte(`table inet filter {
	chain input {
		type filter hook input priority filter; policy accept;
		tcp dport 22 counter accept
	}
}
table ip kube-proxy {
	chain service-api {
		meta mark set meta mark | 0x4000
	}
	map service-ips {
		type ipv4_addr . inet_proto . inet_service : verdict
		elements = { 10.96.0.1 . tcp . 443 : goto service-api }
	}
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr . meta l4proto . th dport vmap @service-ips
	}
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	node.Run(t, "nft", "-f", foreign)
	listForeign := func() string {
		return node.Run(t, "nft", "list", "table", "inet", "filter") + node.Run(t, "nft", "list", "table", "ip", "kube-proxy")
	}
	foreignBefore := listForeign()

	opts := dataplane.Options{Namespace: openNS(t, node), RunDir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dataplane.Run(ctx, opts, state, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	routeBack := func(iface, addr string) bool {
		rs, _ := node.Netlink().RouteList(node.Link(t, iface), netlink.FAMILY_V4)
		for _, r := range rs {
			if r.Dst != nil && r.Dst.IP.Equal(net.ParseIP(addr)) {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool {
		st, err := dataplane.ReadStatus(filepath.Join(opts.RunDir, dataplane.StatusFileName))
		return err == nil && st.InSync && !st.LastApply.IsZero() && routeBack("calir1", pods["calir1"])
	}, 60*time.Second, pollTick, "the node programmed")
	time.Sleep(500 * time.Millisecond) // let the start's own resyncs settle
	// Subscribed after the cold start, whose events would overflow any
	// buffer.
	commits := make(chan nft.Commit, 1<<16)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() {
		if err := nft.WatchCommits(wctx, node.Fd(), func(c nft.Commit) { commits <- c }); err != nil {
			t.Errorf("WatchCommits: %v", err)
		}
	}()

	// nftep's table, its chains, sets and maps in name order: a repair
	// re-creates what was deleted, which the kernel then lists last.
	listOurs := func() string { return sortedBlocks(node.Run(t, "nft", "list", "table", "inet", "nftep")) }
	oursBefore := listOurs()

	drain := func() {
		for {
			select {
			case <-commits:
			default:
				return
			}
		}
	}
	// repairTime makes the edit and returns the time from its commit to
	// nftep's next commit of its table.
	//
	// Edits are spaced by more than the loop's watchMinInterval (1 s): a
	// process that keeps editing the table is repaired at most once a
	// second by design, and each figure here is one isolated edit.
	repairTime := func(what string, edit func()) time.Duration {
		t.Helper()
		time.Sleep(1200 * time.Millisecond)
		drain()
		edit()
		var editAt time.Time
		deadline := time.After(10 * time.Second)
		for {
			select {
			case c := <-commits:
				if !c.Touches(nft.FamilyINet, "nftep") || c.Writer == nil {
					continue
				}
				if !c.Writer.Self() && editAt.IsZero() {
					editAt = c.At
				} else if c.Writer.Self() && !editAt.IsZero() {
					return c.At.Sub(editAt)
				}
			case <-deadline:
				t.Fatalf("%s: no repair commit within 10 s", what)
			}
		}
	}
	pollTime := func(what string, edit func(), repaired func() bool) time.Duration {
		t.Helper()
		edit()
		start := time.Now()
		require.Eventually(t, repaired, 10*time.Second, pollTick, what+" repaired")
		return time.Since(start)
	}
	sysctl := func(path string) string {
		var v []byte
		if err := node.Do(func() (err error) { v, err = os.ReadFile(path); return err }); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(v))
	}

	rounds := foreignEditRounds()
	type kind struct {
		name, how string
		times     []time.Duration
	}
	kinds := []*kind{
		{name: "flush table", how: "event"}, {name: "delete chain", how: "event"}, {name: "insert rule", how: "event"},
		{name: "delete map element", how: "event"}, {name: "delete route", how: "event"}, {name: "rewrite sysctl", how: "polled"},
	}
	nftCmd := func(args ...string) func() { return func() { node.Run(t, "nft", args...) } }
	for r := range rounds {
		ifc := benchIface(r)
		kinds[0].times = append(kinds[0].times, repairTime("flush table", nftCmd("flush", "table", "inet", "nftep")))
		kinds[1].times = append(kinds[1].times, repairTime("delete chain", func() {
			// The chain is referenced by its endpoint's dispatch map
			// elements: they go in the same transaction.
			script := fmt.Sprintf("delete element inet nftep filter-from-wl { %q }\ndelete chain inet nftep filter-fw-%s\n", ifc, ifc)
			cmd := exec.Command("ip", "netns", "exec", node.Name, "nft", "-f", "-")
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("nft -f: %v\n%s\n%s", err, script, out)
			}
		}))
		kinds[2].times = append(kinds[2].times, repairTime("insert rule", nftCmd("insert", "rule", "inet", "nftep", "filter-tw-"+ifc, "accept")))
		kinds[3].times = append(kinds[3].times, repairTime("delete map element", nftCmd("delete", "element", "inet", "nftep", "filter-to-wl", fmt.Sprintf("{ %q }", benchIface(r+1)))))
		kinds[4].times = append(kinds[4].times, pollTime("route", func() {
			node.Run(t, "ip", "route", "del", pods["calir1"], "dev", "calir1")
		}, func() bool { return routeBack("calir1", pods["calir1"]) }))
		const proxyARP = "/proc/sys/net/ipv4/conf/calir2/proxy_arp"
		kinds[5].times = append(kinds[5].times, pollTime("sysctl", func() {
			if err := node.Do(func() error { return os.WriteFile(proxyARP, []byte("0"), 0o644) }); err != nil {
				t.Fatal(err)
			}
		}, func() bool { return sysctl(proxyARP) == "1" }))
	}

	// Everything as it was: nftep's table (once the last repair is in) and
	// the foreign tables, untouched throughout.
	require.Eventually(t, func() bool { return listOurs() == oursBefore }, 10*time.Second, pollTick, "nftep's table as before the edits")
	if after := listForeign(); after != foreignBefore {
		t.Errorf("the foreign tables changed:\nbefore:\n%s\nafter:\n%s", foreignBefore, after)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "repair latency at %d endpoints, %d edits each:\n", endpoints, rounds)
	for _, k := range kinds {
		slices.Sort(k.times)
		fmt.Fprintf(&b, "  %-20s %-7s p50 %8v  max %8v\n", k.name, k.how, k.times[len(k.times)/2].Round(time.Millisecond), k.times[len(k.times)-1].Round(time.Millisecond))
	}
	t.Log(b.String())
}

// sortedBlocks returns an `nft list table` listing with its top-level
// blocks (chains, sets, maps) sorted, so that two listings of the same
// content compare equal whatever order the objects were created in.
func sortedBlocks(listing string) string {
	var blocks []string
	var cur strings.Builder
	for _, line := range strings.Split(listing, "\n") {
		if strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "\t\t") && strings.HasSuffix(line, "{") {
			if cur.Len() > 0 {
				blocks = append(blocks, cur.String())
			}
			cur.Reset()
		}
		if line == "\t}" {
			cur.WriteString(line + "\n")
			blocks = append(blocks, cur.String())
			cur.Reset()
			continue
		}
		if strings.HasPrefix(line, "\t") {
			cur.WriteString(line + "\n")
		}
	}
	slices.Sort(blocks)
	return strings.Join(blocks, "")
}
