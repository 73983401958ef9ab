package felix

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nftep/nftep/proto"
)

// IP protocol numbers of the protocols an IP_AND_PORT member may name.
const (
	ProtoTCP  uint8 = 6
	ProtoUDP  uint8 = 17
	ProtoSCTP uint8 = 132
)

// memberProtos are the protocols Felix writes in IP_AND_PORT members
// (felix/ipsets/ipset_defs.go).
var memberProtos = map[string]uint8{"tcp": ProtoTCP, "udp": ProtoUDP, "sctp": ProtoSCTP}

// ProtoName returns the name nft gives an IP_AND_PORT member's protocol
// ("tcp"), or its number for any other.
func ProtoName(p uint8) string {
	for name, v := range memberProtos {
		if v == p {
			return name
		}
	}
	return strconv.Itoa(int(p))
}

// Member is one parsed member of a Felix IP set. It is comparable, so it
// can key a map of members.
type Member struct {
	// Prefix is the member's network for a NET set (masked), its address
	// as a host prefix for IP and IP_AND_PORT sets.
	Prefix netip.Prefix
	// Protocol (ProtoTCP, ProtoUDP or ProtoSCTP) and Port are set for
	// IP_AND_PORT members only.
	Protocol uint8
	Port     uint16
}

// ParseMember parses one member of an IP set of type typ: a CIDR or bare
// address for NET, an address for IP (a host prefix such as 10.0.0.1/32
// is one; a network is not), and "<address>,<tcp|udp|sctp>:<port>" for
// IP_AND_PORT, whose address follows the IP rule ("10.0.0.1,tcp:8080",
// "fd00::1,udp:53").
func ParseMember(typ proto.IPSetUpdate_IPSetType, s string) (Member, error) {
	switch typ {
	case proto.IPSetUpdate_NET:
		p, err := ParseNet(s)
		if err != nil {
			return Member{}, err
		}
		return Member{Prefix: p}, nil
	case proto.IPSetUpdate_IP:
		p, err := parseHost(s)
		if err != nil {
			return Member{}, err
		}
		return Member{Prefix: p}, nil
	case proto.IPSetUpdate_IP_AND_PORT:
		addr, pp, ok := strings.Cut(s, ",")
		protoName, portStr, ok2 := strings.Cut(pp, ":")
		if !ok || !ok2 {
			return Member{}, fmt.Errorf("%q is not <address>,<tcp|udp|sctp>:<port>", s)
		}
		p, err := parseHost(addr)
		if err != nil {
			return Member{}, fmt.Errorf("%q: %w", s, err)
		}
		pr, ok := memberProtos[strings.ToLower(protoName)]
		if !ok {
			return Member{}, fmt.Errorf("%q: protocol %q is not tcp, udp or sctp", s, protoName)
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return Member{}, fmt.Errorf("%q: %q is not a port", s, portStr)
		}
		return Member{Prefix: p, Protocol: pr, Port: uint16(port)}, nil
	}
	return Member{}, fmt.Errorf("unknown IP set type %d", typ)
}

// parseHost parses an address, bare or as a host prefix. An IP set is a
// plain set of addresses (Felix's hash:ip); a network has no element form
// in it.
func parseHost(s string) (netip.Prefix, error) {
	p, err := ParseCIDR(s)
	if err != nil {
		return p, fmt.Errorf("%q is not an address", s)
	}
	if !p.IsSingleIP() {
		return netip.Prefix{}, fmt.Errorf("%q is a network, not an address", s)
	}
	return p, nil
}
