package main

// The product, end to end: the nftep binary (apply, run, driver) programs a
// node of N workloads on real veths, and each figure is set beside a
// baseline measured in the same run: `nft -f` of the ruleset nftep
// produced, loaded into an empty namespace, or the kernel's floor (the
// commit of a one-rule batch). `make bench` runs these and prints the
// medians (hack/bench.sh); docs/performance.md has the results.
//
//	go test ./cmd/nftep -run '^$' -bench 'E2E/workloads=1000/' -benchtime=1x -count=5

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/sysctl"
)

// e2eSizes are the node sizes measured: 110 is the kubelet's default
// maximum of pods per node.
// NFTEP_E2E_SIZES (for example "1000,2000") replaces them; with
// NFTEP_E2E_COLD_ONLY set, only the cold apply and its floor are measured;
// with NFTEP_E2E_NO_FLOOR set, the floor is not (for working on the
// one-workload changes); NFTEP_E2E_DEBUG: see e2eGlobal.
var e2eSizes = []int{110, 1000, 10000}

func init() {
	if v := os.Getenv("NFTEP_E2E_SIZES"); v != "" {
		e2eSizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				panic(fmt.Sprintf("NFTEP_E2E_SIZES: %q is not a size", f))
			}
			e2eSizes = append(e2eSizes, n)
		}
	}
}

// e2eShape is the node's desired state: n workloads, each on its own veth
// (calie%06x), each in two of 100 policies each way (policies of three rules
// over 100 IP sets of 10 members) and one of 10 namespace profiles.
type e2eShape struct {
	n      int
	shared bool
}

const (
	e2ePolicies = 100
	e2eProfiles = 10
)

func e2eIface(i int) string { return fmt.Sprintf("calie%06x", i) }

func e2eAddr(i int) string {
	return netip.AddrFrom4([4]byte{10, byte(64 + i>>16), byte(i >> 8), byte(i)}).String()
}

func (s e2eShape) config() map[string]string {
	c := map[string]string{"InterfacePrefix": "cali", "RouteRefreshInterval": "90"}
	if s.shared {
		c["NftepSharedEndpointChains"] = "true"
	}
	return c
}

// endpoint is workload i; variant 1 is the same workload with other
// policies (the "changed" case).
func e2eEndpoint(i, variant int) *proto.ToDataplane {
	pol := func(k int) *proto.PolicyID {
		return &proto.PolicyID{Name: fmt.Sprintf("pol-%d", (i+k+variant*7)%e2ePolicies)}
	}
	return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
		Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("ns%d/pod-%d", i%e2eProfiles, i), EndpointId: "eth0"},
		Endpoint: &proto.WorkloadEndpoint{State: "active", Name: e2eIface(i), Mac: e2eMAC(i).String(),
			Ipv4Nets: []string{e2eAddr(i) + "/32"}, ProfileIds: []string{fmt.Sprintf("kns.ns%d", i%e2eProfiles)},
			Tiers: []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{pol(0), pol(1)}, EgressPolicies: []*proto.PolicyID{pol(2), pol(3)}}}},
	}}}
}

func e2eMAC(i int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0xee, 0, byte(i >> 16), byte(i >> 8), byte(i)}
}

// messages is the state with workloads 0..n-1 and the extra ones given
// (index → variant).
func (s e2eShape) messages(extra map[int]int) []*proto.ToDataplane {
	var out []*proto.ToDataplane
	for p := range e2ePolicies {
		var members []string
		for m := range 10 {
			members = append(members, fmt.Sprintf("10.200.%d.%d/32", p, m+1))
		}
		out = append(out,
			&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: fmt.Sprintf("s:set-%d", p), Type: proto.IPSetUpdate_NET, Members: members}}},
			&proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
				Id: &proto.PolicyID{Name: fmt.Sprintf("pol-%d", p)},
				Policy: &proto.Policy{Tier: "default",
					InboundRules: []*proto.Rule{
						{Action: "allow", Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}},
							SrcIpSetIds: []string{fmt.Sprintf("s:set-%d", p)}, DstPorts: []*proto.PortRange{{First: int32(8000 + p), Last: int32(8000 + p)}}},
						{Action: "allow", Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "udp"}}, DstPorts: []*proto.PortRange{{First: 53, Last: 53}}},
					},
					OutboundRules: []*proto.Rule{{Action: "allow", DstNet: []string{fmt.Sprintf("10.%d.0.0/16", 100+p)}}},
				}}}},
		)
	}
	for k := range e2eProfiles {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{
			Id: &proto.ProfileID{Name: fmt.Sprintf("kns.ns%d", k)}, Profile: &proto.Profile{OutboundRules: []*proto.Rule{{Action: "allow"}}}}}})
	}
	for i := range s.n {
		out = append(out, e2eEndpoint(i, 0))
	}
	for _, i := range slices.Sorted(func(yield func(int) bool) {
		for i := range extra {
			if !yield(i) {
				return
			}
		}
	}) {
		out = append(out, e2eEndpoint(i, extra[i]))
	}
	return out
}

// writeState writes the state as a JSON state file, atomically (a rename,
// as a configuration manager would).
//
// It returns the instant the file was replaced (just before the rename):
// `run`'s changes are timed from it, not from the start of this function,
// which spends hundreds of milliseconds at 10,000 workloads marshalling the
// file (protojson per message).
func (s e2eShape) writeState(b *testing.B, path string, extra map[int]int) (replaced time.Time) {
	b.Helper()
	var buf bytes.Buffer
	cfg, _ := json.Marshal(s.config())
	fmt.Fprintf(&buf, "{\"config\": %s,\n\"updates\": [\n", cfg)
	for k, m := range s.messages(extra) {
		j, err := protojson.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		if k > 0 {
			buf.WriteString(",\n")
		}
		buf.Write(j)
	}
	buf.WriteString("\n]}\n")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	replaced = time.Now()
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return replaced
}

// e2eNode is a namespace with an uplink (eth0, with the node's address)
// and n+1 workload veths, whose other ends are in one namespace of "pods"
// (with IPv6 off there, so that 10,000 pod ends do not keep the kernel busy
// with address configuration: a real node's pod ends are in namespaces of
// their own, quiet until the pod talks). The workload interfaces only have
// to exist and be up for routes and sysctls.
// Creating 10,000 veth pairs takes minutes, so a node is made once per
// size and kept for the whole test binary (removed by TestMain).
type e2eNode struct {
	name string
	ns   *netnsutil.NS
	pods *netnsutil.NS
	// sysDefaults are the interface sysctls' values on a new interface,
	// by path with %s for the interface name.
	sysDefaults map[string]string
}

// e2eNodeKey names a node: its size, and whether it is the floor's twin
// (the same interfaces, programmed by the standard tools).
type e2eNodeKey struct {
	n     int
	floor bool
}

var (
	e2eNodesMu sync.Mutex
	e2eNodes   = map[e2eNodeKey]*e2eNode{}
)

func e2eRemoveNodes() {
	e2eNodesMu.Lock()
	defer e2eNodesMu.Unlock()
	for n, node := range e2eNodes {
		_ = node.ns.Delete()
		_ = node.pods.Delete()
		delete(e2eNodes, n)
	}
}

func getE2ENode(b *testing.B, n int) *e2eNode { return getE2ENodeOf(b, e2eNodeKey{n: n}) }

// getE2EFloorNode is the floor's twin of getE2ENode(n): a namespace with
// the same interfaces, up, their peers up, where the standard tools do
// the kernel work nftep did.
func getE2EFloorNode(b *testing.B, n int) *e2eNode {
	return getE2ENodeOf(b, e2eNodeKey{n: n, floor: true})
}

func getE2ENodeOf(b *testing.B, key e2eNodeKey) *e2eNode {
	b.Helper()
	netnstest.RequireRoot(b)
	e2eNodesMu.Lock()
	defer e2eNodesMu.Unlock()
	if node := e2eNodes[key]; node != nil {
		return node
	}
	n := key.n
	name := netnstest.NamePrefix + fmt.Sprintf("e2e%d-%d", n, os.Getpid())
	if key.floor {
		name = netnstest.NamePrefix + fmt.Sprintf("e2e%df-%d", n, os.Getpid())
	}
	ns, err := netnsutil.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	pods, err := netnsutil.Create(name + "-pods")
	if err != nil {
		ns.Delete()
		b.Fatal(err)
	}
	node := &e2eNode{name: name, ns: ns, pods: pods}
	e2eNodes[key] = node
	if err := pods.Do(func() error {
		for _, f := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+f+"/disable_ipv6", []byte("1"), 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	nl, err := ns.Netlink()
	if err != nil {
		b.Fatal(err)
	}
	defer nl.Close()
	pnl, err := pods.Netlink()
	if err != nil {
		b.Fatal(err)
	}
	defer pnl.Close()
	// The node's uplink first, with the node's address, as on a real node
	// (where eth0 exists long before any pod). Without an IPv4 address of
	// link scope or wider on some interface, the kernel's choice of a
	// source address for each new route (fib_create_info →
	// inet_select_addr) walks every interface of the namespace: with
	// 10,000 veths that walk was two thirds of the cold apply's CPU, and
	// of ip -batch's in the floor. It stops at the first interface with
	// such an address, in the order they were created.
	uplink := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0", Flags: net.FlagUp},
		PeerName: "uplink", PeerNamespace: netlink.NsFd(pods.Fd())}
	if err := nl.LinkAdd(uplink); err != nil {
		b.Fatalf("uplink: %v", err)
	}
	if err := nl.AddrAdd(uplink, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(192, 0, 2, 10), Mask: net.CIDRMask(24, 32)}}); err != nil {
		b.Fatalf("uplink address: %v", err)
	}
	if peer, err := pnl.LinkByName(uplink.PeerName); err != nil {
		b.Fatal(err)
	} else if err := pnl.LinkSetUp(peer); err != nil {
		b.Fatal(err)
	}
	for i := range n + 1 {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: e2eIface(i), Flags: net.FlagUp, TxQLen: 1000},
			PeerName: fmt.Sprintf("pe%06x", i), PeerNamespace: netlink.NsFd(pods.Fd())}
		if err := nl.LinkAdd(v); err != nil {
			b.Fatalf("veth %d: %v", i, err)
		}
		peer, err := pnl.LinkByName(v.PeerName)
		if err != nil {
			b.Fatal(err)
		}
		if err := pnl.LinkSetUp(peer); err != nil {
			b.Fatal(err)
		}
	}
	// The interface sysctls as the kernel made them, to put back before
	// each cold apply: nftep does not write a value a file already holds,
	// and `nftep cleanup` leaves the sysctls alone.
	node.sysDefaults = map[string]string{}
	if err := ns.Do(func() error {
		for _, w := range e2eSysctlSteps(e2eIface(0)) {
			v, err := os.ReadFile(w.Path)
			if err != nil {
				return err
			}
			node.sysDefaults[strings.Replace(w.Path, e2eIface(0), "%s", 1)] = strings.TrimSpace(string(v))
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return node
}

// e2eSysctlSteps are the sysctls nftep writes for a workload interface of
// the benchmark's node (IPv4 and IPv6 on, no spoofing allowed).
func e2eSysctlSteps(iface string) []sysctl.Write {
	return sysctl.Steps(iface, true, true, false, "1")
}

// resetSysctls puts the interface sysctls of the node's n+1 workload
// interfaces back to the kernel's values.
func (node *e2eNode) resetSysctls(b *testing.B, n int) {
	b.Helper()
	if err := node.ns.Do(func() error {
		for i := range n + 1 {
			for tmpl, v := range node.sysDefaults {
				if err := os.WriteFile(fmt.Sprintf(tmpl, e2eIface(i)), []byte(v), 0); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// e2eRun is one measured process.
type e2eRun struct {
	wall      time.Duration
	user, sys time.Duration // its CPU
	rssMB     float64
	out       string // stdout and stderr
}

// runNftep runs the binary to completion, through the spawner (see
// testutil.Spawn: its peak RSS is its own, not the benchmark's), and
// returns its wall time and peak RSS.
func runNftep(b *testing.B, bin string, args ...string) e2eRun {
	b.Helper()
	return runNftepProfiled(b, "", bin, args...)
}

// runNftepProfiled is runNftep writing a CPU profile named name into the
// directory NFTEP_E2E_PROFILE names, when it is set.
func runNftepProfiled(b *testing.B, name, bin string, args ...string) e2eRun {
	b.Helper()
	var env []string
	if dir := os.Getenv("NFTEP_E2E_PROFILE"); dir != "" && name != "" {
		env = append(env, "NFTEP_CPUPROFILE="+filepath.Join(dir, name+".prof"))
	}
	r := testutil.Spawn(b, env, append([]string{bin}, args...)...)
	return e2eRun{wall: r.Wall, user: r.User, sys: r.Sys, rssMB: float64(r.MaxRSSKiB) / 1024, out: r.Out}
}

// e2eFloor is the cold apply's floor: the kernel work nftep did, done by
// the standard tools in their batch forms, one process each.
type e2eFloor struct {
	nft    e2eRun // nft -f of the ruleset
	ip     e2eRun // ip -batch of the routes and static neighbours
	sysctl e2eRun // sysctl -p of the interface settings
}

func (f e2eFloor) total() time.Duration { return f.nft.wall + f.ip.wall + f.sysctl.wall }

// measureFloor programs into twin, which has the same interfaces and is
// reset first, what nftep programmed on node (its n workloads; l is the
// node's listing, listNode): `nft -f` of `nft list ruleset`, `ip -batch`
// of nftep's routes (its protocol, boot) and permanent neighbours,
// `sysctl -p` of the workload interfaces' settings.
func measureFloor(b *testing.B, n int, node, twin *e2eNode, l nodeListing) e2eFloor {
	b.Helper()
	dir := b.TempDir()
	ruleset := writeFile(b, dir, "ruleset.nft", l.ruleset)
	if len(l.routes) < n {
		b.Fatalf("the floor found %d of nftep's routes in %s, want %d (one per workload)", len(l.routes), node.name, n)
	}
	var batch strings.Builder
	lineDelta(&batch, "route", nil, l.routes)
	lineDelta(&batch, "neigh", nil, l.neighs)
	ipBatch := writeFile(b, dir, "routes.batch", batch.String())
	var conf bytes.Buffer
	if err := node.ns.Do(func() error {
		for i := range n {
			for _, w := range e2eSysctlSteps(e2eIface(i)) {
				v, err := os.ReadFile(w.Path)
				if err != nil {
					return err
				}
				key := strings.ReplaceAll(strings.TrimPrefix(w.Path, "/proc/sys/"), "/", ".")
				fmt.Fprintf(&conf, "%s = %s\n", key, strings.TrimSpace(string(v)))
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	sysctlConf := writeFile(b, dir, "sysctl.conf", conf.String())

	// The twin as the node was before the cold apply.
	nodeOutput(b, twin, "nft", "flush", "ruleset")
	nodeOutput(b, twin, "ip", "route", "flush", "table", "main", "proto", "boot")
	nodeOutput(b, twin, "ip", "neigh", "flush", "nud", "permanent")
	twin.resetSysctls(b, n)

	return e2eFloor{
		nft:    runIn(b, twin, "nft", "-f", ruleset),
		ip:     runIn(b, twin, "ip", "-batch", ipBatch),
		sysctl: runIn(b, twin, "sysctl", "-q", "-p", sysctlConf),
	}
}

// runIn runs a command in node's namespace, through the spawner, and
// returns its wall time and peak RSS.
func runIn(b *testing.B, node *e2eNode, args ...string) e2eRun {
	b.Helper()
	r := testutil.Spawn(b, nil, append([]string{"nsenter", "--net=/run/netns/" + node.name}, args...)...)
	return e2eRun{wall: r.Wall, rssMB: float64(r.MaxRSSKiB) / 1024}
}

// floor is the commit of the smallest batch that pays the kernel's
// validation of the table: one accept rule in an unreferenced chain of
// nftep's table (the chain is removed again).
func floor(b *testing.B, node *e2eNode) time.Duration {
	b.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(node.ns.Fd()))
	if err != nil {
		b.Fatal(err)
	}
	tbl := &nftables.Table{Family: nftables.TableFamilyINet, Name: "nftep"}
	ch := c.AddChain(&nftables.Chain{Table: tbl, Name: "bench-floor"})
	if err := c.Flush(); err != nil {
		b.Fatal(err)
	}
	c.AddRule(&nftables.Rule{Table: tbl, Chain: ch, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
	start := time.Now()
	if err := c.Flush(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	c.FlushChain(ch)
	c.DelChain(ch)
	if err := c.Flush(); err != nil {
		b.Fatal(err)
	}
	return d
}

// commitWatcher sees every commit in the node.
type commitWatcher struct {
	c      chan nft.Commit
	cancel context.CancelFunc
}

func watchNodeCommits(b *testing.B, node *e2eNode) *commitWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &commitWatcher{c: make(chan nft.Commit, 1<<12), cancel: cancel}
	go func() {
		if err := nft.WatchCommits(ctx, node.ns.Fd(), func(c nft.Commit) {
			select {
			case w.c <- c:
			default:
			}
		}); err != nil && ctx.Err() == nil {
			b.Errorf("watch commits: %v", err)
		}
	}()
	// WatchCommits subscribes in its goroutine and gives no signal: let it
	// be in place before the first change is timed.
	time.Sleep(20 * time.Millisecond)
	return w
}

func (w *commitWatcher) drain() {
	for {
		select {
		case <-w.c:
		default:
			return
		}
	}
}

// settle waits for the commits a change causes and returns the time from
// start to the last of them: it waits for the first (up to timeout), then
// until quiet passes without another.
func (w *commitWatcher) settle(b *testing.B, start time.Time, what string) time.Duration {
	b.Helper()
	const quiet = 300 * time.Millisecond
	var last time.Time
	select {
	case c := <-w.c:
		last = c.At
	case <-time.After(60 * time.Second):
		b.Fatalf("%s: no commit within 60 s", what)
	}
	for {
		select {
		case c := <-w.c:
			last = c.At
		case <-time.After(quiet):
			return last.Sub(start)
		}
	}
}

// daemon is a running `nftep run` or `nftep driver`.
type e2eDaemon struct {
	cmd   *exec.Cmd
	log   testutil.SyncBuffer
	felix *proto.Writer
	close func()
}

func (d *e2eDaemon) stop(b *testing.B) {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	if d.close != nil {
		d.close()
	}
	if err := d.cmd.Wait(); err != nil {
		b.Logf("daemon exit: %v\n%s", err, d.log.String())
	}
}

// peakRSSMB is the daemon's peak RSS so far (VmHWM).
func (d *e2eDaemon) peakRSSMB() float64 { return d.statusMB("VmHWM") }

// rssMB is the daemon's RSS now (VmRSS).
func (d *e2eDaemon) rssMB() float64 { return d.statusMB("VmRSS") }

// statusMB is a field of the daemon's /proc status, in MB.
func (d *e2eDaemon) statusMB(field string) float64 {
	return procStatus(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid), field) / 1024
}

// procStatus sums the first number of the given fields of a
// /proc/…/status file (proc(5)); 0 when it cannot be read.
func procStatus(path string, fields ...string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var n float64
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && slices.Contains(fields, k) {
			if f := strings.Fields(v); len(f) > 0 {
				x, _ := strconv.ParseFloat(f[0], 64)
				n += x
			}
		}
	}
	return n
}

// idleSample is a process's CPU time and context switches, summed over
// its threads: wakeups are the voluntary switches (a thread went to sleep,
// and each sleep ends in a wakeup), preemptions the involuntary ones (the
// scheduler took the CPU from a thread that could have gone on running).
type idleSample struct {
	cpu                  time.Duration
	wakeups, preemptions int64
}

func sampleProc(pid int) idleSample {
	var s idleSample
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// Fields after the command's closing parenthesis: utime is the
		// 12th, stime the 13th (proc(5) fields 14 and 15).
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			if len(f) > 13 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				s.cpu = time.Duration(u+st) * time.Second / 100 // USER_HZ
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		s.wakeups += int64(procStatus(t, "voluntary_ctxt_switches"))
		s.preemptions += int64(procStatus(t, "nonvoluntary_ctxt_switches"))
	}
	return s
}

// waitSettled waits until the daemon has used no CPU time for 3 s in a
// row (the aftermath of its start: the kernel's events about what its
// first apply programmed, reported to it in their thousands), at most 5
// minutes, and returns how long that took.
func waitSettled(b *testing.B, d *e2eDaemon) time.Duration {
	b.Helper()
	start := time.Now()
	last, quiet := sampleProc(d.cmd.Process.Pid), 0
	for quiet < 3 && time.Since(start) < 5*time.Minute {
		time.Sleep(time.Second)
		s := sampleProc(d.cmd.Process.Pid)
		if s.cpu == last.cpu {
			quiet++
		} else {
			quiet = 0
		}
		last = s
	}
	return time.Since(start) - 3*time.Second
}

// waitApplied waits until the daemon's status file says it has applied
// (after a start: its first apply, with the whole state).
func waitApplied(b *testing.B, d *e2eDaemon, runDir string, since time.Time) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		var st dataplane.Status
		if data, err := os.ReadFile(filepath.Join(runDir, dataplane.StatusFileName)); err == nil && json.Unmarshal(data, &st) == nil &&
			st.PID == d.cmd.Process.Pid && st.InSync && st.LastApply.After(since) {
			return
		}
		if d.cmd.ProcessState != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("the daemon did not apply within 5 minutes:\n%s", d.log.String())
}

var e2eBin struct {
	once sync.Once
	path string
	err  error
}

// e2eBinary builds the nftep binary once for all the benchmarks, as `make
// build-static` builds the one that is deployed (CI, deploy/Containerfile):
// without cgo, so without the dynamic loader and libc. That is 3-4 ms and
// 1.5 MB less for every process than a default build on this kind of machine
// (`nftep version`: 16-18 against 21-22 ms, 10.9 against 12.4 MB peak RSS).
func e2eBinary(b *testing.B) string {
	b.Helper()
	e2eBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "nftep-e2e-bin-")
		if err != nil {
			e2eBin.err = err
			return
		}
		e2eBin.path = filepath.Join(dir, "nftep")
		cmd := exec.Command("go", "build", "-trimpath", "-o", e2eBin.path, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			e2eBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if e2eBin.err != nil {
		b.Fatal(e2eBin.err)
	}
	return e2eBin.path
}

// e2eGlobal is the binary's global flags for a node: with NFTEP_E2E_DEBUG
// set, every process logs at debug level (e2eDebugLog shows it), which
// says where the time of an incremental apply or a reload went.
func e2eGlobal(netns, runDir string) []string {
	g := []string{"--netns", netns, "--run-dir", runDir}
	if os.Getenv("NFTEP_E2E_DEBUG") != "" {
		g = append(g, "--log-level", "debug")
	}
	return g
}

// e2eDebugLogs numbers the logs NFTEP_E2E_DEBUG_DIR keeps.
var e2eDebugLogs atomic.Int64

// e2eDebugLog logs a process's debug lines, with NFTEP_E2E_DEBUG set.
func e2eDebugLog(b *testing.B, what, out string) {
	if os.Getenv("NFTEP_E2E_DEBUG") == "" {
		return
	}
	// The benchmark's log is truncated: NFTEP_E2E_DEBUG_DIR keeps every
	// process's whole log too, numbered (-count runs the same names again).
	if dir := os.Getenv("NFTEP_E2E_DEBUG_DIR"); dir != "" {
		n := e2eDebugLogs.Add(1)
		name := strings.NewReplacer("/", "_", " ", "_").Replace(fmt.Sprintf("%03d-%s-%s.log", n, b.Name(), what))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
			b.Logf("NFTEP_E2E_DEBUG_DIR: %v", err)
		}
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "DEBUG") {
			b.Logf("%s: %s", what, strings.TrimSpace(line))
		}
	}
}

// BenchmarkE2E measures, for each size and with per-endpoint or shared
// endpoint chains:
//
//   - cold: `nftep apply` of the whole state on a node without nftep's
//     tables, routes and interface sysctls, beside its floor (measureFloor):
//     the same kernel work by `nft -f`, `ip -batch` and `sysctl -p` in a
//     twin namespace with the same interfaces;
//   - apply-add/change/remove: `nftep apply` of the state with one
//     workload more, that workload changed, and removed again (the median
//     of e2eApplyRounds rounds);
//   - run-add/change/remove: `nftep run` keeping the node in step with the
//     file, timed from the file's replacement to the last commit it causes
//     (seen by an nftables event subscriber);
//   - driver-add/change/remove: `nftep driver` fed as Felix feeds it, timed
//     from the frame written to the last commit;
//   - floor-add/change/remove: each step's floor as the issue defines it,
//     `nft -f` of the step's ruleset delta plus `ip -batch` of its route and
//     neighbour, in the twin namespace (reportChangeFloors);
//   - floor: the kernel's commit of a one-rule batch in the same table, the
//     lower bound of any commit to it.
//
// Peak RSS of each process is reported too, each process started from a
// spawner (testutil.Spawn) so that it is the process's own.
func BenchmarkE2E(b *testing.B) {
	for _, n := range e2eSizes {
		for _, shared := range []bool{false, true} {
			b.Run(fmt.Sprintf("workloads=%d/shared=%v", n, shared), func(b *testing.B) {
				for range b.N {
					benchE2E(b, e2eShape{n: n, shared: shared})
				}
			})
		}
	}
}

func benchE2E(b *testing.B, s e2eShape) {
	bin := e2eBinary(b)
	node := getE2ENode(b, s.n)
	dir := b.TempDir()
	runDir := filepath.Join(dir, "run")
	state := filepath.Join(dir, "node.json")
	global := e2eGlobal(node.name, runDir)
	cleanup := func() { runNftep(b, bin, append(global, "cleanup")...) }
	cleanup()
	b.Cleanup(func() { exec.Command(bin, append(global, "cleanup")...).Run() })

	extra := s.n // the workload that comes and goes

	// Cold apply, and its floor: the same kernel work by the standard
	// tools in their batch forms, in the twin namespace. The floors are
	// measured last, after the one-workload changes by apply, run and
	// driver (the node is back where the cold apply left it by then):
	// loading 10,000 routes and a whole ruleset into the twin leaves the
	// kernel busy for a while, which what comes next would pay for.
	s.writeState(b, state, nil)
	tag := fmt.Sprintf("%d-shared=%v", s.n, s.shared)
	node.resetSysctls(b, s.n)
	cold := runNftepProfiled(b, "cold-"+tag, bin, append(global, "apply", "--quiet", "--state", state)...)
	e2eDebugLog(b, "cold", cold.out)
	b.ReportMetric(cold.wall.Seconds(), "cold-s")
	b.ReportMetric(cold.rssMB, "cold-rss-MB")
	// NFTEP_E2E_NO_FLOOR is for working on the one-workload changes: no
	// floor, no ratios.
	withFloor := os.Getenv("NFTEP_E2E_NO_FLOOR") == ""
	coldFloor := func(l nodeListing) {
		if !withFloor {
			return
		}
		fl := measureFloor(b, s.n, node, getE2EFloorNode(b, s.n), l)
		b.ReportMetric(fl.total().Seconds(), "floor-s")
		b.ReportMetric(fl.nft.wall.Seconds(), "floor-nft-s")
		b.ReportMetric(fl.ip.wall.Seconds(), "floor-ip-s")
		b.ReportMetric(fl.sysctl.wall.Seconds(), "floor-sysctl-s")
		b.ReportMetric(cold.wall.Seconds()/fl.total().Seconds(), "cold/floor")
		b.ReportMetric(cold.wall.Seconds()/fl.nft.wall.Seconds(), "cold/nft")
		b.ReportMetric(fl.nft.rssMB, "nft-rss-MB")
		b.ReportMetric(cold.rssMB/fl.nft.rssMB, "rss/nft")
	}
	if os.Getenv("NFTEP_E2E_COLD_ONLY") != "" {
		coldFloor(listNode(b, node))
		return
	}

	// One workload added, changed, removed, by apply: e2eApplyRounds
	// times over (each round ends where it started), each step's median
	// reported. With the floor, the node is listed around each step of the
	// first round for the floor of the change.
	steps := oneWorkloadSteps(extra)
	var applyRSS float64
	var listings []nodeListing
	if withFloor {
		listings = append(listings, listNode(b, node))
	}
	runs := map[string][]e2eRun{} // by step
	incremental := map[string]float64{}
	for round := range e2eApplyRounds {
		for _, st := range steps {
			s.writeState(b, state, st.extra)
			profile := "" // the first round's only
			if round == 0 {
				profile = "apply-" + st.name + "-" + tag
			}
			r := runNftepProfiled(b, profile, bin, append(global, "apply", "--json", "--state", state)...)
			if round == 0 {
				e2eDebugLog(b, "apply "+st.name, r.out)
			}
			runs[st.name] = append(runs[st.name], r)
			// 1 when every apply trusted the record of the one before.
			if _, ok := incremental[st.name]; !ok {
				incremental[st.name] = 1
			}
			if !strings.Contains(r.out, `"incremental": true`) {
				incremental[st.name] = 0
			}
			applyRSS = max(applyRSS, r.rssMB)
			if withFloor && round == 0 {
				listings = append(listings, listNode(b, node))
			}
		}
	}
	for _, st := range steps {
		median := func(of func(e2eRun) time.Duration) float64 {
			var ds []time.Duration
			for _, r := range runs[st.name] {
				ds = append(ds, of(r))
			}
			return ms(medianDuration(ds))
		}
		b.ReportMetric(median(func(r e2eRun) time.Duration { return r.wall }), "apply-"+st.name+"-ms")
		b.ReportMetric(median(func(r e2eRun) time.Duration { return r.user }), "apply-"+st.name+"-user-ms")
		b.ReportMetric(median(func(r e2eRun) time.Duration { return r.sys }), "apply-"+st.name+"-sys-ms")
		b.ReportMetric(incremental[st.name], "apply-"+st.name+"-incremental")
	}
	b.ReportMetric(applyRSS, "apply-rss-MB")
	applyVariants(b, bin, global, state, s)
	if os.Getenv("NFTEP_E2E_APPLY_ONLY") != "" {
		return
	}

	// The floor, while no daemon runs. Measured after the applies: its
	// commits into nftep's table move the ruleset generation, which makes
	// the next apply compute the whole node (as any foreign commit does).
	var floors []time.Duration
	for range 3 {
		floors = append(floors, floor(b, node))
	}
	b.ReportMetric(ms(medianDuration(floors)), "floor-ms")

	w := watchNodeCommits(b, node)
	defer w.cancel()

	// By run: the file replaced → the last commit.
	{
		d := startRun(b, bin, global, runDir, state)
		for _, st := range steps {
			w.drain()
			start := s.writeState(b, state, st.extra)
			b.ReportMetric(ms(w.settle(b, start, "run "+st.name)), "run-"+st.name+"-ms")
		}
		b.ReportMetric(d.peakRSSMB(), "run-rss-MB")
		d.stop(b)
		e2eDebugLog(b, "run", d.log.String())
	}

	// By driver: the frame written → the last commit.
	{
		d := startDriver(b, bin, global, runDir, s)
		send := func(m *proto.ToDataplane) {
			if err := d.felix.WriteMessage(m); err != nil {
				b.Fatalf("write to the driver: %v\n%s", err, d.log.String())
			}
		}
		remove := &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointRemove{WorkloadEndpointRemove: &proto.WorkloadEndpointRemove{
			Id: e2eEndpoint(extra, 0).GetWorkloadEndpointUpdate().Id}}}
		for _, st := range []struct {
			name string
			msg  *proto.ToDataplane
		}{{"add", e2eEndpoint(extra, 0)}, {"change", e2eEndpoint(extra, 1)}, {"remove", remove}} {
			w.drain()
			start := time.Now()
			send(st.msg)
			b.ReportMetric(ms(w.settle(b, start, "driver "+st.name)), "driver-"+st.name+"-ms")
		}
		b.ReportMetric(d.peakRSSMB(), "driver-rss-MB")
		d.stop(b)
		e2eDebugLog(b, "driver", d.log.String())
	}

	// The floors last (see coldFloor). The daemons left the node as the
	// applies found it, which the floor of the changes relies on.
	if withFloor {
		now := listNode(b, node)
		if now.ruleset != listings[0].ruleset {
			b.Fatalf("after run and driver, the ruleset is not the one the applies started from")
		}
		coldFloor(now)
	}
	if withFloor {
		reportChangeFloors(b, getE2EFloorNode(b, s.n), steps, listings)
	}
}

// e2eApplyRounds is how many times the one-workload applies are made in a
// run (their medians are reported): single runs of a one-shot process
// move by tens of milliseconds on a shared machine.
const e2eApplyRounds = 5

// oneWorkloadStep is one state of the workload that comes and goes: the
// extra workloads of the state file (see e2eShape.writeState).
type oneWorkloadStep struct {
	name  string
	extra map[int]int
}

// oneWorkloadSteps adds workload index, changes it, and removes it.
func oneWorkloadSteps(index int) []oneWorkloadStep {
	return []oneWorkloadStep{{"add", map[int]int{index: 0}}, {"change", map[int]int{index: 1}}, {"remove", nil}}
}

// applyVariants is for working on the one-workload `apply`: for each
// environment in NFTEP_E2E_APPLY_ENVS (";"-separated, each a
// space-separated list of NAME=value, e.g. "GOGC=100;GOGC=50"), the add,
// change and remove steps again, NFTEP_E2E_APPLY_REPEAT times (default 3),
// reported as apply-<step>-ms[<env>] (the median). With
// NFTEP_E2E_APPLY_ONLY set, the benchmark stops after them.
func applyVariants(b *testing.B, bin string, global []string, state string, s e2eShape) {
	envs := os.Getenv("NFTEP_E2E_APPLY_ENVS")
	if envs == "" {
		return
	}
	repeat := 3
	if v, err := strconv.Atoi(os.Getenv("NFTEP_E2E_APPLY_REPEAT")); err == nil && v > 0 {
		repeat = v
	}
	steps := oneWorkloadSteps(s.n)
	for _, env := range strings.Split(envs, ";") {
		walls := map[string][]time.Duration{}
		for range repeat {
			for _, st := range steps {
				s.writeState(b, state, st.extra)
				cmd := exec.Command(bin, append(global, "apply", "--json", "--state", state)...)
				cmd.Env = append(os.Environ(), strings.Fields(env)...)
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				start := time.Now()
				if err := cmd.Run(); err != nil {
					b.Fatalf("apply %s with %q: %v\n%s", st.name, env, err, out.String())
				}
				walls[st.name] = append(walls[st.name], time.Since(start))
				if !strings.Contains(out.String(), `"incremental": true`) {
					b.Logf("apply %s with %q was not incremental", st.name, env)
				}
			}
		}
		for _, st := range steps {
			b.ReportMetric(ms(medianDuration(walls[st.name])), "apply-"+st.name+"-ms["+strings.ReplaceAll(env, " ", ",")+"]")
		}
	}
}

// startRun starts `nftep run` on the state file and waits for its first
// apply.
func startRun(b *testing.B, bin string, global []string, runDir, state string) *e2eDaemon {
	b.Helper()
	d := &e2eDaemon{}
	d.cmd = exec.Command(bin, append(global, "run", "--state", state)...)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	started := time.Now()
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	waitApplied(b, d, runDir, started)
	time.Sleep(500 * time.Millisecond) // its start-up resyncs settle
	return d
}

// startDriver starts `nftep driver`, sends it what Felix sends at start
// (the configuration, the whole state, InSync) and waits for its apply.
func startDriver(b *testing.B, bin string, global []string, runDir string, s e2eShape) *e2eDaemon {
	b.Helper()
	d := &e2eDaemon{}
	d.cmd = exec.Command(bin, append(global, "driver")...)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	d.cmd.ExtraFiles = []*os.File{inR, outW}
	go io.Copy(io.Discard, outR)
	d.felix = proto.NewWriter(inW)
	d.close = func() { inW.Close(); outR.Close() }
	started := time.Now()
	if err := d.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	inR.Close()
	outW.Close()
	send := func(m *proto.ToDataplane) {
		if err := d.felix.WriteMessage(m); err != nil {
			b.Fatalf("write to the driver: %v\n%s", err, d.log.String())
		}
	}
	send(&proto.ToDataplane{Payload: &proto.ToDataplane_ConfigUpdate{ConfigUpdate: &proto.ConfigUpdate{Config: s.config()}}})
	for _, m := range s.messages(nil) {
		send(m)
	}
	send(&proto.ToDataplane{Payload: &proto.ToDataplane_InSync{InSync: &proto.InSync{}}})
	waitApplied(b, d, runDir, started)
	time.Sleep(500 * time.Millisecond)
	return d
}

// BenchmarkE2EIdle measures what `nftep run` and `nftep driver` cost while
// nothing changes, on the largest node: CPU time, wakeups and preemptions
// (see idleSample) over NFTEP_E2E_IDLE (default 180 s, the period of the
// daemons' periodic work: the ruleset's resync every
// NftablesRefreshInterval, with a slice of the sysctl read-back),
// after the start-up has settled (waitSettled; the time that took is
// reported as settle-s). Periodic work and the status heartbeats are what
// it measures; and the daemon's resident set at the end of the window
// (rest-rss-MB) and at its largest since it started (peak-rss-MB, the
// start-up included).
func BenchmarkE2EIdle(b *testing.B) {
	idle := 180 * time.Second
	if v := os.Getenv("NFTEP_E2E_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("NFTEP_E2E_IDLE: %v", err)
		}
		idle = d
	}
	n := e2eSizes[len(e2eSizes)-1]
	b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
		for range b.N {
			bin := e2eBinary(b)
			node := getE2ENode(b, n)
			s := e2eShape{n: n}
			dir := b.TempDir()
			runDir := filepath.Join(dir, "run")
			state := filepath.Join(dir, "node.json")
			global := e2eGlobal(node.name, runDir)
			runNftep(b, bin, append(global, "cleanup")...)
			b.Cleanup(func() { exec.Command(bin, append(global, "cleanup")...).Run() })
			s.writeState(b, state, nil)
			for _, mode := range []string{"run", "driver"} {
				var d *e2eDaemon
				if mode == "run" {
					d = startRun(b, bin, global, runDir, state)
				} else {
					d = startDriver(b, bin, global, runDir, s)
				}
				b.ReportMetric(waitSettled(b, d).Seconds(), mode+"-settle-s")
				before := sampleProc(d.cmd.Process.Pid)
				logged := d.log.Len()
				time.Sleep(idle)
				after := sampleProc(d.cmd.Process.Pid)
				if os.Getenv("NFTEP_E2E_DEBUG") != "" {
					b.Logf("%s, idle:\n%s", mode, d.log.String()[logged:])
				}
				per := float64(time.Minute) / float64(idle)
				b.ReportMetric((after.cpu-before.cpu).Seconds()*per, mode+"-cpu-s/min")
				b.ReportMetric(float64(after.wakeups-before.wakeups)*per, mode+"-wakeups/min")
				b.ReportMetric(float64(after.preemptions-before.preemptions)*per, mode+"-preemptions/min")
				// What to size a memory limit by: the resident set at the
				// end of the window, and the most it held since it started.
				b.ReportMetric(d.rssMB(), mode+"-rest-rss-MB")
				b.ReportMetric(d.peakRSSMB(), mode+"-peak-rss-MB")
				d.stop(b)
				e2eDebugLog(b, mode, d.log.String())
			}
		}
	})
}

// TestMain removes the benchmarks' nodes (kept across -count runs).
func TestMain(m *testing.M) {
	testutil.RunSpawner() // see runIn
	code := m.Run()
	e2eRemoveNodes()
	if e2eBin.path != "" {
		os.RemoveAll(filepath.Dir(e2eBin.path))
	}
	os.Exit(code)
}
