package endpoints

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/nftep/nftep/sysctl"
)

// TestStatusListKeptInStep: the list of workload IDs Statuses keeps up to
// date by change holds, after every step of a random walk of updates,
// removals, shadowing (two endpoints on one interface) and rejections,
// exactly the IDs of active, shadowed and invalid endpoints, sorted, as a
// list made again from scratch does.
func TestStatusListKeptInStep(t *testing.T) {
	h := newHarness(t)
	h.step(hostIfaces()...)
	h.m.Statuses() // the list is built here, then kept in step
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 400 {
		pod := fmt.Sprintf("pod-%02d", rng.IntN(30))
		iface := fmt.Sprintf("cali%02d", rng.IntN(12)) // fewer names than pods: shadowing
		var msg any
		switch r := rng.IntN(10); {
		case r < 5:
			msg = wlUpdate(pod, workloadEp(iface))
		case r < 7:
			bad := workloadEp(iface)
			bad.Ipv4Nets = []string{"not an address"}
			msg = wlUpdate(pod, bad)
		default:
			msg = wlRemove(pod)
		}
		h.step(msg)
		var got []string
		for _, s := range h.m.Statuses() {
			if s.Kind == "workload" {
				got = append(got, s.ID)
			}
		}
		ids := map[wlID]bool{}
		for id := range h.m.active {
			ids[id] = true
		}
		for id := range h.m.shadowed {
			ids[id] = true
		}
		for id := range h.m.invalid {
			ids[id] = true
		}
		var want []string
		for _, id := range sortedWlIDs(ids) {
			want = append(want, id.String())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (%T %s on %s): Statuses lists\n%v\nwant\n%v", step, msg, pod, iface, got, want)
		}
	}
	if len(h.m.shadowed) == 0 && len(h.m.invalid) == 0 {
		t.Log("note: the walk ended with no shadowed or invalid endpoint")
	}
}

// TestStatusCacheMatchesFresh: the statuses Statuses caches are, after
// every step of a random walk that also brings interfaces up, down and
// away, makes their sysctl writes fail and succeed again, and sets
// endpoints admin down, exactly those computed afresh.
func TestStatusCacheMatchesFresh(t *testing.T) {
	h := newHarness(t)
	h.step(hostIfaces()...)
	rng := rand.New(rand.NewPCG(3, 4))
	for step := range 600 {
		pod := fmt.Sprintf("pod-%02d", rng.IntN(20))
		iface := fmt.Sprintf("cali%02d", rng.IntN(10))
		var msg any
		switch r := rng.IntN(12); {
		case r < 4:
			ep := workloadEp(iface)
			if rng.IntN(4) == 0 {
				ep.State = "inactive"
			}
			msg = wlUpdate(pod, ep)
		case r < 5:
			bad := workloadEp(iface)
			bad.Ipv4Nets = []string{"not an address"}
			msg = wlUpdate(pod, bad)
		case r < 6:
			msg = wlRemove(pod)
		case r < 8:
			msg = ifaceUp(iface)
		case r < 9:
			msg = ifaceDown(iface)
		case r < 10:
			msg = ifaceGone(iface)
		case r < 11:
			// Sysctl writes of iface fail (missing) or work again; the
			// step's message only gives the manager a batch to run.
			h.sysFake.SetInterfaceMissing(iface, rng.IntN(2) == 0)
			msg = ifaceUp("eth0")
		default:
			// Someone else changes iface's forwarding: the periodic
			// read-back queues it and the repair's writes fail or not,
			// outside a batch (as the loop's verifySysctls does), so
			// nothing marks the endpoint.
			sys := h.m.deps.Sysctls.(*sysctl.Interfaces)
			h.sysFake.Preset("/proc/sys/net/ipv4/conf/"+iface+"/forwarding", "0")
			sys.Verify()
			if rng.IntN(2) == 0 {
				sys.Apply()
			}
			msg = nil
		}
		if msg != nil {
			h.step(msg)
		}
		got := h.m.Statuses()
		for _, l := range h.m.listed {
			fresh := h.m.workloadStatusOf(l.id)
			i := slices.IndexFunc(got, func(s EndpointStatus) bool { return s.ID == l.str })
			if i < 0 || got[i].Status != fresh.status || got[i].Reason != fresh.reason {
				t.Fatalf("step %d (%T %s on %s): %s is %+v, computed afresh %q (%q)", step, msg, pod, iface, l.str, got[i], fresh.status, fresh.reason)
			}
		}
	}
}
