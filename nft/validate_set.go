package nft

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Validation of sets, maps and their elements.

// validateSet checks the definition of s and all its elements; m (which may
// be nil) resolves the chains of verdict-map elements.
func validateSet(m *Model, s *Set) error {
	wrap := func(err error) error { return fmt.Errorf("set %q: %w", s.Name, err) }
	if err := validateSetDef(s); err != nil {
		return wrap(err)
	}
	for k, e := range s.Elements {
		if k != e.Key {
			return wrap(invalidf("element %q is stored under key %q", e.Key, k))
		}
		if err := validateElement(m, s, e); err != nil {
			return err
		}
	}
	if s.Interval {
		if err := checkOverlaps(s); err != nil {
			return wrap(err)
		}
	}
	return nil
}

func validateSetDef(s *Set) error {
	if err := checkName(s.Name); err != nil {
		return err
	}
	if len(s.Key) == 0 {
		return invalidf("no key type")
	}
	if len(s.Key) > maxConcatFields {
		return invalidf("key of %d fields, more than %d", len(s.Key), maxConcatFields)
	}
	size := 0
	for _, t := range s.Key {
		info, ok := keyTypes[t]
		if !ok {
			return invalidf("unknown key type %q", t)
		}
		size += pad4(info.size)
	}
	if size > maxConcatBytes {
		return invalidf("key type %s is %d bytes, more than %d", keyTypeString(s.Key), size, maxConcatBytes)
	}
	if s.Interval && len(s.Key) == 1 && !keyTypes[s.Key[0]].ranges {
		return invalidf("flags interval on a set of %s", s.Key[0])
	}
	switch s.Data {
	case DataNone, DataVerdict, DataMark:
	default:
		return invalidf("unknown data type %q", s.Data)
	}
	return checkText("comment", s.Comment, maxCommentLen)
}

// validateElement checks one element of s: its key must be canonical (as
// nft prints it, so that a read-back compares equal), fit the set's type and
// flags, and carry the value the set's data type needs. m (which may be nil)
// resolves jump and goto targets.
func validateElement(m *Model, s *Set, e Element) error {
	wrap := func(err error) error { return fmt.Errorf("set %q: element %q: %w", s.Name, e.Key, err) }
	fields, err := parseKey(s, e.Key)
	if err != nil {
		return wrap(asInvalid(err))
	}
	canon, err := canonicalKey(s, fields)
	if err != nil {
		return wrap(asInvalid(err))
	}
	if canon != e.Key {
		return wrap(invalidf("key is not canonical: nft prints it as %q", canon))
	}
	if !s.Interval {
		for i, f := range fields {
			if !f.single() {
				return wrap(invalidf("field %d is a range, prefix or wildcard, but the set has no interval flag", i+1))
			}
		}
	}
	if err := checkText("comment", e.Comment, maxCommentLen); err != nil {
		return wrap(err)
	}
	switch s.Data {
	case DataVerdict:
		if e.Verdict == nil {
			return wrap(invalidf("verdict map element without a verdict"))
		}
		if e.Mark != 0 {
			return wrap(invalidf("verdict map element with a mark"))
		}
		if err := checkVerdict(m, *e.Verdict); err != nil {
			return wrap(err)
		}
	case DataMark:
		if e.Verdict != nil {
			return wrap(invalidf("mark map element with a verdict"))
		}
	default:
		if e.Verdict != nil || e.Mark != 0 {
			return wrap(invalidf("set element with a value"))
		}
	}
	return nil
}

// checkOverlaps rejects two elements of interval set s that share a key:
// overlapping intervals in a one-field set, and in a concatenated set two
// elements whose every field overlaps ("a" . 10.0.0.0/8 and "a" .
// 10.1.0.0/16). The kernel refuses an element whose start or end falls in
// another (EEXIST); we also refuse one that contains another, which the
// kernel takes or not depending on the order of insertion.
func checkOverlaps(s *Set) error {
	es := make([]parsedElement, 0, len(s.Elements))
	for _, e := range s.Elements {
		fields, err := parseKey(s, e.Key)
		if err != nil {
			return invalidf("element %q: %v", e.Key, err)
		}
		es = append(es, parsedElement{Element: e, fields: fields})
	}
	return findOverlap(es, nil)
}

// checkAddedOverlaps checks adds, elements about to be added to interval
// set s, against each other and against the set's other elements (s holds
// the desired elements, adds included); held gives the elements the kernel
// holds (the caller caches their parse, or indexes them). Two elements that
// are both already there are not compared: the kernel holds them together.
func checkAddedOverlaps(s *Set, adds []Element, held heldElements) error {
	if len(adds) == 0 {
		return nil
	}
	added := make(map[string]bool, len(adds))
	pa := make([]parsedElement, 0, len(adds))
	for _, e := range adds {
		f, err := parseKey(s, e.Key)
		if err != nil {
			return invalidf("element %q: %v", e.Key, err)
		}
		added[e.Key] = true
		pa = append(pa, parsedElement{Element: e, fields: f})
	}
	if err := findOverlap(slices.Clone(pa), nil); err != nil {
		return err
	}
	// found collects each addition and each other element of an
	// overlapping pair once; findOverlap then names the first pair in key
	// order, whatever the order they were found in.
	var found []parsedElement
	inFound := map[string]bool{}
	keep := func(e parsedElement) {
		if !inFound[e.Key] {
			inFound[e.Key] = true
			found = append(found, e)
		}
	}
	if x := held.index(); x != nil {
		// The held elements an addition meets are a run of the index.
		// One that this transaction deletes (or deletes and adds again)
		// is no obstacle; any other stays in the kernel, desired or not
		// (a model that holds only part of a trusted table).
		for _, a := range pa {
			x.overlapping(a.fields[0].first, a.fields[0].last, func(h indexedInterval) bool {
				if added[h.key] || held.deleted(h.key) {
					return true
				}
				e, ok := s.Elements[h.key]
				if !ok {
					e = Element{Key: h.key}
				}
				keep(a)
				keep(parsedElement{Element: e, fields: []keyField{{first: h.first, last: h.last}}})
				return true
			})
		}
		if len(found) > 0 {
			return findOverlap(found, added)
		}
		return nil
	}
	if len(s.Elements) <= len(added) {
		return nil // nothing but the additions to compare with
	}
	if len(pa) <= 8 {
		// Each addition against every other element: no sort.
		for k, e := range s.Elements {
			if added[k] {
				continue
			}
			f, err := held.fields(k)
			if err != nil {
				return invalidf("element %q: %v", k, err)
			}
			for _, a := range pa {
				if boxesOverlap(a.fields, f) {
					keep(a)
					keep(parsedElement{Element: e, fields: f})
				}
			}
		}
		if len(found) > 0 {
			return findOverlap(found, added)
		}
		return nil
	}
	all := pa
	for k, e := range s.Elements {
		if added[k] {
			continue
		}
		f, err := held.fields(k)
		if err != nil {
			return invalidf("element %q: %v", k, err)
		}
		all = append(all, parsedElement{Element: e, fields: f})
	}
	return findOverlap(all, added)
}

// heldElements are the elements of an interval set the kernel holds, as
// checkAddedOverlaps needs them.
type heldElements interface {
	// fields returns the parsed key of the held element key.
	fields(key string) ([]keyField, error)
	// index returns the held elements sorted by their interval, or nil
	// (a set of several fields, or one the index refused).
	index() *intervalIndex
	// deleted reports whether the transaction deletes the held element
	// key.
	deleted(key string) bool
}

// findOverlap sorts es by their first field and sweeps them, comparing each
// element with the earlier ones whose first field reaches it. With only set,
// a pair is compared only if at least one of its keys is in it. It returns
// an error naming the first overlapping pair found, in sweep order.
func findOverlap(es []parsedElement, only map[string]bool) error {
	slices.SortFunc(es, func(a, b parsedElement) int {
		for i := range a.fields {
			if c := bytes.Compare(a.fields[i].first, b.fields[i].first); c != 0 {
				return c
			}
		}
		return strings.Compare(a.Key, b.Key)
	})
	var active []*parsedElement
	for i := range es {
		cur := &es[i]
		kept := active[:0]
		for _, a := range active {
			if bytes.Compare(a.fields[0].last, cur.fields[0].first) >= 0 {
				kept = append(kept, a)
			}
		}
		active = kept
		for _, a := range active {
			if only != nil && !only[a.Key] && !only[cur.Key] {
				continue
			}
			if boxesOverlap(a.fields, cur.fields) {
				return invalidf("elements %q and %q overlap", a.Key, cur.Key)
			}
		}
		active = append(active, cur)
	}
	return nil
}

// boxesOverlap reports whether two keys share a value: every field's
// intervals intersect.
func boxesOverlap(a, b []keyField) bool {
	for i := range a {
		if bytes.Compare(a[i].first, b[i].last) > 0 || bytes.Compare(b[i].first, a[i].last) > 0 {
			return false
		}
	}
	return true
}
