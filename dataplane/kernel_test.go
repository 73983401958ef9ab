package dataplane_test

// Kernel tests: the dataplane programming a network namespace of its own
// (internal/netnstest), through the same entry points as the nftep command.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// waitLimit and pollTick are how long require.Eventually waits for a
// condition of these tests, and how often it checks.
const (
	waitLimit = 5 * time.Second
	pollTick  = 5 * time.Millisecond
)

// repoRoot is the module's root directory (the parent of dataplane/).
func repoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// openNS opens a netnstest namespace as the dataplane's Options.Namespace.
func openNS(t testing.TB, ns *netnstest.NS) *netnsutil.NS {
	t.Helper()
	h, err := netnsutil.Open(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// listTable returns the table as the kernel holds it: `nft list table` when
// nft is installed, else nil (tests then rely on the model and generation).
func listTable(t testing.TB, ns *netnstest.NS, family, name string) []byte {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	out, err := ns.Output("nft", "list", "table", family, name)
	if err != nil {
		t.Fatalf("nft list table %s %s: %v\n%s", family, name, err, out)
	}
	return []byte(out)
}

func TestKernelApplyStateFile(t *testing.T) {
	ns := netnstest.New(t)
	// cali-a exists and is up; cali-b and cali-c do not exist.
	peer := netnstest.New(t)
	netnstest.Veth(t, ns, "cali-a", peer, "eth0")
	runDir := t.TempDir()
	opts := dataplane.Options{Namespace: openNS(t, ns), RunDir: runDir}
	state := filepath.Join(repoRoot(t), "examples", "demo.yaml")

	res, err := dataplane.Apply(context.Background(), opts, state)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if res.Operations == 0 {
		t.Errorf("Apply sent nothing on a cold start")
	}

	t.Run("statuses", func(t *testing.T) {
		want := []dataplane.EndpointStatus{
			{Kind: "workload", ID: "k8s/demo/pod-a/eth0", Status: "up"},
			{Kind: "workload", ID: "k8s/demo/pod-b/eth0", Status: "down", Reason: "interface cali-b is not up"},
			{Kind: "workload", ID: "k8s/demo/pod-c/eth0", Status: "down", Reason: `state is "inactive", not "active"; interface cali-c is not up`},
		}
		if diff := cmp.Diff(want, res.Statuses); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
		st, err := dataplane.ReadStatus(filepath.Join(runDir, dataplane.StatusFileName))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, st.Endpoints); diff != "" {
			t.Errorf("status file (-want +got):\n%s", diff)
		}
		if st.Mode != "apply" || st.Table != "nftep" || st.Namespace != ns.Name || st.LastError != "" || st.LastApply.IsZero() {
			t.Errorf("status header = %+v", st)
		}
	})

	t.Run("table", func(t *testing.T) {
		got := listTable(t, ns, "inet", "nftep")
		if got == nil {
			t.Skip("nft is not installed")
		}
		for _, want := range []string{
			`"cali-a" comment "endpoint k8s/demo/pod-a/eth0" : goto filter-tw-cali-a`,
			"chain filter-pi-default.demo/allow-a-to-b-8080 {",
			"ip saddr @ipset-s.app-pod-a-v4 tcp dport 8080",
			`drop comment "endpoint k8s/demo/pod-c/eth0: Endpoint admin disabled"`,
			`drop comment "Unknown interface"`,
		} {
			if !bytes.Contains(got, []byte(want)) {
				t.Errorf("nft list table lacks %q", want)
			}
		}
		// The record `nftep show` prints is the kernel's table, line for
		// line (then the arp table).
		rec, err := os.ReadFile(filepath.Join(runDir, dataplane.RulesetFileName))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(rec, got) {
			t.Errorf("ruleset.nft does not start with the kernel's table:\n%s", cmp.Diff(string(got), string(rec)))
		}
		if !bytes.HasPrefix(listTable(t, ns, "arp", "nftep"), []byte("table arp nftep {")) {
			t.Errorf("no arp table")
		}
	})

	t.Run("routes", func(t *testing.T) {
		link := ns.Link(t, "cali-a")
		rs, err := ns.Netlink().RouteList(link, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		var dsts []string
		for _, r := range rs {
			dsts = append(dsts, r.Dst.String())
		}
		if !slices.Contains(dsts, "10.65.0.1/32") {
			t.Errorf("routes on cali-a = %v, want 10.65.0.1/32", dsts)
		}
	})

	t.Run("again is a no-op", func(t *testing.T) {
		gen, err := nft.GetGeneration(context.Background(), ns.Fd())
		if err != nil {
			t.Fatal(err)
		}
		res, err := dataplane.Apply(context.Background(), opts, state)
		if err != nil {
			t.Fatal(err)
		}
		if res.Operations != 0 {
			t.Errorf("second Apply: %d operations, want 0", res.Operations)
		}
		if gen2, _ := nft.GetGeneration(context.Background(), ns.Fd()); gen2 != gen {
			t.Errorf("second Apply committed a transaction: generation %d → %d", gen, gen2)
		}
	})

	t.Run("cleanup", func(t *testing.T) {
		cr, err := dataplane.Cleanup(context.Background(), opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"inet nftep", "arp nftep"}, cr.Tables); diff != "" {
			t.Errorf("deleted tables (-want +got):\n%s", diff)
		}
		for _, fam := range []nft.Family{nft.FamilyINet, nft.FamilyARP} {
			if ok, err := dataplane.TableExists(opts.Namespace, fam, "nftep"); err != nil || ok {
				t.Errorf("table %s nftep exists after cleanup (err %v)", fam, err)
			}
		}
		rs, _ := ns.Netlink().RouteList(ns.Link(t, "cali-a"), netlink.FAMILY_V4)
		for _, r := range rs {
			if r.Dst != nil && r.Dst.String() == "10.65.0.1/32" {
				t.Errorf("route %s survived cleanup", r.Dst)
			}
		}
		if _, err := os.Stat(filepath.Join(runDir, dataplane.StatusFileName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("status file survived cleanup: %v", err)
		}
	})
}

func TestKernelBadStateFileLeavesRuleset(t *testing.T) {
	ns := netnstest.New(t)
	opts := dataplane.Options{Namespace: openNS(t, ns), RunDir: t.TempDir()}
	good := filepath.Join(repoRoot(t), "examples", "demo.yaml")
	if _, err := dataplane.Apply(context.Background(), opts, good); err != nil {
		t.Fatal(err)
	}
	before := listTable(t, ns, "inet", "nftep")
	gen, err := nft.GetGeneration(context.Background(), ns.Fd())
	if err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new, wantErr string
	}{
		{"bad address", "ipv4Nets: [10.65.0.2/32]", "ipv4Nets: [10.65.0.300/32]",
			`updates[4] (workloadEndpointUpdate k8s/demo/pod-b/eth0): endpoint.ipv4Nets[0]: "10.65.0.300/32" is not an IPv4 CIDR or address`},
		{"unknown policy", "ingressPolicies: [{name: allow-a-to-b-8080,", "ingressPolicies: [{name: allow-a-to-b-8081,",
			"endpoint.tiers[0].ingressPolicies[0]: policy NetworkPolicy demo/allow-a-to-b-8081 is not defined"},
		{"unknown field", "ipv4Nets: [10.65.0.3/32]", "ipv4Net: [10.65.0.3/32]", `updates[5] (workloadEndpointUpdate k8s/demo/pod-c/eth0): endpoint: unknown field "ipv4Net"`},
		{"bad config", "DefaultEndpointToHostAction: DROP", "DefaultEndpointToHostAction: MAYBE", `config: DefaultEndpointToHostAction="MAYBE"`},
		// An interface name nft cannot carry used to be valid to the
		// parsers and refused by the nft validation of the dry run's
		// model; the endpoint manager now rejects that endpoint alone
		// (status error), so it no longer makes the ruleset invalid.
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(data, []byte(tc.old)) {
				t.Fatalf("demo.yaml lacks %q", tc.old)
			}
			bad := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(bad, bytes.Replace(data, []byte(tc.old), []byte(tc.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := dataplane.Apply(context.Background(), opts, bad)
			if err == nil {
				t.Fatal("Apply accepted a bad state file")
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), bad) {
				t.Errorf("error %q\nwant it to name the file and contain %q", err, tc.wantErr)
			}
			if gen2, _ := nft.GetGeneration(context.Background(), ns.Fd()); gen2 != gen {
				t.Errorf("the bad file changed the ruleset: generation %d → %d", gen, gen2)
			}
			if after := listTable(t, ns, "inet", "nftep"); !bytes.Equal(before, after) {
				t.Errorf("the programmed table changed:\n%s", cmp.Diff(string(before), string(after)))
			}
		})
	}
}

// felixSession returns the recorded Felix stream (testdata/felix).
func felixSession(t testing.TB) []byte {
	t.Helper()
	return testutil.ReadFelixRecording(t, "real-felix-session.bin")
}

// splitFrames returns each frame of a Felix stream, header included.
func splitFrames(t testing.TB, data []byte) [][]byte {
	t.Helper()
	var frames [][]byte
	r := proto.NewReader(bytes.NewReader(data))
	for off := 0; ; {
		body, err := r.ReadFrame()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		n := proto.HeaderSize + len(body)
		frames = append(frames, data[off:off+n])
		off += n
	}
}

const trustedSet = "ipset-s.q38qNHN7nspDFoSFrokLyGaw-LedVU_14RKfcA"

// TestKernelDriverRealFelixSession feeds the recorded stream of a real
// Felix to the driver through a pipe, as Felix would on fd 3, and reads
// what the driver writes on fd 4.
func TestKernelDriverRealFelixSession(t *testing.T) {
	frames := splitFrames(t, felixSession(t))
	if len(frames) != 24 {
		t.Fatalf("session has %d frames, the README says 24", len(frames))
	}
	ns := netnstest.New(t)
	opts := dataplane.Options{Namespace: openNS(t, ns), RunDir: t.TempDir(), ProcessStatusInterval: 50 * time.Millisecond}

	toDriver, felixOut, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	felixIn, fromDriver, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	waitIdle := dataplane.WatchIdle(&opts)
	done := make(chan error, 1)
	go func() {
		done <- dataplane.RunDriver(context.Background(), opts, toDriver, fromDriver)
		fromDriver.Close()
	}()
	var fromDP []*proto.FromDataplane
	readDone := make(chan error, 1)
	go func() {
		r := proto.NewReader(felixIn)
		for {
			m, err := r.ReadFromDataplane()
			if errors.Is(err, io.EOF) {
				readDone <- nil
				return
			}
			if err != nil {
				readDone <- err
				return
			}
			fromDP = append(fromDP, m)
		}
	}()

	write := func(fs [][]byte) {
		t.Helper()
		for _, f := range fs {
			if _, err := felixOut.Write(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Frames 0–8: the configuration and the start-of-day snapshot, before
	// InSync. Only the static table may be programmed meanwhile.
	write(frames[:9])
	waitIdle(t, 9)
	if got := listTable(t, ns, "inet", "nftep"); got != nil {
		if !bytes.Contains(got, []byte(`drop comment "Unknown interface"`)) {
			t.Errorf("static table lacks the unknown-interface drop:\n%s", got)
		}
		if bytes.Contains(got, []byte("cali1")) {
			t.Errorf("endpoint cali1 programmed before InSync:\n%s", got)
		}
	}
	// Frame 9 is InSync; then the incremental updates, and EOF.
	write(frames[9:])
	felixOut.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunDriver: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunDriver did not return after EOF on its input")
	}
	if err := <-readDone; err != nil {
		t.Fatalf("reading the driver's output as FromDataplane: %v", err)
	}

	t.Run("table", func(t *testing.T) {
		got := string(listTable(t, ns, "inet", "nftep"))
		if got == "" {
			rec, err := os.ReadFile(filepath.Join(opts.RunDir, dataplane.RulesetFileName))
			if err != nil {
				t.Fatal(err)
			}
			got = string(rec)
		}
		for _, want := range []string{
			`"cali1" comment "endpoint k8s/default/p1/eth0" : goto filter-tw-cali1`,
			`"cali3" comment "endpoint k8s/default/p3/eth0" : goto filter-tw-cali3`,
			"chain filter-tw-cali1 {", "chain filter-fw-cali1 {",
			"chain filter-tw-cali3 {", "chain filter-fw-cali3 {",
			"jump filter-pi-security.security.block-9999",
			"jump filter-pi-default.from-trusted",
			// Felix's members are 10.65.0.0/28, 192.168.50.0/24,
			// 10.65.0.3/32 and fd00:65::3/128; the interval set holds
			// the members no other contains (10.65.0.3 is in the /28).
			"set " + trustedSet + "-v4 {",
			"elements = { 10.65.0.0/28, 192.168.50.0/24 }",
			"set " + trustedSet + "-v6 {",
			"elements = { fd00:65::3 }",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("table lacks %q", want)
			}
		}
		for _, gone := range []string{"cali2", "p2-only-8080", "node1-eth0", "filter-fh-eth0"} {
			if strings.Contains(got, gone) {
				t.Errorf("table still holds %q", gone)
			}
		}
		if t.Failed() {
			t.Logf("table:\n%s", got)
		}
	})

	t.Run("FromDataplane", func(t *testing.T) {
		last := map[string]string{}
		var procs int
		for i, m := range fromDP {
			if m.GetSequenceNumber() != uint64(i) {
				t.Errorf("frame %d has sequence number %d", i, m.GetSequenceNumber())
			}
			switch p := m.GetPayload().(type) {
			case *proto.FromDataplane_ProcessStatusUpdate:
				procs++
				if _, err := time.Parse(time.RFC3339, p.ProcessStatusUpdate.GetIsoTimestamp()); err != nil {
					t.Errorf("process status timestamp: %v", err)
				}
			case *proto.FromDataplane_WorkloadEndpointStatusUpdate:
				u := p.WorkloadEndpointStatusUpdate
				last[u.GetId().GetWorkloadId()] = u.GetStatus().GetStatus()
				if u.GetEndpoint() == nil {
					t.Errorf("status of %s does not echo the endpoint (Felix's file reporter needs it)", u.GetId().GetWorkloadId())
				}
			case *proto.FromDataplane_WorkloadEndpointStatusRemove:
				last[p.WorkloadEndpointStatusRemove.GetId().GetWorkloadId()] = "removed"
			case *proto.FromDataplane_HostEndpointStatusUpdate:
				last[p.HostEndpointStatusUpdate.GetId().GetEndpointId()] = p.HostEndpointStatusUpdate.GetStatus().GetStatus()
			case *proto.FromDataplane_HostEndpointStatusRemove:
				last[p.HostEndpointStatusRemove.GetId().GetEndpointId()] = "removed"
			default:
				t.Errorf("unexpected FromDataplane payload %T", p)
			}
		}
		if procs == 0 {
			t.Errorf("no ProcessStatusUpdate")
		}
		// No interface exists in the namespace: the workloads are down;
		// p2 and the host endpoint were removed.
		want := map[string]string{"default/p1": "down", "default/p2": "removed", "default/p3": "down", "node1-eth0": "removed"}
		if diff := cmp.Diff(want, last); diff != "" {
			t.Errorf("last status per endpoint (-want +got):\n%s", diff)
		}
	})

	t.Run("status file", func(t *testing.T) {
		st, err := dataplane.ReadStatus(filepath.Join(opts.RunDir, dataplane.StatusFileName))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode != "driver" || !st.InSync || len(st.Endpoints) != 2 {
			t.Errorf("status = %+v, want driver mode, in sync, 2 endpoints", st)
		}
	})
}

// TestKernelDriverKeepsExistingTableUntilInSync restarts the driver over a
// table a previous one programmed: until InSync the old ruleset must stay
// exactly as it is (no static-only table in between, which would cut every
// endpoint off).
func TestKernelDriverKeepsExistingTableUntilInSync(t *testing.T) {
	frames := splitFrames(t, felixSession(t))
	ns := netnstest.New(t)
	opts := dataplane.Options{Namespace: openNS(t, ns)}
	run := func(fs [][]byte, check func()) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		waitIdle := dataplane.WatchIdle(&o)
		done := make(chan error, 1)
		go func() { done <- dataplane.RunDriver(context.Background(), o, r, io.Discard) }()
		for _, f := range fs {
			if _, err := w.Write(f); err != nil {
				t.Fatal(err)
			}
		}
		if check != nil {
			waitIdle(t, len(fs))
			check()
		}
		w.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	run(frames, nil) // the whole session: p1 and p3 programmed
	gen, err := nft.GetGeneration(context.Background(), ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	// A new driver: configuration and snapshot, no InSync yet.
	run(frames[:9], func() {
		if gen2, _ := nft.GetGeneration(context.Background(), ns.Fd()); gen2 != gen {
			t.Errorf("the ruleset changed before InSync: generation %d → %d", gen, gen2)
		}
	})
}

// TestKernelRunRepairsForeignFlush: in run mode, someone flushing the
// workload dispatch chain (which holds the drop of unknown interfaces) is
// repaired by the resync the nftables event triggers, long before the
// periodic one (NftablesRefreshInterval, 180 s by default); and the repair
// does not set off further commits.
func TestKernelRunRepairsForeignFlush(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed")
	}
	ns := netnstest.New(t)
	opts := dataplane.Options{Namespace: openNS(t, ns), RunDir: t.TempDir()}
	state := filepath.Join(repoRoot(t), "examples", "demo.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dataplane.Run(ctx, opts, state, nil) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Run did not return within 5 s of its context's end")
		}
	}()

	const chain = "filter-from-wl-dispatch"
	dispatch := func() string {
		out, _ := ns.Output("nft", "list", "chain", "inet", "nftep", chain)
		return out
	}
	require.Eventually(t, func() bool {
		st, err := dataplane.ReadStatus(filepath.Join(opts.RunDir, dataplane.StatusFileName))
		return err == nil && !st.LastApply.IsZero() && strings.Contains(dispatch(), `drop comment "Unknown interface"`)
	}, waitLimit, pollTick, "the table programmed")

	ns.Run(t, "nft", "flush", "chain", "inet", "nftep", chain)
	flushed := time.Now()
	require.Eventually(t, func() bool {
		return strings.Contains(dispatch(), `drop comment "Unknown interface"`)
	}, 10*time.Second, pollTick, "the flushed dispatch chain repaired")
	t.Logf("repaired %v after the flush", time.Since(flushed).Round(time.Millisecond))
	if !strings.Contains(dispatch(), "iifname vmap @filter-from-wl") {
		t.Errorf("the repaired dispatch chain lacks its dispatch rule:\n%s", dispatch())
	}

	// The repair's own events trigger one more resync, which finds the
	// generation of that repair and commits nothing.
	gen, err := nft.GetGeneration(context.Background(), ns.Fd())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if gen2, _ := nft.GetGeneration(context.Background(), ns.Fd()); gen2 != gen {
		t.Errorf("the ruleset kept changing after the repair: generation %d → %d", gen, gen2)
	}
}

// TestKernelApplyRemovesRoutesOfEarlierApply: each `nftep apply` is a new
// process. A later one whose state no longer has an endpoint removes the
// route an earlier one programmed for it, although the interface still
// exists; without the run directory's routes record it took that route for
// one a CNI plugin made, spared it for the grace period, and exited before
// the period ended, every time. A route on an interface nftep never
// programmed keeps its grace.
func TestKernelApplyRemovesRoutesOfEarlierApply(t *testing.T) {
	ns := netnstest.New(t)
	peer := netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "eth0")
	netnstest.Veth(t, ns, "cali2", peer, "eth1")
	netnstest.Veth(t, ns, "cali3", peer, "eth2")
	ns.Run(t, "ip", "route", "add", "10.65.0.3/32", "dev", "cali3", "scope", "link") // a CNI plugin's
	opts := dataplane.Options{Namespace: openNS(t, ns), RunDir: t.TempDir()}
	dir := t.TempDir()
	state := func(name string, pods ...int) string {
		var b strings.Builder
		b.WriteString("updates:\n")
		for _, i := range pods {
			fmt.Fprintf(&b, `  - workloadEndpointUpdate:
      id: {orchestratorId: k8s, workloadId: default/p%d, endpointId: eth0}
      endpoint: {state: active, name: cali%d, ipv4Nets: [10.65.0.%d/32]}
`, i, i, i)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	routes := func() []string {
		t.Helper()
		rs, err := ns.Netlink().RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			if r.Dst != nil && strings.HasPrefix(r.Dst.String(), "10.65.") {
				out = append(out, r.Dst.String())
			}
		}
		slices.Sort(out)
		return out
	}

	if _, err := dataplane.Apply(context.Background(), opts, state("both.yaml", 1, 2)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"10.65.0.1/32", "10.65.0.2/32", "10.65.0.3/32"}, routes()); diff != "" {
		t.Errorf("after the first apply (-want +got):\n%s", diff)
	}
	for i := range 2 {
		if _, err := dataplane.Apply(context.Background(), opts, state("one.yaml", 1)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"10.65.0.1/32", "10.65.0.3/32"}, routes()); diff != "" {
			t.Errorf("after apply %d without p2 (-want +got):\n%s", i+2, diff)
		}
	}
}
