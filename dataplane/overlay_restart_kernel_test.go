package dataplane_test

// nftep (the real binary, in driver mode) on node1 of the two-node lab is
// killed with SIGKILL and started again while pods talk across the nodes:
// the kernel state it owns outside nftables (cluster routes, VTEP
// neighbours, FDB entries, the tunnel devices) is polled every 10 ms
// throughout and never loses an entry, no probe is lost, and after the
// restarts the state is exactly what the last Felix stream calls for.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/proto"
)

// buildNftep builds the nftep binary into a temporary directory.
func buildNftep(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nftep")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/nftep/nftep/cmd/nftep").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// nftepProcess is `nftep driver` in a node's namespace, with a fake Felix
// on its fd 3 and 4.
type nftepProcess struct {
	cmd   *exec.Cmd
	felix *proto.Writer
	in    *os.File // our end of fd 3
	log   *strings.Builder
	logMu sync.Mutex
}

// startProcess starts the binary in n's namespace and writes msgs to it,
// as Felix does on a driver start.
func (n *clusterNode) startProcess(t *testing.T, bin string, msgs []*proto.ToDataplane) *nftepProcess {
	t.Helper()
	p := &nftepProcess{log: &strings.Builder{}}
	inR, inW, err := os.Pipe()
	require.NoError(t, err)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	p.cmd = exec.Command(bin, "--netns", n.ns.Name, "--run-dir", n.runDir, "--mtu-file", n.mtuFile, "driver")
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	p.cmd.ExtraFiles = []*os.File{inR, outW}
	p.cmd.Stdout, p.cmd.Stderr = (*lockedWriter)(p), (*lockedWriter)(p)
	require.NoError(t, p.cmd.Start())
	inR.Close()
	outW.Close()
	go func() { io.Copy(io.Discard, outR); outR.Close() }()
	p.in, p.felix = inW, proto.NewWriter(inW)
	go func() {
		for _, m := range msgs {
			if p.felix.WriteMessage(m) != nil {
				return // killed meanwhile
			}
		}
	}()
	return p
}

type lockedWriter nftepProcess

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	return w.log.Write(b)
}

// logText is what the process logged so far.
func (p *nftepProcess) logText() string {
	p.logMu.Lock()
	defer p.logMu.Unlock()
	return p.log.String()
}

// kill ends the process with SIGKILL, as a crash or an OOM kill would.
func (p *nftepProcess) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.in.Close()
}

// clusterSet is the node's cluster networking as `nftep show` prints it
// (overlay.ReadKernel's commands), with each tunnel device's ifindex: a
// recreated device is a change too.
func clusterSet(nl overlay.KernelReader) (map[string]bool, error) {
	k, err := overlay.ReadKernel(nl, 80)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, c := range k.Commands() {
		set[c] = true
	}
	links, err := nl.LinkList()
	if err != nil {
		return nil, err
	}
	for _, l := range links {
		if slices.Contains(overlay.DeviceNames, l.Attrs().Name) {
			set[fmt.Sprintf("%s ifindex %d", l.Attrs().Name, l.Attrs().Index)] = true
		}
	}
	return set, nil
}

func setLines(s map[string]bool) []string {
	out := make([]string, 0, len(s))
	for l := range s {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// udpProbes sends numbered datagrams from one pod to another every
// interval and counts what arrives.
type udpProbes struct {
	sent, got atomic.Int64
	stop      chan struct{}
	wg        sync.WaitGroup
}

func startUDPProbes(t *testing.T, from, to *clusterPod, port int, interval time.Duration) *udpProbes {
	t.Helper()
	p := &udpProbes{stop: make(chan struct{})}
	addr := &net.UDPAddr{IP: to.v4.AsSlice(), Port: port}
	var ln net.PacketConn
	require.NoError(t, to.ns.Do(func() (err error) { ln, err = net.ListenPacket("udp4", addr.String()); return err }))
	var c net.PacketConn
	require.NoError(t, from.ns.Do(func() (err error) { c, err = net.ListenPacket("udp4", from.v4.String()+":0"); return err }))
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 64)
		for {
			if _, _, err := ln.ReadFrom(buf); err != nil {
				return
			}
			p.got.Add(1)
		}
	}()
	go func() {
		defer p.wg.Done()
		defer c.Close()
		tk := time.NewTicker(interval)
		defer tk.Stop()
		var seq [8]byte
		for {
			select {
			case <-p.stop:
				time.Sleep(200 * time.Millisecond) // the last ones on their way
				ln.Close()
				return
			case <-tk.C:
				binary.BigEndian.PutUint64(seq[:], uint64(p.sent.Load()))
				if _, err := c.WriteTo(seq[:], addr); err == nil {
					p.sent.Add(1)
				}
			}
		}
	}()
	return p
}

func (p *udpProbes) finish() (sent, got int64) {
	close(p.stop)
	p.wg.Wait()
	return p.sent.Load(), p.got.Load()
}

// TestKernelRestartUnderTraffic kills node1's nftep (the binary, driver
// mode) with SIGKILL four times while p11 sends to p21 on node2 over
// VXLAN, and starts it again each time with Felix's whole stream: once
// steady, once in a cold start, once right after its start, and once
// after a third node was removed while it was down. A poller reads node1's
// cluster networking every 10 ms all along: no entry of node2 (route,
// neighbour, FDB entry, device) ever goes missing, no probe is lost, and
// after the last restart nothing of node3 is left.
func TestKernelRestartUnderTraffic(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := buildNftep(t)
	streams := [2][]*proto.ToDataplane{twoNodeRecording(t, "scenario3-n1.bin"), twoNodeRecording(t, "scenario3-n2.bin")}
	// node3 lives in another subnet; only node1 hears of it.
	withNode3 := beforeInSync(streams[0],
		vtepMsg("node3", "66:aa:bb:cc:dd:03", "10.65.3.0", "10.99.0.13"),
		routeMsg(proto.RouteType_REMOTE_WORKLOAD, "10.65.3.0/26", "node3", "10.99.0.13", false))
	c := newCluster(t, streams)
	n1, n2 := c.nodes[0], c.nodes[1]
	n2.start(t, streams[1])
	n2.waitState(t, scenario3Node2)

	var cur *nftepProcess
	var curMu sync.Mutex
	t.Cleanup(func() {
		curMu.Lock()
		defer curMu.Unlock()
		if cur != nil {
			cur.kill()
		}
	})
	start := func(msgs []*proto.ToDataplane) {
		curMu.Lock()
		defer curMu.Unlock()
		cur = n1.startProcess(t, bin, msgs)
	}
	kill := func() {
		curMu.Lock()
		defer curMu.Unlock()
		cur.kill()
	}

	// The poller's own netlink handle: the dataplane's and the lab's are
	// used by other goroutines.
	pollNS, err := netnsutil.Open(n1.ns.Name)
	require.NoError(t, err)
	defer pollNS.Close()
	nl, err := pollNS.Netlink()
	require.NoError(t, err)
	// converge waits until the running process reports itself in sync
	// (its status file) and the state is want.
	converge := func(want map[string]bool, limit time.Duration) time.Duration {
		t.Helper()
		t0 := time.Now()
		curMu.Lock()
		pid := cur.cmd.Process.Pid
		curMu.Unlock()
		for {
			got, err := clusterSet(nl)
			require.NoError(t, err)
			st, serr := dataplane.ReadStatus(filepath.Join(n1.runDir, dataplane.StatusFileName))
			inSync := serr == nil && st.PID == pid && st.InSync
			if inSync && slices.Equal(setLines(got), setLines(want)) {
				return time.Since(t0)
			}
			if time.Since(t0) > limit {
				curMu.Lock()
				log := cur.logText()
				curMu.Unlock()
				require.True(t, inSync, "the new nftep is not in sync after %v; its log:\n%s", limit, log)
				require.Equal(t, setLines(want), setLines(got), "node1's cluster networking after %v; nftep's log:\n%s", limit, log)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	start(withNode3)
	// The reference is the settled state: node3's route is there and
	// nothing changed for 300 ms (the routes of one apply are written one
	// by one, and a loaded machine shows the set half-way).
	var first map[string]bool
	var since time.Time
	require.Eventually(t, func() bool {
		s, err := clusterSet(nl)
		if err != nil || !s["ip route add 10.65.3.0/26 via 10.65.3.0 dev vxlan.calico onlink mtu 1450"] {
			return false
		}
		if !slices.Equal(setLines(s), setLines(first)) {
			first, since = s, time.Now()
		}
		return time.Since(since) >= 300*time.Millisecond
	}, 10*time.Second, 10*time.Millisecond, "node3's route, and node1's cluster networking settled")
	// What must never go: everything but node3's entries.
	var core []string
	for _, l := range setLines(first) {
		if !strings.Contains(l, "10.65.3.0") && !strings.Contains(l, "66:aa:bb:cc:dd:03") {
			core = append(core, l)
		}
	}
	require.Len(t, core, len(first)-3, "node3 has a route, a neighbour and an FDB entry:\n%s", strings.Join(setLines(first), "\n"))
	want := map[string]bool{}
	for _, l := range core {
		want[l] = true
	}
	t.Logf("node1's cluster networking (%d entries, node3's 3 included):\n%s", len(first), strings.Join(setLines(first), "\n"))
	c.waitConnect(t, "p11", "p21", 5*time.Second)

	// The poller: every 10 ms, every core entry must be there.
	var polls, missing atomic.Int64
	var firstMissing atomic.Value
	pollStop := make(chan struct{})
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			select {
			case <-pollStop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			got, err := clusterSet(nl)
			if err != nil {
				firstMissing.CompareAndSwap(nil, "read: "+err.Error())
				missing.Add(1)
				continue
			}
			polls.Add(1)
			for _, l := range core {
				if !got[l] {
					missing.Add(1)
					firstMissing.CompareAndSwap(nil, fmt.Sprintf("%s missing at %s", l, time.Now().Format("15:04:05.000")))
				}
			}
		}
	}()
	probes := startUDPProbes(t, c.pods["p11"], c.pods["p21"], 9000, 5*time.Millisecond)

	steps := []struct {
		name  string
		msgs  []*proto.ToDataplane
		delay func() time.Duration // between the start and the next kill
	}{
		{"steady, node3 still there", withNode3, nil},
		{"in a cold start", withNode3, func() time.Duration { return time.Duration(5+rand.IntN(55)) * time.Millisecond }},
		{"right after the start", withNode3, func() time.Duration { return 0 }},
		{"node3 removed while down", streams[0], nil},
	}
	for _, st := range steps {
		time.Sleep(300 * time.Millisecond)
		kill()
		if st.delay != nil {
			start(st.msgs)
			time.Sleep(st.delay())
			kill()
		}
		start(st.msgs)
		w := first
		if len(st.msgs) == len(streams[0]) {
			w = want
		}
		took := converge(w, 10*time.Second)
		t.Logf("killed %s: the new process was in sync with the state converged after %v", st.name, took.Round(time.Millisecond))
	}
	time.Sleep(300 * time.Millisecond)
	close(pollStop)
	<-pollDone
	sent, got := probes.finish()

	t.Logf("%d polls of node1's cluster networking every 10 ms over 4 kills: %d missing entries; probes p11 → p21: %d sent, %d arrived",
		polls.Load(), missing.Load(), sent, got)
	assert.Zero(t, missing.Load(), "an entry went missing: %v", firstMissing.Load())
	assert.Positive(t, sent)
	assert.Equal(t, sent, got, "probes lost across the restarts")
	// Nothing of node3 is left (converge compared the whole set), and the
	// pods still talk.
	final, err := clusterSet(nl)
	require.NoError(t, err)
	assert.Equal(t, setLines(want), setLines(final))
	n1.waitState(t, scenario3Node1)
	c.waitConnect(t, "p11", "p21", 5*time.Second)
}
