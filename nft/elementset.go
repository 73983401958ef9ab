package nft

import (
	"iter"
	"slices"
)

// elementSet is the elements a set holds in the kernel, by key.
//
// A set taken from a record (Trust) keeps the record's elements as they
// were read, in a slice, and only what changes since in a map: a one-shot
// apply that adds one workload to a node of 10,000 looks up a few keys of
// each large set, and making maps of all their elements (megabytes of
// fresh memory) cost it more than the rest of its planning. A key is
// looked for in the slice by a scan; after a few scans, an index of the
// slice is made, so that many lookups stay cheap. A set filled any other
// way (a commit, a read back) is a map alone.
//
// Unlike a map's, its lookups write (the count of scans, the index): an
// elementSet is used by one goroutine at a time, as the Table's state is.
// The recorded elements hold each key once (a record is written from a
// map).
type elementSet struct {
	// recorded are the elements the set was made of (fromRecord); gone
	// are their keys deleted or replaced since.
	recorded []Element
	gone     map[string]struct{}
	// index is recorded by key, once enough lookups needed it.
	index map[string]int
	scans int
	// added are the elements put since (all of them, for a set made
	// otherwise).
	added map[string]Element
	n     int
}

// indexAfterScans is how many scans of the recorded elements are made
// before they are indexed.
const indexAfterScans = 16

// elementsOf is the set of the elements m (which it keeps).
func elementsOf(m map[string]Element) elementSet {
	return elementSet{added: m, n: len(m)}
}

// recordedElements is the set of the elements es, as recorded (no key
// twice; es is kept, not copied).
func recordedElements(es []Element) elementSet {
	return elementSet{recorded: es, n: len(es)}
}

// len is the number of elements.
func (s *elementSet) len() int { return s.n }

// get returns the element of key k.
func (s *elementSet) get(k string) (Element, bool) {
	if e, ok := s.added[k]; ok {
		return e, true
	}
	if i := s.recordedIndex(k); i >= 0 {
		return s.recorded[i], true
	}
	return Element{}, false
}

// recordedIndex is the index of the recorded element of key k, -1 when
// there is none (or it is gone).
func (s *elementSet) recordedIndex(k string) int {
	if len(s.recorded) == 0 {
		return -1
	}
	if _, gone := s.gone[k]; gone {
		return -1
	}
	if s.index == nil && s.scans < indexAfterScans {
		s.scans++
		return slices.IndexFunc(s.recorded, func(e Element) bool { return e.Key == k })
	}
	if s.index == nil {
		s.index = make(map[string]int, len(s.recorded))
		for i := range s.recorded {
			s.index[s.recorded[i].Key] = i
		}
	}
	if i, ok := s.index[k]; ok {
		return i
	}
	return -1
}

// put adds e, or replaces the element of its key.
func (s *elementSet) put(e Element) {
	if _, ok := s.added[e.Key]; !ok {
		if s.recordedIndex(e.Key) >= 0 {
			s.forgetRecorded(e.Key)
		} else {
			s.n++
		}
	}
	if s.added == nil {
		s.added = map[string]Element{}
	}
	s.added[e.Key] = e
}

// del deletes the element of key k, if there is one.
func (s *elementSet) del(k string) {
	if _, ok := s.added[k]; ok {
		delete(s.added, k)
		s.n--
		return
	}
	if s.recordedIndex(k) >= 0 {
		s.forgetRecorded(k)
		s.n--
	}
}

func (s *elementSet) forgetRecorded(k string) {
	if s.gone == nil {
		s.gone = map[string]struct{}{}
	}
	s.gone[k] = struct{}{}
}

// all yields every element with its key, in no order.
func (s *elementSet) all() iter.Seq2[string, Element] {
	return func(yield func(string, Element) bool) {
		for _, e := range s.recorded {
			if _, gone := s.gone[e.Key]; gone {
				continue
			}
			if !yield(e.Key, e) {
				return
			}
		}
		for k, e := range s.added {
			if !yield(k, e) {
				return
			}
		}
	}
}

// sortedKeys returns the keys, sorted.
func (s *elementSet) sortedKeys() []string {
	keys := make([]string, 0, s.n)
	for k := range s.all() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
