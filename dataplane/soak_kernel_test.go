package dataplane_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// soakObserver counts the Felix messages the loop handed to the managers
// and, for each apply that committed to the inet table, how many had been
// handed over by then: an apply programs every message recorded before it.
type soakObserver struct {
	dataplane.BaseObserver
	mu       sync.Mutex
	messages int
	applies  []soakApply
}

type soakApply struct {
	messages int
	at       time.Time
}

func (o *soakObserver) Message(string) {
	o.mu.Lock()
	o.messages++
	o.mu.Unlock()
}

func (o *soakObserver) Applied(r *dataplane.ApplyReport) {
	if r.Err != nil || len(r.Tables) == 0 || r.Tables[0].Family != "inet" || r.Tables[0].Operations == 0 {
		return
	}
	o.mu.Lock()
	o.applies = append(o.applies, soakApply{o.messages, r.Time})
	o.mu.Unlock()
}

// TestKernelSoak drives `nftep driver` with a fake Felix at 50 updates a
// second (IP-set members added and removed, endpoints added and removed,
// policy ports changed) on a node of 200 endpoints for 5 s; with
// NFTEP_SOAK=60s (and NFTEP_SOAK_ENDPOINTS=2000) the long variant. It
// reports each update's latency from the frame written to the commit that
// programmed it (the commits seen by an nftables event subscriber), samples
// the live heap and the goroutines every second, and checks that neither
// grows and that the kernel ends holding exactly the model of the final
// state.
func TestKernelSoak(t *testing.T) {
	duration, endpoints := 5*time.Second, 200
	if d, err := time.ParseDuration(os.Getenv("NFTEP_SOAK")); err == nil {
		duration = d
	}
	if n, err := strconv.Atoi(os.Getenv("NFTEP_SOAK_ENDPOINTS")); err == nil && n > 0 {
		endpoints = n
	}
	const rate = 50
	ns := netnstest.New(t)
	h := openNS(t, ns)
	obs := &soakObserver{}
	opts := dataplane.Options{Namespace: h, RunDir: t.TempDir(), Observer: obs}
	// An OS pipe, as Felix gives its driver: its buffer lets Felix write on
	// while the driver applies (an io.Pipe would hold each write until the
	// driver reads it, and slow the sender down).
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w := proto.NewWriter(pw)
	done := make(chan error, 1)
	go func() { done <- dataplane.RunDriver(context.Background(), opts, pr, io.Discard) }()
	var seq uint64
	send := func(m *proto.ToDataplane) {
		m.SequenceNumber = seq
		seq++
		if err := w.WriteMessage(m); err != nil {
			t.Fatalf("write to the driver: %v", err)
		}
	}
	config := map[string]string{"FelixHostname": "soak-node", dataplane.KeyRouteRefreshInterval: "0"}
	send(&proto.ToDataplane{Payload: &proto.ToDataplane_ConfigUpdate{ConfigUpdate: &proto.ConfigUpdate{Config: config}}})
	base := benchNode(endpoints)
	for _, m := range base {
		send(m)
	}
	send(&proto.ToDataplane{Payload: &proto.ToDataplane_InSync{InSync: &proto.InSync{}}})
	require.Eventually(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		// Every message counts, the ConfigUpdate and InSync too.
		return obs.messages == len(base)+2 && len(obs.applies) > 0 && obs.applies[len(obs.applies)-1].messages == obs.messages
	}, 120*time.Second, pollTick, "the cold start")
	time.Sleep(time.Second) // the start's own resyncs

	var commits []nft.Commit
	var cmu sync.Mutex
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() {
		_ = nft.WatchCommits(wctx, ns.Fd(), func(c nft.Commit) {
			if c.Writer != nil && c.Writer.Self() && c.Touches(nft.FamilyINet, "nftep") {
				cmu.Lock()
				commits = append(commits, c)
				cmu.Unlock()
			}
		})
	}()
	time.Sleep(100 * time.Millisecond) // subscribed
	obs.mu.Lock()
	msgs0, applies0 := obs.messages, len(obs.applies)
	obs.mu.Unlock()

	// The churn: a cycle of five updates, which leaves the node as it was
	// but for the policy ports.
	ports := map[int]int32{}
	churn := func(k int) *proto.ToDataplane {
		c := k / 5
		member := benchAddr(netip.AddrFrom4([4]byte{10, 201, 0, 0}), c%50000+1) + "/32"
		switch k % 5 {
		case 0:
			return &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{Id: benchSetID(c % benchPolicies), AddedMembers: []string{member}}}}
		case 1:
			return benchEndpoint(endpoints+c%1000, false)
		case 2:
			p := c % benchPolicies
			ports[p] = int32(9000 + c%1000)
			return benchPolicy(p, ports[p])
		case 3:
			return &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{Id: benchSetID(c % benchPolicies), RemovedMembers: []string{member}}}}
		default:
			return benchEndpointRemove(endpoints + c%1000)
		}
	}

	type sample struct {
		heap       uint64
		goroutines int
	}
	var samples []sample
	var smu sync.Mutex
	sampleNow := func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		smu.Lock()
		samples = append(samples, sample{ms.HeapAlloc, runtime.NumGoroutine()})
		smu.Unlock()
	}
	sampleNow()
	// The sampler runs beside the sender, so that the updates keep their
	// rate. (Its own goroutine is counted in every sample but the first
	// and the last.)
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				sampleNow()
			case <-stopSampler:
				return
			}
		}
	}()
	var sent []time.Time
	soakStart := time.Now()
	// Update k is due at k/rate seconds: a sender that fell behind (the
	// machine busy) catches up instead of dropping updates, as a ticker
	// would.
	end := soakStart.Add(duration)
	for k := 0; time.Now().Before(end) || k%5 != 0; k++ {
		time.Sleep(time.Until(soakStart.Add(time.Duration(k) * time.Second / rate)))
		sent = append(sent, time.Now())
		send(churn(k))
	}
	close(stopSampler)
	<-samplerDone
	elapsed := time.Since(soakStart)
	require.Eventually(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.messages == msgs0+len(sent) && obs.applies[len(obs.applies)-1].messages == msgs0+len(sent)
	}, 30*time.Second, pollTick, "every update programmed")
	time.Sleep(300 * time.Millisecond) // the last commits' events
	sampleNow()
	wcancel()

	// Each update's commit: the first apply that had been handed it, and
	// the commit that apply made (applies and our commits of the table
	// correspond one to one, in order).
	obs.mu.Lock()
	applies := slices.Clone(obs.applies[applies0:])
	obs.mu.Unlock()
	cmu.Lock()
	ours := slices.Clone(commits)
	cmu.Unlock()
	if len(ours) != len(applies) {
		t.Fatalf("%d applies committed to the inet table, but the event subscriber saw %d commits of ours", len(applies), len(ours))
	}
	var lat []time.Duration
	a := 0
	for i, at := range sent {
		for applies[a].messages < msgs0+i+1 {
			a++
		}
		lat = append(lat, ours[a].At.Sub(at))
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond)
	}
	t.Logf("soak: %d endpoints, %d updates in %v (%.0f/s), %d commits: update→commit p50 %v, p99 %v, max %v",
		endpoints, len(sent), elapsed.Round(time.Second), float64(len(sent))/elapsed.Seconds(), len(ours), pct(0.5), pct(0.99), lat[len(lat)-1].Round(100*time.Microsecond))
	var curve string
	for _, s := range samples {
		curve += fmt.Sprintf(" %.1f/%d", float64(s.heap)/(1<<20), s.goroutines)
	}
	t.Logf("live heap MiB / goroutines, every second:%s", curve)

	// No growth: the live heap at the end within 25%% (and 2 MiB) of its
	// level at the start, the goroutines back where they were.
	first, last := samples[0], samples[len(samples)-1]
	if float64(last.heap) > 1.25*float64(first.heap)+2<<20 {
		t.Errorf("the live heap grew from %.1f to %.1f MiB", float64(first.heap)/(1<<20), float64(last.heap)/(1<<20))
	}
	if last.goroutines > first.goroutines+2 {
		t.Errorf("goroutines grew from %d to %d", first.goroutines, last.goroutines)
	}

	// The kernel holds exactly the model of the final state.
	final := slices.Clone(base)
	for i, m := range final {
		if u := m.GetActivePolicyUpdate(); u != nil {
			for p, port := range ports {
				if u.Id.Name == benchPolicyID(p).Name {
					final[i] = benchPolicy(p, port)
				}
			}
		}
	}
	state := filepath.Join(t.TempDir(), "final.json")
	writeStateFile(t, state, config, final)
	want, err := dataplane.DryRun(dataplane.Options{Namespace: h}, state)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, fam := range []nft.Family{nft.FamilyINet, nft.FamilyARP} {
		k, err := nft.ReadKernelTable(context.Background(), ns.Fd(), fam, "nftep")
		if err != nil {
			t.Fatal(err)
		}
		got += k.Model.String()
	}
	if got != want.Ruleset {
		t.Errorf("the kernel's tables differ from the model of the final state (%d and %d bytes)", len(got), len(want.Ruleset))
	}

	pw.Close()
	defer pr.Close()
	if err := <-done; err != nil {
		t.Errorf("RunDriver: %v", err)
	}
}
