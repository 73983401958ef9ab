package nft

import (
	"bytes"
	"fmt"
	"sort"
)

// Lookup finds the element a kernel lookup of values in s would find: one
// value per field of the set's key, each in the syntax of an element key's
// single value (an address, a port, an interface name, a protocol, a mark).
// A prefix, range or wildcard element covers the values inside it. When
// several elements match (only possible where intervals overlap, which the
// kernel refuses), the one with the smallest key is returned.
//
// It exists for code that evaluates rules without the kernel (the packet
// tracer behind `nftep explain`); the kernel does the same comparison on
// the raw key bytes, which is what this compares.
func (s *Set) Lookup(values ...string) (Element, bool, error) {
	if len(values) != len(s.Key) {
		return Element{}, false, fmt.Errorf("set %q: lookup of %d fields in a key of type %s", s.Name, len(values), keyTypeString(s.Key))
	}
	want := make([][]byte, len(values))
	for i, v := range values {
		f, err := parseField(s.Key[i], v)
		if err != nil {
			return Element{}, false, fmt.Errorf("set %q: field %d: %w", s.Name, i+1, err)
		}
		if !f.single() {
			return Element{}, false, fmt.Errorf("set %q: field %d: %q is not a single value", s.Name, i+1, v)
		}
		want[i] = f.first
	}
	keys := make([]string, 0, len(s.Elements))
	for k := range s.Elements {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fields, err := parseKey(s, k)
		if err != nil {
			return Element{}, false, fmt.Errorf("set %q: element %q: %w", s.Name, k, err)
		}
		hit := true
		for i, f := range fields {
			if bytes.Compare(want[i], f.first) < 0 || bytes.Compare(want[i], f.last) > 0 {
				hit = false
				break
			}
		}
		if hit {
			return s.Elements[k], true, nil
		}
	}
	return Element{}, false, nil
}
