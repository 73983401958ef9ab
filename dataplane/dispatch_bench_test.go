package dataplane_test

// BenchmarkDispatchThroughput: "dispatch stays flat". TCP throughput
// between two real pods on one node must not depend on how many workload
// endpoints the node holds, because a packet finds its endpoint's chain
// with one lookup in the dispatch maps (iifname/oifname vmap), not by
// walking a rule per endpoint.
//
// Setup (once per sub-benchmark, in throwaway network namespaces): a node
// namespace and two pod namespaces, pod-a (10.65.0.1) and pod-b
// (10.65.0.2), each wired to the node by a veth (cali-a, cali-b on the
// node, eth0 with a /32 in the pod, default route via 169.254.1.1 onlink),
// as Calico's CNI plugin does. The node is programmed in-process by
// dataplane.Apply from a JSON state file:
//
//   - pod-b's ingress policy allows tcp 5201 (iperf3) from pod-a's IP set,
//     and its tier's default action drops everything else;
//   - both pods have a profile that allows egress;
//   - N−2 synthetic endpoints (calis00000 …) with pod-b's policy and
//     profile, on interfaces that do not exist: they report "down", but
//     their chains and dispatch map elements are programmed all the same,
//     so the maps the pods' packets are looked up in hold N elements.
//
// The sub-benchmarks are shared=false|true (NftepSharedEndpointChains: a
// chain per endpoint, or one content-addressed chain for every endpoint
// with the same body) × endpoints=10|10000. One iteration is one iperf3
// run: `iperf3 -s -1` in pod-b, `iperf3 -c 10.65.0.2 -t T -J` in pod-a
// (T is NFTEP_IPERF_SECONDS, default 5); the metric Gbit/s is the
// receiver's rate (end.sum_received), averaged over the iterations.
//
// The claim is checked by comparing medians: endpoints=10000 must reach at
// least 0.95 of endpoints=10 in the same mode. hack/bench.sh
// (BENCH=Dispatch) prints that table. Run as root, e.g.
//
//	go test ./dataplane -run '^$' -bench DispatchThroughput -count=5 -benchtime=1x

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
)

const (
	iperfPort   = 5201
	podAAddr    = "10.65.0.1"
	podBAddr    = "10.65.0.2"
	podGateway  = "169.254.1.1"
	iperfPolicy = "allow-a-to-b-iperf"
)

func BenchmarkDispatchThroughput(b *testing.B) {
	netnstest.RequireRoot(b)
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Skip("iperf3 is not installed (Debian: apt-get install iperf3)")
	}
	seconds := 5
	if s := os.Getenv("NFTEP_IPERF_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("NFTEP_IPERF_SECONDS=%q: want a whole number of seconds ≥ 1", s)
		}
		seconds = n
	}
	for _, shared := range []bool{false, true} {
		for _, n := range []int{10, 10000} {
			b.Run(fmt.Sprintf("shared=%t/endpoints=%d", shared, n), func(b *testing.B) {
				podA, podB := dispatchNode(b, shared, n)
				// The pods' traffic must cross nftep's rules, or the
				// figure says nothing about them: a port pod-b's policy
				// does not allow is dropped (a timeout, not the
				// refusal pod-b's kernel would send).
				if err := dialDropped(podA, podBAddr, iperfPort+1); err != nil {
					b.Fatal(err)
				}
				var sum float64
				b.ResetTimer()
				for range b.N {
					sum += iperf(b, podA, podB, seconds)
				}
				b.StopTimer()
				b.ReportMetric(sum/float64(b.N), "Gbit/s")
			})
		}
	}
}

// dispatchNode builds the node with its two pods and programs it with n
// endpoints. It returns the pods' namespaces.
func dispatchNode(b *testing.B, shared bool, n int) (podA, podB *netnstest.NS) {
	b.Helper()
	node := netnstest.New(b)
	pod := func(iface, addr string) *netnstest.NS {
		p := netnstest.New(b)
		netnstest.Veth(b, node, iface, p, "eth0")
		p.AddAddr(b, "eth0", addr+"/32")
		p.AddRoute(b, podGateway+"/32", "eth0", "")
		p.AddRoute(b, "0.0.0.0/0", "eth0", podGateway)
		// A permanent neighbour for the gateway, so no ARP exchange
		// (proxy ARP, the arp table) sits in the path being measured.
		hostMAC := node.Link(b, iface).Attrs().HardwareAddr
		if err := p.Netlink().NeighAdd(&netlink.Neigh{LinkIndex: p.Link(b, "eth0").Attrs().Index, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP(podGateway), HardwareAddr: hostMAC}); err != nil {
			b.Fatal(err)
		}
		return p
	}
	podA = pod("cali-a", podAAddr)
	podB = pod("cali-b", podBAddr)
	// A node routes between its pods (nftep sets only the workload
	// interfaces' own forwarding); this is the node namespace's sysctl,
	// not the host's.
	node.Run(b, "sysctl", "-qw", "net.ipv4.ip_forward=1")

	state := filepath.Join(b.TempDir(), "state.json")
	if err := os.WriteFile(state, dispatchState(b, shared, n), 0o644); err != nil {
		b.Fatal(err)
	}
	opts := dataplane.Options{Namespace: openNS(b, node), RunDir: b.TempDir()}
	start := time.Now()
	res, err := dataplane.Apply(context.Background(), opts, state)
	if err != nil {
		b.Fatalf("Apply: %v", err)
	}
	b.Logf("%d endpoints programmed in %v (%d operations)", n, time.Since(start).Round(time.Millisecond), res.Operations)

	// The synthetic endpoints count only if they are in the table: every
	// endpoint must have its status, the pods must be up, and the last
	// synthetic interface must be in the dispatch maps.
	if len(res.Statuses) != n {
		b.Fatalf("%d endpoint statuses, want %d", len(res.Statuses), n)
	}
	for _, st := range res.Statuses {
		if (st.ID == "k8s/bench/pod-a/eth0" || st.ID == "k8s/bench/pod-b/eth0") && st.Status != "up" {
			b.Fatalf("%s is %s (%s), want up", st.ID, st.Status, st.Reason)
		}
	}
	kt, err := nft.ReadKernelTable(context.Background(), node.Fd(), nft.FamilyINet, "nftep")
	if err != nil {
		b.Fatal(err)
	}
	if last := fmt.Sprintf("%q comment", syntheticIface(n-3)); !strings.Contains(kt.Model.String(), last) {
		b.Fatalf("the kernel's table has no dispatch element %s …", last)
	}
	return podA, podB
}

func syntheticIface(i int) string { return fmt.Sprintf("calis%05d", i) }

// dispatchState returns the state file: the two pods and n−2 synthetic
// endpoints. It is built as data and marshalled, so that 10,000 endpoints
// are as easy to read in the code as two.
func dispatchState(b *testing.B, shared bool, n int) []byte {
	b.Helper()
	type obj = map[string]any
	id := func(pod string) obj {
		return obj{"orchestratorId": "k8s", "workloadId": "bench/" + pod, "endpointId": "eth0"}
	}
	protected := []obj{{"name": "default", "defaultAction": "Deny",
		"ingressPolicies": []obj{{"name": iperfPolicy, "namespace": "bench", "kind": "NetworkPolicy"}}}}
	wep := func(pod, iface, addr string, tiers []obj) obj {
		ep := obj{"state": "active", "name": iface, "ipv4Nets": []string{addr + "/32"}, "profileIds": []string{"kns.bench"}}
		if tiers != nil {
			ep["tiers"] = tiers
		}
		return obj{"workloadEndpointUpdate": obj{"id": id(pod), "endpoint": ep}}
	}
	updates := []obj{
		{"ipsetUpdate": obj{"id": "s:app-pod-a", "type": "NET", "members": []string{podAAddr + "/32"}}},
		{"activePolicyUpdate": obj{
			"id": obj{"name": iperfPolicy, "namespace": "bench", "kind": "NetworkPolicy"},
			"policy": obj{"namespace": "bench", "tier": "default", "originalSelector": "app == 'pod-b'",
				"inboundRules": []obj{{"action": "allow", "protocol": obj{"name": "tcp"}, "srcIpSetIds": []string{"s:app-pod-a"},
					"dstPorts": []obj{{"first": iperfPort, "last": iperfPort}}, "ruleId": "a-to-b-iperf"}}},
		}},
		{"activeProfileUpdate": obj{"id": obj{"name": "kns.bench"},
			"profile": obj{"outboundRules": []obj{{"action": "allow", "ruleId": "egress-all"}}}}},
		wep("pod-a", "cali-a", podAAddr, nil),
		wep("pod-b", "cali-b", podBAddr, protected),
	}
	// The synthetic endpoints look like pod-b (same policy and profile),
	// so that with shared chains they share pod-b's bodies as real
	// replicas of one deployment would; their addresses are outside the
	// pods' 10.65.0.0/24.
	for i := range n - 2 {
		addr := fmt.Sprintf("10.66.%d.%d", i/250, i%250+1)
		updates = append(updates, wep(fmt.Sprintf("synthetic-%05d", i), syntheticIface(i), addr, protected))
	}
	data, err := json.Marshal(obj{
		"config":  obj{"InterfacePrefix": "cali", "NftepSharedEndpointChains": strconv.FormatBool(shared)},
		"updates": updates,
	})
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// dialDropped checks that a TCP connection from pod to addr:port is
// dropped on the way (no answer within the timeout) rather than refused.
func dialDropped(pod *netnstest.NS, addr string, port int) error {
	var err error
	if doErr := pod.Do(func() error {
		var c net.Conn
		c, err = net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 500*time.Millisecond)
		if c != nil {
			c.Close()
		}
		return nil
	}); doErr != nil {
		return doErr
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return fmt.Errorf("tcp to %s:%d (not allowed by pod-b's policy): got %v, want a timeout (dropped by nftep)", addr, port, err)
}

// iperf runs one iperf3 test from podA to podB and returns the receiver's
// rate in Gbit/s.
func iperf(b *testing.B, podA, podB *netnstest.NS, seconds int) float64 {
	b.Helper()
	b.StopTimer()
	// Removing a namespace that held 10,000 endpoints' chains goes on in
	// kernel workers (RCU frees of some 220,000 rules) for a while after
	// the namespace is gone, and iperf3 is CPU-bound on a small machine:
	// without this wait, the run after a large setup's teardown measured
	// that teardown.
	if waited, busy := waitCPUQuiet(0.10, 30*time.Second); waited > 2*time.Second {
		b.Logf("waited %v for the CPUs to go quiet (last second %.0f%% busy)", waited.Round(time.Second), 100*busy)
	}
	// -1: the server exits after one test, so nothing outlives it.
	srv := exec.Command("ip", "netns", "exec", podB.Name, "iperf3", "-s", "-1", "-B", podBAddr, "-p", strconv.Itoa(iperfPort))
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		b.Fatalf("start iperf3 server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	defer func() {
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			// `ip netns exec` execs iperf3 in place: this is the
			// server's own pid, which we started.
			srv.Process.Kill()
			<-exited
		}
	}()
	// Wait for the listener without connecting to it: a probe connection
	// would be the one test `-s -1` serves.
	listening := fmt.Sprintf("%s:%d", podBAddr, iperfPort)
	for deadline := time.Now().Add(5 * time.Second); ; {
		out, _ := podB.Output("ss", "-Hltn")
		if strings.Contains(out, listening) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("iperf3 server not listening on %s after 5 s:\n%s\nss: %s", listening, srvOut.String(), out)
		}
		time.Sleep(20 * time.Millisecond)
	}

	b.StartTimer()
	out, err := exec.Command("ip", "netns", "exec", podA.Name, "iperf3", "-c", podBAddr, "-p", strconv.Itoa(iperfPort),
		"-B", podAAddr, "-t", strconv.Itoa(seconds), "-J").Output()
	b.StopTimer()
	var report struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if jerr := json.Unmarshal(out, &report); jerr != nil || err != nil || report.Error != "" {
		b.Fatalf("iperf3 client: %v %v %s\n%s\nserver:\n%s", err, jerr, report.Error, out, srvOut.String())
	}
	if report.End.SumReceived.BitsPerSecond <= 0 {
		b.Fatalf("iperf3 reported no received rate:\n%s", out)
	}
	return report.End.SumReceived.BitsPerSecond / 1e9
}

// waitCPUQuiet waits until the machine's CPUs were busy less than
// threshold (a fraction) over one second, or until limit has passed. It
// returns how long it waited and the last second's busy fraction.
func waitCPUQuiet(threshold float64, limit time.Duration) (time.Duration, float64) {
	start := time.Now()
	busy := 1.0
	prevBusy, prevTotal, ok := cpuTimes()
	for ok && time.Since(start) < limit {
		time.Sleep(time.Second)
		var b, t uint64
		if b, t, ok = cpuTimes(); !ok || t == prevTotal {
			break
		}
		busy = float64(b-prevBusy) / float64(t-prevTotal)
		if busy < threshold {
			break
		}
		prevBusy, prevTotal = b, t
	}
	return time.Since(start), busy
}

// cpuTimes returns the busy and total jiffies of all CPUs (/proc/stat's
// cpu line: user … steal; idle and iowait count as not busy, guest and
// guest_nice are left out because user and nice already include them).
func cpuTimes() (busy, total uint64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, true
}
