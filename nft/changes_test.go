package nft

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestChangeLogPlansLikeAFullCompare drives a model through random changes
// (chains added, rewritten, re-rendered unchanged and deleted; elements
// added, changed and deleted; a set's definition changed) and checks after
// each that the plan from the change log is the plan a whole-model
// comparison makes.
func TestChangeLogPlansLikeAFullCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewModel(FamilyINet, testTable)
	log := m.track()
	baseModel(m)
	have := newState()
	commit := func(step int) {
		t.Helper()
		full := &planner{have: have, want: m, v: vocabularyValidator{}}
		fromLog := &planner{have: have, want: m, v: vocabularyValidator{}, changed: log}
		pf, err := full.plan()
		if err != nil {
			t.Fatalf("step %d: full plan: %v", step, err)
		}
		pl, err := fromLog.plan()
		if err != nil {
			t.Fatalf("step %d: plan from the log: %v", step, err)
		}
		if a, b := pf.tx.String(), pl.tx.String(); a != b {
			t.Fatalf("step %d: plans differ\nfull:\n%s\nfrom the log:\n%s", step, a, b)
		}
		have.commit(pl, m)
		log.reset()
	}
	commit(0)
	endpoints := []string{"v1", "v2"}
	for step := 1; step <= 300; step++ {
		switch rng.IntN(7) {
		case 0: // a new endpoint
			n := fmt.Sprintf("e%d", step)
			m.SetChain(regular("filter-fw-"+n, rule(n, drop)))
			m.SetElement("filter-from-wl", Element{Key: n, Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-" + n}})
			endpoints = append(endpoints, n)
		case 1: // an endpoint goes
			if len(endpoints) > 1 {
				i := rng.IntN(len(endpoints))
				n := endpoints[i]
				endpoints = append(endpoints[:i], endpoints[i+1:]...)
				m.DeleteElement("filter-from-wl", n)
				m.DeleteChain("filter-fw-" + n)
			}
		case 2: // a chain rewritten, or re-rendered as a new object
			n := endpoints[rng.IntN(len(endpoints))]
			verdict := []Verdict{accept, drop}[rng.IntN(2)]
			m.SetChain(regular("filter-fw-"+n, rule(n, verdict)))
		case 3: // set elements come and go, and come back
			k := fmt.Sprintf("10.0.%d.%d", rng.IntN(2), rng.IntN(4))
			if _, ok := m.Set("allowed").Elements[k]; ok {
				m.DeleteElement("allowed", k)
			} else {
				m.SetElement("allowed", Element{Key: k})
			}
		case 4: // a map element changes its verdict
			n := endpoints[rng.IntN(len(endpoints))]
			kind := []VerdictKind{Goto, Jump}[rng.IntN(2)]
			m.SetElement("filter-from-wl", Element{Key: n, Verdict: &Verdict{Kind: kind, Chain: "filter-fw-" + n}})
		case 5: // a set's definition changes (with a chain using it)
			s := *m.Set("allowed")
			s.Comment = fmt.Sprintf("step %d", step)
			s.Elements = nil
			m.SetSet(&s)
		case 6: // nothing, or two changes that cancel out
			k := "10.9.9.9"
			m.SetElement("allowed", Element{Key: k})
			m.DeleteElement("allowed", k)
		}
		if rng.IntN(3) == 0 {
			commit(step)
		}
	}
	commit(301)
}
