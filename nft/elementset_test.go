package nft

import (
	"fmt"
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestElementSet: a set taken from a record answers like a map of its
// elements through puts, replacements and deletions, before and after
// its recorded elements are indexed.
func TestElementSet(t *testing.T) {
	var rec []Element
	want := map[string]Element{}
	for i := range 40 {
		e := Element{Key: fmt.Sprintf("cali%02d", i), Comment: "recorded"}
		rec = append(rec, e)
		want[e.Key] = e
	}
	s := recordedElements(rec)
	check := func(step string) {
		t.Helper()
		assert.Equal(t, len(want), s.len(), "%s: len", step)
		assert.Equal(t, want, maps.Collect(s.all()), "%s: all", step)
		for k, e := range want {
			got, ok := s.get(k)
			assert.True(t, ok && got == e, "%s: get(%q) = %v, %v", step, k, got, ok)
		}
		_, ok := s.get("nope")
		assert.False(t, ok, "%s: get of a key never there", step)
	}
	check("recorded")
	assert.NotNil(t, s.index, "many lookups index the recorded elements")

	s = recordedElements(rec)
	put := func(e Element) { s.put(e); want[e.Key] = e }
	del := func(k string) { s.del(k); delete(want, k) }
	put(Element{Key: "cali99", Comment: "new"})
	put(Element{Key: "cali03", Comment: "replaced"})
	del("cali05")
	del("cali03")                                // replaced, then deleted
	put(Element{Key: "cali05", Comment: "back"}) // deleted, then back
	del("cali99")
	del("nope")
	assert.Nil(t, s.index, "a few changes scan, they do not index")
	check("changed")
	assert.Equal(t, len(want), len(s.sortedKeys()))

	m := elementsOf(map[string]Element{"a": {Key: "a"}})
	m.put(Element{Key: "b"})
	m.del("a")
	assert.Equal(t, map[string]Element{"b": {Key: "b"}}, maps.Collect(m.all()))
	assert.Equal(t, 1, m.len())
}
