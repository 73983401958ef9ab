package render

import (
	"errors"
	"fmt"
	"math/bits"
)

// NonCaliEndpointName is the pseudo endpoint that owns Marks.NonCali, so no
// real endpoint is ever given it.
const NonCaliEndpointName = "/cali/Pseudo/NonCali/Endpoint/"

// MarkMapper allocates endpoint marks inside the endpoint-mark field, as
// Felix does (felix/rules/epmark.go): a name hashes with 32-bit FNV-1 to a
// position in [0, 2^n) (n = bits in the field), probing linearly past
// position 0 and taken positions; a position becomes a mark by depositing its
// bits, least significant first, into the mask's set bits. It is the one
// stateful type in render: marks must stay stable for the life of an
// endpoint. Not safe for concurrent use.
type MarkMapper struct {
	mask   uint32
	size   uint64 // 2^n positions
	byName map[string]uint32
	byMark map[uint32]string
}

// NewMarkMapper returns a mapper over mask with nonCali reserved for
// NonCaliEndpointName.
func NewMarkMapper(mask, nonCali uint32) *MarkMapper {
	m := &MarkMapper{
		mask:   mask,
		size:   uint64(1) << bits.OnesCount32(mask),
		byName: map[string]uint32{},
		byMark: map[uint32]string{},
	}
	if nonCali != 0 {
		m.byName[NonCaliEndpointName] = nonCali
		m.byMark[nonCali] = NonCaliEndpointName
	}
	return m
}

// EndpointMark returns name's mark, allocating one on first use. It fails for
// an empty name and when every position is taken.
func (m *MarkMapper) EndpointMark(name string) (uint32, error) {
	if name == "" {
		return 0, errors.New("endpoint mark: empty endpoint name")
	}
	if mark, ok := m.byName[name]; ok {
		return mark, nil
	}
	start := uint64(fnv1(name)) % m.size
	for i := uint64(0); i < m.size; i++ {
		pos := (start + i) % m.size
		if pos == 0 {
			continue // mark 0 means "no endpoint mark"
		}
		mark := deposit(uint32(pos), m.mask)
		if _, taken := m.byMark[mark]; taken {
			continue
		}
		m.byName[name] = mark
		m.byMark[mark] = name
		return mark, nil
	}
	return 0, fmt.Errorf("endpoint mark for %q: all %d marks in mask %#x are taken", name, m.size-1, m.mask)
}

// ReleaseEndpointMark frees name's mark, if it has one.
func (m *MarkMapper) ReleaseEndpointMark(name string) {
	if mark, ok := m.byName[name]; ok {
		delete(m.byName, name)
		delete(m.byMark, mark)
	}
}

// SetEndpointMark pins name to mark. It fails if name already has another
// mark, if mark belongs to another name, or if mark is outside the mask.
func (m *MarkMapper) SetEndpointMark(name string, mark uint32) error {
	if mark&^m.mask != 0 || mark == 0 {
		return fmt.Errorf("endpoint mark %#x for %q: not a non-zero value inside mask %#x", mark, name, m.mask)
	}
	if old, ok := m.byName[name]; ok && old != mark {
		return fmt.Errorf("endpoint mark %#x for %q: it already has %#x", mark, name, old)
	}
	if owner, ok := m.byMark[mark]; ok && owner != name {
		return fmt.Errorf("endpoint mark %#x for %q: taken by %q", mark, name, owner)
	}
	m.byName[name] = mark
	m.byMark[mark] = name
	return nil
}

// fnv1 is 32-bit FNV-1 (multiply, then xor; not FNV-1a), as Felix uses.
func fnv1(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h *= 16777619
		h ^= uint32(s[i])
	}
	return h
}

// deposit spreads v's low bits, least significant first, over mask's set
// bits (a software pdep).
func deposit(v, mask uint32) uint32 {
	var out uint32
	for m := mask; m != 0; m &= m - 1 {
		low := m & -m
		if v&1 != 0 {
			out |= low
		}
		v >>= 1
	}
	return out
}
