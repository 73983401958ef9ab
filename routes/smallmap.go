package routes

import "iter"

// smallMaxEntries is the size up to which a smallMap is a slice.
const smallMaxEntries = 8

// smallMap is a map for the per-interface views of the kernel (routes and
// neighbours by interface index): a workload interface has one route or
// two and one neighbour, and a Go map of one entry takes a whole group of
// eight slots (about 400 bytes for a route key), 8 MB at 10,000 workloads
// for the two views. It is a slice searched in order, and becomes a map
// beyond smallMaxEntries entries (a tunnel device holds a route per remote
// block). The zero value and a nil *smallMap are empty; reads of a nil
// one are allowed.
type smallMap[K comparable, V any] struct {
	few  []smallEntry[K, V]
	many map[K]V
}

type smallEntry[K comparable, V any] struct {
	key K
	val V
}

func (m *smallMap[K, V]) get(k K) (V, bool) {
	if m != nil {
		if m.many != nil {
			v, ok := m.many[k]
			return v, ok
		}
		for i := range m.few {
			if m.few[i].key == k {
				return m.few[i].val, true
			}
		}
	}
	var zero V
	return zero, false
}

func (m *smallMap[K, V]) put(k K, v V) {
	if m.many != nil {
		m.many[k] = v
		return
	}
	for i := range m.few {
		if m.few[i].key == k {
			m.few[i].val = v
			return
		}
	}
	if len(m.few) < smallMaxEntries {
		m.few = append(m.few, smallEntry[K, V]{k, v})
		return
	}
	m.many = make(map[K]V, 2*smallMaxEntries)
	for _, e := range m.few {
		m.many[e.key] = e.val
	}
	m.many[k] = v
	m.few = nil
}

func (m *smallMap[K, V]) del(k K) {
	if m == nil {
		return
	}
	if m.many != nil {
		delete(m.many, k)
		return
	}
	for i := range m.few {
		if m.few[i].key == k {
			m.few = append(m.few[:i], m.few[i+1:]...)
			return
		}
	}
}

func (m *smallMap[K, V]) len() int {
	if m == nil {
		return 0
	}
	if m.many != nil {
		return len(m.many)
	}
	return len(m.few)
}

// all yields the entries, in no particular order. The map must not be
// changed while it is iterated.
func (m *smallMap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		if m == nil {
			return
		}
		if m.many != nil {
			for k, v := range m.many {
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for _, e := range m.few {
			if !yield(e.key, e.val) {
				return
			}
		}
	}
}

// keys yields the keys (see all).
func (m *smallMap[K, V]) keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m.all() {
			if !yield(k) {
				return
			}
		}
	}
}
