package routes

import (
	"maps"
	"testing"
)

// TestSmallMap: a smallMap answers as a Go map does through many puts,
// overwrites and deletes, across the switch from slice to map, and a nil
// one reads as empty.
func TestSmallMap(t *testing.T) {
	var nilMap *smallMap[int, string]
	if _, ok := nilMap.get(1); ok || nilMap.len() != 0 {
		t.Error("a nil smallMap is not empty")
	}
	nilMap.del(1)
	for range nilMap.all() {
		t.Error("a nil smallMap yields")
	}

	m := &smallMap[int, string]{}
	want := map[int]string{}
	check := func(step string) {
		t.Helper()
		got := maps.Collect(m.all())
		if !maps.Equal(got, want) || m.len() != len(want) {
			t.Fatalf("%s: %v (len %d), want %v", step, got, m.len(), want)
		}
		for k, v := range want {
			if g, ok := m.get(k); !ok || g != v {
				t.Fatalf("%s: get(%d) = %q, %v; want %q", step, k, g, ok, v)
			}
		}
		if _, ok := m.get(-1); ok {
			t.Fatalf("%s: get of an absent key found it", step)
		}
	}
	for i := range 5 {
		m.put(i, "a")
		want[i] = "a"
	}
	m.put(2, "b")
	want[2] = "b"
	m.del(0)
	delete(want, 0)
	check("as a slice")
	for i := 5; i < 20; i++ {
		m.put(i, "c")
		want[i] = "c"
	}
	if m.many == nil {
		t.Error("20 entries are still a slice")
	}
	m.del(7)
	delete(want, 7)
	m.put(3, "d")
	want[3] = "d"
	check("as a map")
}
