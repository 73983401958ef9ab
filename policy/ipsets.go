package policy

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// ipSet is a Felix IP set as the last IPSetUpdate and the deltas since say.
type ipSet struct {
	id      string
	typ     proto.IPSetUpdate_IPSetType
	members map[felix.Member]bool
	// changed are the members deltas added or removed since the set was
	// last written, for writeSet to change only their elements; whole
	// says to write all of them (an IPSetUpdate, or too many deltas).
	changed []felix.Member
	whole   bool
}

// maxChanged is how many changed members writeSet takes one by one; more
// and it compares the whole set, which then costs less.
const maxChanged = 256

// noteChanged records that a delta added or removed mem.
func (s *ipSet) noteChanged(mem felix.Member) {
	if s.whole {
		return
	}
	if len(s.changed) >= maxChanged {
		s.whole, s.changed = true, nil
		return
	}
	s.changed = append(s.changed, mem)
}

// familyOf returns the family of a prefix.
func familyOf(p netip.Prefix) nft.IPFamily {
	if p.Addr().Is4() {
		return nft.IPv4
	}
	return nft.IPv6
}

// setDef returns the definition (no elements) of the family's nft set for
// a Felix set of type typ:
//
//   - NET: an interval set of addresses, so members may be prefixes;
//   - IP: a plain set of addresses;
//   - IP_AND_PORT: a plain set of `addr . inet_proto . inet_service`, looked
//     up with `ip daddr . meta l4proto . th dport`.
func setDef(id string, typ proto.IPSetUpdate_IPSetType, family nft.IPFamily) *nft.Set {
	addr := nft.TypeIPv4Addr
	if family == nft.IPv6 {
		addr = nft.TypeIPv6Addr
	}
	s := &nft.Set{
		Name:    IPSetName(id, family),
		Key:     []nft.KeyType{addr},
		Comment: nft.SanitizeComment("Felix IP set " + id),
	}
	switch typ {
	case proto.IPSetUpdate_NET:
		s.Interval = true
	case proto.IPSetUpdate_IP_AND_PORT:
		s.Key = append(s.Key, nft.TypeInetProto, nft.TypeInetService)
	}
	return s
}

// elements returns the element keys of the family's nft set, in nft's
// canonical syntax.
//
// Overlapping intervals make the kernel refuse the whole transaction (Calico's
// own nftables mode then panicked and crash-looped: projectcalico/calico
// issue 12851), so a NET
// set's prefixes are reduced to those no other member contains: two
// prefixes overlap only when one contains the other, so what is left is
// disjoint, and it matches exactly the same addresses. A /32 inside a /28
// collapses into the /28, and comes back if the /28 is removed.
func (s *ipSet) elements(family nft.IPFamily) map[string]bool {
	out := map[string]bool{}
	if s.typ != proto.IPSetUpdate_NET {
		for m := range s.members {
			if familyOf(m.Prefix) != family {
				continue
			}
			out[s.elementKey(m)] = true
		}
		return out
	}
	var ps []netip.Prefix
	for m := range s.members {
		if familyOf(m.Prefix) == family {
			ps = append(ps, m.Prefix)
		}
	}
	for _, p := range nft.DisjointPrefixes(ps) {
		out[prefixKey(p)] = true
	}
	return out
}

// prefixKey writes a prefix as nft prints it: a host prefix as the bare
// address.
func prefixKey(p netip.Prefix) string {
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// writeSet makes the model's sets of s, one per family (v4, and v6 unless
// IPv6 is off), hold exactly s's elements. A set that is missing or has
// another definition is written whole; otherwise only the elements that
// changed are added and deleted, so a delta of one member is one element
// operation.
//
// A delta of host members (a pod's address, the common case: a member of
// a set that selects pods comes and goes with its pod) costs what it
// changed, not the size of the set: each changed member's element is
// added or deleted by itself (writeChanged). Other deltas compare the
// whole set.
func writeSet(model *nft.Model, s *ipSet, families []nft.IPFamily) {
	defer func() { s.changed, s.whole = nil, false }()
	for _, f := range families {
		def := setDef(s.id, s.typ, f)
		have := model.Set(def.Name)
		if !s.whole && have != nil && sameSetDef(have, def) && s.writeChanged(model, def.Name, f) {
			continue
		}
		want := s.elements(f)
		if have == nil || !sameSetDef(have, def) {
			def.Elements = make(map[string]nft.Element, len(want))
			for k := range want {
				def.Elements[k] = nft.Element{Key: k}
			}
			model.SetSet(def)
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(have.Elements)) {
			if !want[k] {
				model.DeleteElement(def.Name, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if _, ok := have.Elements[k]; !ok {
				model.SetElement(def.Name, nft.Element{Key: k})
			}
		}
	}
}

// writeChanged writes into the model's set name, of family f, the
// elements of the members changed since the last write: each is an element
// exactly when it is a member that no other member contains. It reports
// false, having written nothing, when a changed member is not a host (a
// prefix may contain members, or uncover them when it goes: the whole set
// is compared then).
func (s *ipSet) writeChanged(model *nft.Model, name string, f nft.IPFamily) bool {
	for _, mem := range s.changed {
		if s.typ == proto.IPSetUpdate_NET && !mem.Prefix.IsSingleIP() {
			return false
		}
	}
	set := model.Set(name)
	for _, mem := range s.changed {
		if familyOf(mem.Prefix) != f {
			continue
		}
		key := s.elementKey(mem)
		want := s.members[mem] && !s.covered(mem)
		if _, have := set.Elements[key]; want && !have {
			model.SetElement(name, nft.Element{Key: key})
		} else if !want && have {
			model.DeleteElement(name, key)
		}
	}
	return true
}

// elementKey is the element of one member.
func (s *ipSet) elementKey(m felix.Member) string {
	switch s.typ {
	case proto.IPSetUpdate_NET:
		return prefixKey(m.Prefix)
	case proto.IPSetUpdate_IP_AND_PORT:
		return m.Prefix.Addr().String() + " . " + felix.ProtoName(m.Protocol) + " . " + strconv.Itoa(int(m.Port))
	}
	return m.Prefix.Addr().String()
}

// covered says whether another member of a NET set contains the host
// member m: then m's addresses are in that member's element already.
func (s *ipSet) covered(m felix.Member) bool {
	if s.typ != proto.IPSetUpdate_NET {
		return false
	}
	for bits := m.Prefix.Bits() - 1; bits >= 0; bits-- {
		p, _ := m.Prefix.Addr().Prefix(bits)
		if s.members[felix.Member{Prefix: p}] {
			return true
		}
	}
	return false
}

func sameSetDef(a, b *nft.Set) bool {
	return slices.Equal(a.Key, b.Key) && a.Data == b.Data && a.Interval == b.Interval && a.Comment == b.Comment
}

// deleteSet removes the sets of the Felix set id from the model.
func deleteSet(model *nft.Model, id string, families []nft.IPFamily) {
	for _, f := range families {
		model.DeleteSet(IPSetName(id, f))
	}
}
