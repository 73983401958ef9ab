package nft

import (
	"bytes"
	"slices"
)

// intervalIndex holds the elements of a one-field interval set the kernel
// holds, sorted by their first value. The kernel holds them disjoint, so
// sorted by first they are sorted by last too, and the held elements an
// added interval overlaps are one run found by binary search: checking an
// addition costs O(log n) instead of a pass over the whole set (an IP set
// of every pod's address, at 10,000 pods, for each pod that starts).
type intervalIndex struct {
	es []indexedInterval
}

type indexedInterval struct {
	first, last []byte
	key         string
}

// newIntervalIndex indexes the elements keys of the one-field interval set
// s. It returns nil when a key does not parse or two elements overlap (a
// table written by someone else): the caller then compares with every
// element, as without an index.
func newIntervalIndex(s *Set, keys func(yield func(string) bool)) *intervalIndex {
	var es []indexedInterval
	for k := range keys {
		f, err := parseKey(s, k)
		if err != nil {
			return nil
		}
		es = append(es, indexedInterval{first: f[0].first, last: f[0].last, key: k})
	}
	slices.SortFunc(es, func(a, b indexedInterval) int { return bytes.Compare(a.first, b.first) })
	for i := 1; i < len(es); i++ {
		if bytes.Compare(es[i-1].last, es[i].first) >= 0 {
			return nil
		}
	}
	return &intervalIndex{es: es}
}

// overlapping calls yield with each indexed element whose interval meets
// [first, last], in order, until yield returns false.
func (x *intervalIndex) overlapping(first, last []byte, yield func(indexedInterval) bool) {
	// The first element that ends at or after first; those before it end
	// before the interval starts.
	i, _ := slices.BinarySearchFunc(x.es, first, func(e indexedInterval, v []byte) int { return bytes.Compare(e.last, v) })
	for ; i < len(x.es) && bytes.Compare(x.es[i].first, last) <= 0; i++ {
		if !yield(x.es[i]) {
			return
		}
	}
}

// insert adds the element key of s, whose parse is f. It reports false when
// the element overlaps one already indexed: the index no longer holds a
// disjoint set and must be dropped.
func (x *intervalIndex) insert(key string, f keyField) bool {
	i, found := slices.BinarySearchFunc(x.es, f.first, func(e indexedInterval, v []byte) int { return bytes.Compare(e.first, v) })
	if found {
		return x.es[i].key == key && bytes.Equal(x.es[i].last, f.last)
	}
	if i > 0 && bytes.Compare(x.es[i-1].last, f.first) >= 0 ||
		i < len(x.es) && bytes.Compare(f.last, x.es[i].first) >= 0 {
		return false
	}
	x.es = slices.Insert(x.es, i, indexedInterval{first: f.first, last: f.last, key: key})
	return true
}

// remove deletes the element key, whose parse is f, if it is indexed.
func (x *intervalIndex) remove(key string, f keyField) {
	i, found := slices.BinarySearchFunc(x.es, f.first, func(e indexedInterval, v []byte) int { return bytes.Compare(e.first, v) })
	if found && x.es[i].key == key {
		x.es = slices.Delete(x.es, i, i+1)
	}
}
