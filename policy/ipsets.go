package policy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// member is one parsed member of a Felix IP set. NET and IP members use
// only prefix (a host prefix for IP sets); IP_AND_PORT members also carry
// the protocol and port.
type member struct {
	prefix netip.Prefix
	proto  uint8
	port   uint16
}

// ipSet is a Felix IP set as the last IPSetUpdate and the deltas since say.
type ipSet struct {
	id      string
	typ     proto.IPSetUpdate_IPSetType
	members map[member]bool
}

// memberProtos are the protocols Felix writes in IP_AND_PORT members.
var memberProtos = map[string]uint8{"tcp": 6, "udp": 17, "sctp": 132}

// parseMember parses one member string of a set of type typ: a CIDR or bare
// address for NET and IP sets (an IP set takes host addresses only), and
// "<addr>,<proto>:<port>" for IP_AND_PORT sets ("10.0.0.1,tcp:8080").
func parseMember(typ proto.IPSetUpdate_IPSetType, s string) (member, error) {
	switch typ {
	case proto.IPSetUpdate_NET, proto.IPSetUpdate_IP:
		p, err := parsePrefix(s)
		if err != nil {
			return member{}, err
		}
		if typ == proto.IPSetUpdate_IP && !p.IsSingleIP() {
			// An IP set is a plain set of addresses (Felix's hash:ip);
			// a prefix has no element form in it.
			return member{}, fmt.Errorf("%q is a network, not an address", s)
		}
		return member{prefix: p}, nil
	case proto.IPSetUpdate_IP_AND_PORT:
		addr, pp, ok := strings.Cut(s, ",")
		if !ok {
			return member{}, fmt.Errorf("%q is not <address>,<protocol>:<port>", s)
		}
		p, err := parsePrefix(addr)
		if err != nil {
			return member{}, err
		}
		if !p.IsSingleIP() {
			return member{}, fmt.Errorf("%q: %q is a network, not an address", s, addr)
		}
		protoName, portStr, ok := strings.Cut(pp, ":")
		if !ok {
			return member{}, fmt.Errorf("%q is not <address>,<protocol>:<port>", s)
		}
		pr, ok := memberProtos[strings.ToLower(protoName)]
		if !ok {
			return member{}, fmt.Errorf("%q: protocol %q is not tcp, udp or sctp", s, protoName)
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return member{}, fmt.Errorf("%q: bad port %q", s, portStr)
		}
		return member{prefix: p, proto: pr, port: uint16(port)}, nil
	}
	return member{}, fmt.Errorf("unknown IP set type %v", typ)
}

// parsePrefix parses a CIDR or a bare address (a host prefix). IPv4-mapped
// IPv6 addresses become IPv4, and host bits are masked off: the kernel keeps
// interval sets by their masked bounds, and Felix's "10.0.0.1/24" means the
// /24.
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		a := p.Addr()
		bits := p.Bits()
		if a.Is4In6() {
			if bits < 96 {
				return netip.Prefix{}, fmt.Errorf("%q: an IPv4-mapped prefix shorter than /96", s)
			}
			a, bits = a.Unmap(), bits-96
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q has a zone", s)
		}
		return netip.PrefixFrom(a, bits).Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR or IP address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
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
		Comment: comment("Felix IP set " + id),
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
			if familyOf(m.prefix) != family {
				continue
			}
			key := m.prefix.Addr().String()
			if s.typ == proto.IPSetUpdate_IP_AND_PORT {
				key += " . " + protoKey(m.proto) + " . " + strconv.Itoa(int(m.port))
			}
			out[key] = true
		}
		return out
	}
	var ps []netip.Prefix
	for m := range s.members {
		if familyOf(m.prefix) == family {
			ps = append(ps, m.prefix)
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

// protoKey writes a member protocol as nft prints an inet_proto value.
func protoKey(p uint8) string {
	for name, v := range memberProtos {
		if v == p {
			return name
		}
	}
	return strconv.Itoa(int(p))
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
