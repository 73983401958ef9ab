package endpoints

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
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
