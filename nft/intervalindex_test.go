package nft

import (
	"fmt"
	"slices"
	"testing"
)

// TestIntervalIndex: the index finds exactly the held intervals an
// interval meets, follows inserts and removes, and refuses a set whose
// elements overlap (it could not find them by binary search).
func TestIntervalIndex(t *testing.T) {
	s := &Set{Name: "nets", Key: []KeyType{TypeIPv4Addr}, Interval: true}
	keys := func(ks ...string) func(func(string) bool) { return slices.Values(ks) }
	x := newIntervalIndex(s, keys("10.0.0.0/24", "10.0.2.0/24", "10.0.4.0-10.0.4.9", "192.168.1.1"))
	if x == nil {
		t.Fatal("no index of disjoint elements")
	}
	meets := func(key string) []string {
		t.Helper()
		f, err := parseKey(s, key)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		x.overlapping(f[0].first, f[0].last, func(e indexedInterval) bool {
			out = append(out, e.key)
			return true
		})
		return out
	}
	for _, c := range []struct {
		key  string
		want []string
	}{
		{"10.0.0.0/16", []string{"10.0.0.0/24", "10.0.2.0/24", "10.0.4.0-10.0.4.9"}},
		{"10.0.1.0/24", nil},
		{"10.0.2.255", []string{"10.0.2.0/24"}},
		{"10.0.3.0-10.0.4.0", []string{"10.0.4.0-10.0.4.9"}},
		{"10.0.0.0", []string{"10.0.0.0/24"}},
		{"192.168.1.1", []string{"192.168.1.1"}},
		{"0.0.0.0/0", []string{"10.0.0.0/24", "10.0.2.0/24", "10.0.4.0-10.0.4.9", "192.168.1.1"}},
		{"255.255.255.255", nil},
	} {
		if got := meets(c.key); !slices.Equal(got, c.want) {
			t.Errorf("%s meets %q, want %q", c.key, got, c.want)
		}
	}

	field := func(key string) keyField {
		f, err := parseKey(s, key)
		if err != nil {
			t.Fatal(err)
		}
		return f[0]
	}
	if !x.insert("10.0.1.0/24", field("10.0.1.0/24")) {
		t.Error("insert of a disjoint element refused")
	}
	if got := meets("10.0.1.7"); !slices.Equal(got, []string{"10.0.1.0/24"}) {
		t.Errorf("after the insert, 10.0.1.7 meets %q", got)
	}
	if x.insert("10.0.2.128/25", field("10.0.2.128/25")) {
		t.Error("insert of an element inside another accepted")
	}
	x.remove("10.0.2.0/24", field("10.0.2.0/24"))
	if got := meets("10.0.2.1"); got != nil {
		t.Errorf("after the remove, 10.0.2.1 meets %q", got)
	}
	if !x.insert("10.0.2.128/25", field("10.0.2.128/25")) {
		t.Error("insert into the gap the remove left refused")
	}

	if newIntervalIndex(s, keys("10.0.0.0/8", "10.1.0.0/16")) != nil {
		t.Error("an index of overlapping elements")
	}
	if newIntervalIndex(s, keys("not an address")) != nil {
		t.Error("an index of a key that does not parse")
	}
}

// TestPlanOverlapIndexFollowsCommits: the index of a one-field interval set
// is built at the first check and then kept by each commit, so an element
// committed since is found, and one deleted since is no obstacle. An
// addition that covers several held elements is named with the first of
// them, once.
func TestPlanOverlapIndexFollowsCommits(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	m.SetSet(&Set{Name: "nets", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	for i := range 100 {
		m.SetElement("nets", Element{Key: fmt.Sprintf("10.0.%d.0/24", i)})
	}
	st := programmed(t, m)
	apply := func(what string) {
		t.Helper()
		p := &planner{have: st, want: m, v: vocabularyValidator{}}
		pl, err := p.plan()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		st.commit(pl, m)
	}
	refused := func(what, want string) {
		t.Helper()
		p := &planner{have: st, want: m, v: vocabularyValidator{}}
		_, err := p.plan()
		if err == nil || err.Error() != want || !IsInvalid(err) {
			t.Errorf("%s: plan error %v, want %q", what, err, want)
		}
	}

	m.SetElement("nets", Element{Key: "10.9.0.0/16"})
	apply("add 10.9.0.0/16") // builds the index before, updates it after
	if st.sets["nets"].intervals == nil {
		t.Fatal("no index after the first addition")
	}
	m.SetElement("nets", Element{Key: "10.9.1.0/24"})
	refused("inside a committed addition", `set "nets": elements "10.9.0.0/16" and "10.9.1.0/24" overlap`)
	m.DeleteElement("nets", "10.9.1.0/24")

	m.DeleteElement("nets", "10.9.0.0/16")
	apply("delete 10.9.0.0/16")
	m.SetElement("nets", Element{Key: "10.9.1.0/24"})
	apply("add 10.9.1.0/24 where 10.9.0.0/16 was")

	m.SetElement("nets", Element{Key: "10.0.0.0/16"})
	refused("over many", `set "nets": elements "10.0.0.0/16" and "10.0.0.0/24" overlap`)
	m.DeleteElement("nets", "10.0.0.0/16")
	if x := st.sets["nets"].intervals; x == nil || len(x.es) != 101 {
		t.Errorf("index %v, want the 101 held elements", x)
	}
}

// fakeHeld is a heldElements of an index and a set of deleted keys.
type fakeHeld struct {
	x    *intervalIndex
	dels map[string]bool
}

func (f fakeHeld) fields(string) ([]keyField, error) { panic("not indexed") }
func (f fakeHeld) index() *intervalIndex             { return f.x }
func (f fakeHeld) deleted(key string) bool           { return f.dels[key] }

// TestAddedOverlapsHeldOutsideTheModel: a held element the desired set
// does not hold (a model of only part of a trusted table) still stays in
// the kernel unless the transaction deletes it, so an addition that
// overlaps it is refused; deleted, it is no obstacle.
func TestAddedOverlapsHeldOutsideTheModel(t *testing.T) {
	s := &Set{Name: "nets", Key: []KeyType{TypeIPv4Addr}, Interval: true,
		Elements: map[string]Element{"10.1.0.0/16": {Key: "10.1.0.0/16"}}}
	x := newIntervalIndex(s, slices.Values([]string{"10.0.0.0/8", "192.168.0.0/16"}))
	adds := []Element{{Key: "10.1.0.0/16"}}
	err := checkAddedOverlaps(s, adds, fakeHeld{x: x})
	if want := `elements "10.0.0.0/8" and "10.1.0.0/16" overlap`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if err := checkAddedOverlaps(s, adds, fakeHeld{x: x, dels: map[string]bool{"10.0.0.0/8": true}}); err != nil {
		t.Errorf("with 10.0.0.0/8 deleted: %v", err)
	}
}
