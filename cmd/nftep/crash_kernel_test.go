package main

// Never open, through crashes: nftep (the real binary) runs a node of pods
// on veths while its desired state churns, and is killed with SIGKILL at
// chosen moments and restarted, in run mode and in driver mode (fed by a
// fake Felix that replays the whole state on each start, as Felix does).
// Probers send packets that must never arrive, all the while.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// crashState is the node's desired state: three pods on veths whose rules
// never change (pod-a may send to pod-b's udp 8080 only; pod-e and the
// unowned cali-x have nothing), and synthetic endpoints, policies and IP
// sets (without interfaces) that churn.
type crashState struct {
	mu      sync.Mutex
	rng     *rand.Rand
	n       int
	iface   map[int]string // present synthetic endpoints: their interface
	renames int
	port    map[int]int32    // synthetic policy → port
	members map[int][]string // synthetic policy's IP set
	eAddr   string           // pod-e's address: it moves, so routes are rewritten
	changes int
}

const crashPolicies = 20

var crashConfig = map[string]string{"InterfacePrefix": "cali", "RouteRefreshInterval": "0"}

func newCrashState(n int) *crashState {
	s := &crashState{rng: rand.New(rand.NewPCG(1, 2)), n: n, iface: map[int]string{}, port: map[int]int32{}, members: map[int][]string{}, eAddr: "10.65.0.5"}
	for i := range n {
		s.iface[i] = fmt.Sprintf("calis%06x", i)
	}
	for p := range crashPolicies {
		s.port[p] = int32(7000 + p)
		s.members[p] = []string{fmt.Sprintf("10.90.%d.1/32", p)}
	}
	return s
}

func wep(id, iface, addr string, profiles []string, tiers []*proto.TierInfo) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
		Id:       &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: id, EndpointId: "eth0"},
		Endpoint: &proto.WorkloadEndpoint{State: "active", Name: iface, Ipv4Nets: []string{addr + "/32"}, ProfileIds: profiles, Tiers: tiers},
	}}}
}

func (s *crashState) synthEndpoint(i int) *proto.ToDataplane {
	// Sixteen policies each way: renaming every endpoint is a large
	// transaction, about 26 new rules per endpoint (policy groups keep it
	// from being 16 times more); from about 2,600 endpoints on it passes
	// the 65,536 new rules above which nftep stages.
	var pols []*proto.PolicyID
	for k := range 16 {
		pols = append(pols, &proto.PolicyID{Name: fmt.Sprintf("syn-%d", (i+k)%crashPolicies)})
	}
	return wep(fmt.Sprintf("syn/pod-%d", i), s.iface[i], netip.AddrFrom4([4]byte{10, 80, byte(i >> 8), byte(i)}).String(),
		[]string{"kns.demo"}, []*proto.TierInfo{{Name: "default", IngressPolicies: pols, EgressPolicies: pols}})
}

func (s *crashState) synthPolicy(p int) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
		Id: &proto.PolicyID{Name: fmt.Sprintf("syn-%d", p)},
		Policy: &proto.Policy{Tier: "default", InboundRules: []*proto.Rule{{Action: "allow",
			Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}}, SrcIpSetIds: []string{fmt.Sprintf("s:syn-%d", p)},
			DstPorts: []*proto.PortRange{{First: s.port[p], Last: s.port[p]}}}}},
	}}}
}

func (s *crashState) synthSet(p int) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{
		Id: fmt.Sprintf("s:syn-%d", p), Type: proto.IPSetUpdate_NET, Members: slices.Clone(s.members[p])}}}
}

// messages is the whole state, in the order Felix sends it.
func (s *crashState) messages() []*proto.ToDataplane {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*proto.ToDataplane{
		{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: "s:app-a", Type: proto.IPSetUpdate_NET, Members: []string{"10.65.0.1/32"}}}},
		{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
			Id: &proto.PolicyID{Name: "a-to-b-udp-8080"},
			Policy: &proto.Policy{Tier: "default", InboundRules: []*proto.Rule{{Action: "allow",
				Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "udp"}}, SrcIpSetIds: []string{"s:app-a"},
				DstPorts: []*proto.PortRange{{First: 8080, Last: 8080}}}}},
		}}},
		{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{
			Id: &proto.ProfileID{Name: "kns.demo"}, Profile: &proto.Profile{OutboundRules: []*proto.Rule{{Action: "allow"}}}}}},
	}
	for p := range crashPolicies {
		out = append(out, s.synthSet(p), s.synthPolicy(p))
	}
	out = append(out,
		wep("demo/pod-a", "cali-a", "10.65.0.1", []string{"kns.demo"}, nil),
		wep("demo/pod-b", "cali-b", "10.65.0.2", []string{"kns.demo"}, []*proto.TierInfo{{Name: "default",
			IngressPolicies: []*proto.PolicyID{{Name: "a-to-b-udp-8080"}}}}),
		wep("demo/pod-e", "cali-e", s.eAddr, []string{"kns.demo"}, nil),
	)
	for _, i := range slices.Sorted(maps.Keys(s.iface)) {
		out = append(out, s.synthEndpoint(i))
	}
	return out
}

// churn makes one change and returns it as Felix would send it.
func (s *crashState) churn() *proto.ToDataplane {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes++
	i, p := s.rng.IntN(s.n), s.rng.IntN(crashPolicies)
	switch s.rng.IntN(6) {
	case 5: // pod-e's address moves: its route is rewritten
		s.eAddr = map[string]string{"10.65.0.5": "10.65.0.6", "10.65.0.6": "10.65.0.5"}[s.eAddr]
		return wep("demo/pod-e", "cali-e", s.eAddr, []string{"kns.demo"}, nil)
	case 0: // endpoint removed, or added back
		if _, ok := s.iface[i]; ok {
			delete(s.iface, i)
			return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointRemove{WorkloadEndpointRemove: &proto.WorkloadEndpointRemove{
				Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("syn/pod-%d", i), EndpointId: "eth0"}}}}
		}
		s.iface[i] = fmt.Sprintf("calis%06x", i)
		return s.synthEndpoint(i)
	case 1: // renamed: its interface changes
		if _, ok := s.iface[i]; !ok {
			s.iface[i] = fmt.Sprintf("calis%06x", i)
		} else {
			s.renames++
			s.iface[i] = fmt.Sprintf("calir%06x%c", i, 'a'+s.renames%26)
		}
		return s.synthEndpoint(i)
	case 2: // policy changed
		s.port[p] = int32(7000 + s.rng.IntN(1000))
		return s.synthPolicy(p)
	default: // IP set members
		m := fmt.Sprintf("10.91.%d.%d/32", p, 1+s.rng.IntN(250))
		if k := slices.Index(s.members[p], m); k >= 0 {
			s.members[p] = slices.Delete(s.members[p], k, k+1)
			return &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{Id: fmt.Sprintf("s:syn-%d", p), RemovedMembers: []string{m}}}}
		}
		s.members[p] = append(s.members[p], m)
		return &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{Id: fmt.Sprintf("s:syn-%d", p), AddedMembers: []string{m}}}}
	}
}

// renameAll gives every synthetic endpoint a new interface: the next
// process must write thousands of new endpoint chains, more rules than one
// batch takes, so it stages them (see nft's stage.go) while the old rules
// stay live.
func (s *crashState) renameAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renames++
	for i := range s.iface {
		s.iface[i] = fmt.Sprintf("calim%06x%c", i, 'a'+s.renames%26)
	}
}

// writeState writes the state as a JSON state file, atomically.
func (s *crashState) writeState(t *testing.T, path string) {
	var updates []json.RawMessage
	for _, m := range s.messages() {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Error(err)
			return
		}
		updates = append(updates, b)
	}
	b, _ := json.Marshal(map[string]any{"config": crashConfig, "updates": updates})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

// prober sends UDP datagrams from a pod and counts them.
type prober struct {
	name         string
	sent, failed atomic.Int64
}

// probe sends a datagram every interval from ns, from src (bound with
// IP_TRANSPARENT, so it may be an address the pod does not own), until
// stop.
func (p *prober) probe(t *testing.T, ns *netnstest.NS, src, dst, payload string, interval time.Duration, stop <-chan struct{}, wg *sync.WaitGroup) {
	var c net.PacketConn
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_TRANSPARENT, 1) }); err != nil {
			return err
		}
		return serr
	}}
	if err := ns.Do(func() (err error) { c, err = lc.ListenPacket(context.Background(), "udp4", src+":0"); return err }); err != nil {
		t.Fatalf("prober %s: %v", p.name, err)
	}
	to, _ := net.ResolveUDPAddr("udp4", dst)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer c.Close()
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if _, err := c.WriteTo([]byte(payload), to); err == nil {
					p.sent.Add(1)
				} else if p.failed.Add(1) == 1 {
					t.Logf("prober %s: %v", p.name, err)
				}
			}
		}
	}()
}

// receiver counts what arrives on a UDP port of pod-b, by payload.
type receiver struct {
	mu  sync.Mutex
	got map[string]int
}

func (r *receiver) listen(t *testing.T, ns *netnstest.NS, addr string, stop <-chan struct{}, wg *sync.WaitGroup) {
	var c net.PacketConn
	if err := ns.Do(func() (err error) { c, err = net.ListenPacket("udp4", addr); return err }); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		go func() { <-stop; c.Close() }()
		buf := make([]byte, 256)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.got[addr+" "+string(buf[:n])]++
			r.mu.Unlock()
		}
	}()
}

// daemon is one nftep process.
type daemon struct {
	cmd   *exec.Cmd
	felix *proto.Writer // driver mode: the pipe to fd 3
	close func()
	log   *testutil.SyncBuffer
}

func TestKernelNeverOpenThroughCrashes(t *testing.T) {
	netnstest.RequireRoot(t)
	endpoints, cycles := 500, 4
	if n, err := strconv.Atoi(os.Getenv("NFTEP_CRASH_ENDPOINTS")); err == nil {
		endpoints = n
	}
	if n, err := strconv.Atoi(os.Getenv("NFTEP_CRASH_CYCLES")); err == nil {
		cycles = n
	}
	bin := buildNftep(t)
	n := newExplainNode(t)
	node := n.node
	h, err := netnsutil.Open(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	// The routes to the pods, as the CNI plugin makes them (nftep keeps
	// them; pod-e's moves with its endpoint).
	for iface, addr := range map[string]string{"cali-a": "10.65.0.1", "cali-b": "10.65.0.2", "cali-e": "10.65.0.5"} {
		node.AddRoute(t, addr+"/32", iface, "")
	}
	// A node routes (Kubernetes nodes forward; nftep sets only the
	// workload interfaces' own forwarding).
	node.Run(t, "sysctl", "-qw", "net.ipv4.ip_forward=1")

	// The probers, for the whole test: pod-a to pod-b's protected port
	// (udp 9090: pod-b allows udp 8080 only), the unowned cali-x to pod-b,
	// and pod-e spoofing pod-a's address (which pod-b's policy would let
	// in: only the reverse-path check stops it); and pod-a's genuine
	// datagrams to udp 8080, which pass when the rules are in place.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	recv := &receiver{got: map[string]int{}}
	recv.listen(t, n.pods["cali-b"], "10.65.0.2:8080", stop, &wg)
	recv.listen(t, n.pods["cali-b"], "10.65.0.2:9090", stop, &wg)
	probers := []*prober{{name: "denied pod to a protected port"}, {name: "unowned workload interface"}, {name: "spoofed source"}, {name: "genuine (control)"}}
	const every = 2 * time.Millisecond
	probers[0].probe(t, n.pods["cali-a"], "10.65.0.1", "10.65.0.2:9090", "denied", every, stop, &wg)
	probers[1].probe(t, n.pods["cali-x"], "10.65.0.99", "10.65.0.2:8080", "unowned", every, stop, &wg)
	probers[2].probe(t, n.pods["cali-e"], "10.65.0.1", "10.65.0.2:8080", "spoofed", every, stop, &wg)
	probers[3].probe(t, n.pods["cali-a"], "10.65.0.1", "10.65.0.2:8080", "genuine", 20*time.Millisecond, stop, &wg)

	// Without a ruleset every probe arrives: each "0 passed" below is
	// nftep's doing. The count starts once nftep's first table is in
	// place (before, nothing could stop them).
	time.Sleep(300 * time.Millisecond)
	recv.mu.Lock()
	for _, k := range []string{"10.65.0.2:9090 denied", "10.65.0.2:8080 unowned", "10.65.0.2:8080 spoofed", "10.65.0.2:8080 genuine"} {
		if recv.got[k] == 0 {
			t.Fatalf("without nftep, no %q probe arrived: the probe proves nothing (%v)", k, recv.got)
		}
	}
	recv.mu.Unlock()
	counting := false
	startCounting := func() {
		if counting {
			return
		}
		counting = true
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			if k, err := nft.ReadKernelTable(context.Background(), node.Fd(), nft.FamilyINet, "nftep"); err == nil && k.Exists {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("nftep made no table within 30 s")
			}
		}
		time.Sleep(50 * time.Millisecond) // datagrams sent before it, still on their way
		recv.mu.Lock()
		clear(recv.got)
		for _, p := range probers {
			p.sent.Store(0)
		}
		recv.mu.Unlock()
	}

	// Every commit of nftep, with the time it was seen.
	var commits atomic.Int64
	commitC := make(chan nft.Commit, 1<<16)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() {
		_ = nft.WatchCommits(wctx, node.Fd(), func(c nft.Commit) {
			if c.Writer != nil && c.Writer.Name == "nftep" {
				commits.Add(1)
				select {
				case commitC <- c:
				default:
				}
			}
		})
	}()
	// Route events of the workload interfaces.
	routeC := make(chan netlink.RouteUpdate, 1<<12)
	rdone := make(chan struct{})
	defer close(rdone)
	if err := netlink.RouteSubscribeWithOptions(routeC, rdone, netlink.RouteSubscribeOptions{Namespace: ptr(node.Handle())}); err != nil {
		t.Fatal(err)
	}
	drainC := func() {
		for len(commitC) > 0 {
			<-commitC
		}
		for len(routeC) > 0 {
			<-routeC
		}
	}

	var converge []time.Duration
	kills := map[string]int{}
	stagedSeen := 0 // chains of a staged batch found in the kernel after a kill
	modes := []string{"run", "driver"}
	if m := os.Getenv("NFTEP_CRASH_MODES"); m != "" {
		modes = strings.Split(m, ",")
	}
	for _, mode := range modes {
		state := newCrashState(endpoints)
		runDir := filepath.Join(t.TempDir(), "run")
		statePath := filepath.Join(t.TempDir(), "node.json")
		state.writeState(t, statePath)
		var cur *daemon
		var curMu sync.Mutex
		// start holds curMu throughout, and the churn holds it for each
		// change: a change is either in the state start sends, or sent to
		// the new daemon, never lost in between.
		start := func() *daemon {
			curMu.Lock()
			defer curMu.Unlock()
			d := &daemon{log: &testutil.SyncBuffer{}}
			args := []string{"--netns", node.Name, "--run-dir", runDir}
			if mode == "run" {
				args = append(args, "run", "--state", statePath)
			} else {
				args = append(args, "driver")
			}
			d.cmd = exec.Command(bin, args...)
			d.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
			if mode == "driver" {
				inR, inW, _ := os.Pipe()
				outR, outW, _ := os.Pipe()
				d.cmd.ExtraFiles = []*os.File{inR, outW}
				go io.Copy(io.Discard, outR)
				d.felix = proto.NewWriter(inW)
				d.close = func() { inW.Close(); outR.Close() }
				defer inR.Close()
				defer outW.Close()
			}
			if err := d.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if mode == "driver" {
				// Felix, on a driver start: the configuration, the whole
				// state, InSync.
				send := func(m *proto.ToDataplane) { _ = d.felix.WriteMessage(m) }
				send(&proto.ToDataplane{Payload: &proto.ToDataplane_ConfigUpdate{ConfigUpdate: &proto.ConfigUpdate{Config: crashConfig}}})
				for _, m := range state.messages() {
					send(m)
				}
				send(&proto.ToDataplane{Payload: &proto.ToDataplane_InSync{InSync: &proto.InSync{}}})
			}
			cur = d
			return d
		}
		kill := func(d *daemon, why string) {
			// The table must be there when nftep dies (but during the
			// very first cold start of a mode, when there may be none).
			_ = d.cmd.Process.Kill()
			_ = d.cmd.Wait()
			if d.close != nil {
				d.close()
			}
			kills[why]++
		}
		// churning: the state changes about 20 times a second.
		churnStop := make(chan struct{})
		var churnOn atomic.Bool
		churnDone := make(chan struct{})
		go func() {
			defer close(churnDone)
			tk := time.NewTicker(50 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-churnStop:
					return
				case <-tk.C:
				}
				if !churnOn.Load() {
					continue
				}
				curMu.Lock()
				m := state.churn()
				if mode == "run" {
					state.writeState(t, statePath)
				} else if cur != nil && cur.felix != nil {
					_ = cur.felix.WriteMessage(m)
				}
				curMu.Unlock()
			}
		}()

		// converged waits, with the churn paused, until the kernel holds
		// exactly the model of the current state (tables and the pods'
		// routes), and returns how long that took since t0.
		converged := func(d *daemon, t0 time.Time) time.Duration {
			churnOn.Store(false)
			time.Sleep(100 * time.Millisecond) // the last change written
			check := filepath.Join(t.TempDir(), "check.json")
			state.writeState(t, check)
			want, err := dataplane.DryRun(dataplane.Options{Namespace: h}, check)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				got := ""
				for _, fam := range []nft.Family{nft.FamilyINet, nft.FamilyARP} {
					if k, err := nft.ReadKernelTable(context.Background(), node.Fd(), fam, "nftep"); err == nil {
						got += k.Model.String()
					}
				}
				routesOK := true
				state.mu.Lock()
				eAddr := state.eAddr
				state.mu.Unlock()
				for iface, addr := range map[string]string{"cali-a": "10.65.0.1", "cali-b": "10.65.0.2", "cali-e": eAddr} {
					rs, _ := node.Netlink().RouteList(node.Link(t, iface), netlink.FAMILY_V4)
					routesOK = routesOK && slices.ContainsFunc(rs, func(r netlink.Route) bool { return r.Dst != nil && r.Dst.IP.String() == addr })
				}
				if got == want.Ruleset && routesOK {
					return time.Since(t0)
				}
				if time.Now().After(deadline) {
					os.WriteFile("/tmp/crash-got.nft", []byte(got), 0o644)
					os.WriteFile("/tmp/crash-want.nft", []byte(want.Ruleset), 0o644)
					t.Fatalf("%s mode: the kernel did not converge to the model within 60 s (tables equal %v, routes %v)\n%s", mode, got == want.Ruleset, routesOK, tail(d.log.String(), 40))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		waitCommit := func(what string) {
			select {
			case <-commitC:
			case <-time.After(60 * time.Second):
				t.Fatalf("%s mode: no commit for %s", mode, what)
			}
		}

		d := start()
		startCounting()
		converge = append(converge, converged(d, time.Now()))
		for c := range cycles {
			churnOn.Store(true)
			time.Sleep(time.Duration(500+rand.IntN(1500)) * time.Millisecond)
			switch c % 4 {
			case 0: // a random moment of the churn
				kill(d, "during churn")
			case 1: // right after a commit
				drainC()
				waitCommit("a churn commit")
				kill(d, "right after a commit")
			case 2: // during a cold start, at a random moment
				kill(d, "during churn")
				drainC()
				d = start()
				time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
				kill(d, "during a cold start")
			case 3: // in a restart's large transaction, and while routes are written
				kill(d, "during churn")
				// While it is down every endpoint is renamed: the
				// restart writes two new chains per endpoint and is
				// killed right after its first commit (with
				// NFTEP_CRASH_ENDPOINTS=3000 or more, the first of its
				// staged batches).
				// (When such a transaction is staged, the kill can land
				// between its batches: nft.TestKernelStagedRetryStaysStaged
				// covers a staged apply that stops midway.)
				curMu.Lock()
				state.renameAll()
				if mode == "run" {
					state.writeState(t, statePath)
				}
				curMu.Unlock()
				drainC()
				d = start()
				waitCommit("the first staged batch")
				kill(d, "after the first commit of a restart rewriting every endpoint")
				// Staged: the renamed endpoints' chains are in the kernel,
				// but the dispatch map still sends their packets to the
				// old chains.
				if k, err := nft.ReadKernelTable(context.Background(), node.Fd(), nft.FamilyINet, "nftep"); err == nil {
					staged, live := 0, false
					for _, c := range k.Chains {
						if strings.Contains(c, "-calim") {
							staged++
						}
					}
					if s := k.Model.Set("filter-from-wl"); s != nil {
						for _, e := range s.SortedElements() {
							live = live || strings.HasPrefix(e.Key, "calim") && e.Verdict != nil && strings.Contains(e.Verdict.Chain, "calim")
						}
					}
					t.Logf("%s mode: killed after the first commit of a restart with every endpoint renamed: %d new endpoint chains in the kernel, live: %v", mode, staged, live)
					if !live {
						stagedSeen += staged
					}
				}
				drainC()
				d = start()
				churnOn.Store(true)
				select {
				case <-routeC:
					kill(d, "while routes are written")
				case <-time.After(60 * time.Second):
					t.Fatalf("%s mode: no route written after a start", mode)
				}
			}
			drainC()
			t0 := time.Now()
			d = start()
			converge = append(converge, converged(d, t0))
		}
		close(churnStop)
		<-churnDone
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		_ = d.cmd.Wait()
		if d.close != nil {
			d.close()
		}
		t.Logf("%s mode: %d changes, %d restarts", mode, state.changes, cycles+1)
	}
	close(stop)
	wg.Wait()

	var sent int64
	for _, p := range probers[:3] {
		sent += p.sent.Load()
	}
	leaks := recv.got["10.65.0.2:9090 denied"] + recv.got["10.65.0.2:8080 unowned"] + recv.got["10.65.0.2:8080 spoofed"]
	slices.Sort(converge)
	t.Logf("never-open probes: %d sent (%d denied-port, %d unowned-interface, %d spoofed), %d passed; control: %d of %d genuine arrived",
		sent, probers[0].sent.Load(), probers[1].sent.Load(), probers[2].sent.Load(), leaks, recv.got["10.65.0.2:8080 genuine"], probers[3].sent.Load())
	t.Logf("kills: %v; nftep commits: %d; new chains found unreferenced (staged) after a kill in a large restart: %d", kills, commits.Load(), stagedSeen)
	t.Logf("restart to converged (tables and routes equal to the model), %d restarts: p50 %v, max %v",
		len(converge), converge[len(converge)/2].Round(time.Millisecond), converge[len(converge)-1].Round(time.Millisecond))
	if leaks != 0 {
		t.Errorf("%d probe packets passed: %v", leaks, recv.got)
	}
	if recv.got["10.65.0.2:8080 genuine"] == 0 {
		t.Errorf("no genuine datagram arrived: the probes prove nothing")
	}
}

func ptr[T any](v T) *T { return &v }

// tail returns the last n lines of s that are not per-endpoint status lines.
func tail(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "workload endpoint not up") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}
