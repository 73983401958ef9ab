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
			key := m.Prefix.Addr().String()
			if s.typ == proto.IPSetUpdate_IP_AND_PORT {
				key += " . " + felix.ProtoName(m.Protocol) + " . " + strconv.Itoa(int(m.Port))
			}
			out[key] = true
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
func writeSet(model *nft.Model, s *ipSet, families []nft.IPFamily) {
	for _, f := range families {
		def := setDef(s.id, s.typ, f)
		want := s.elements(f)
		have := model.Set(def.Name)
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

func sameSetDef(a, b *nft.Set) bool {
	return slices.Equal(a.Key, b.Key) && a.Data == b.Data && a.Interval == b.Interval && a.Comment == b.Comment
}

// deleteSet removes the sets of the Felix set id from the model.
func deleteSet(model *nft.Model, id string, families []nft.IPFamily) {
	for _, f := range families {
		model.DeleteSet(IPSetName(id, f))
	}
}
