package felix

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/nftep/nftep/proto"
)

// FieldError is a problem with one field of a Felix message. Field is the
// field's protojson path within the message ("ipv4Nets[1]",
// "ipv4Nat[0].extIp").
type FieldError struct {
	Field string
	Err   error
}

// Error returns "<field>: <problem>".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the problem.
func (e *FieldError) Unwrap() error { return e.Err }

// Workload is a workload endpoint's strings, parsed and checked.
type Workload struct {
	// Name is the host-side interface.
	Name string
	// Nets are ipv4Nets (index IPv4) and ipv6Nets (IPv6) in order, with
	// their host bits: 10.0.240.2/24 stays 10.0.240.2/24 (the ARP rules
	// need the address, the routes mask it).
	Nets [2][]netip.Prefix
	// NAT are the external IPs of ipv4Nat and ipv6Nat.
	NAT [2][]netip.Addr
	// MAC is the endpoint's MAC, nil if none was given.
	MAC net.HardwareAddr
	// AllowSpoofed are allowSpoofedSourcePrefixes, masked, both families.
	AllowSpoofed []netip.Prefix
}

// ParseWorkload checks everything the dataplane relies on in ep, so that a
// bad endpoint is refused as a whole, with a reason, before anything is
// written (Felix panicked on an unparsable net). Without ipv6, ipv6Nets
// and ipv6Nat are not read at all, as Felix's IPv4-only endpoint manager
// never reads them (felix/dataplane/linux/endpoint_mgr.go).
//
// The error joins one *FieldError per problem, in field order. The
// Workload is never nil: on error it holds what did parse, for callers
// that render what they can.
func ParseWorkload(ep *proto.WorkloadEndpoint, ipv6 bool) (*Workload, error) {
	var errs []error
	fail := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	w := &Workload{Name: ep.GetName()}
	if err := CheckIfaceName(w.Name); err != nil {
		fail("name", err)
	}
	for _, f := range Families {
		if f == IPv6 && !ipv6 {
			continue
		}
		nets := ep.GetIpv4Nets()
		if f == IPv6 {
			nets = ep.GetIpv6Nets()
		}
		for j, s := range nets {
			p, err := ParseCIDRIn(f, s)
			if err != nil {
				fail(fmt.Sprintf("ipv%dNets[%d]", f.Version(), j), err)
				continue
			}
			w.Nets[f] = append(w.Nets[f], p)
		}
	}
	for _, f := range Families {
		if f == IPv6 && !ipv6 {
			continue
		}
		nats := ep.GetIpv4Nat()
		if f == IPv6 {
			nats = ep.GetIpv6Nat()
		}
		for j, n := range nats {
			a, err := ParseAddrIn(f, n.GetExtIp())
			if err != nil {
				fail(fmt.Sprintf("ipv%dNat[%d].extIp", f.Version(), j), err)
				continue
			}
			w.NAT[f] = append(w.NAT[f], a)
		}
	}
	if s := ep.GetMac(); s != "" {
		// Felix logged a bad MAC and programmed routes without static
		// ARP; a MAC we cannot parse means the rest of the update cannot
		// be trusted either.
		mac, err := ParseMAC(s)
		if err != nil {
			fail("mac", err)
		}
		w.MAC = mac
	}
	for j, s := range ep.GetAllowSpoofedSourcePrefixes() {
		p, err := ParseNet(s)
		if err != nil {
			fail(fmt.Sprintf("allowSpoofedSourcePrefixes[%d]", j), err)
			continue
		}
		w.AllowSpoofed = append(w.AllowSpoofed, p)
	}
	return w, errors.Join(errs...)
}

// HostEndpoint is a host endpoint's strings, parsed and checked.
type HostEndpoint struct {
	// Name is the interface, "*" for every interface, or "" when the
	// endpoint is matched by its expected addresses.
	Name string
	// Expected are expectedIpv4Addrs (index IPv4) and expectedIpv6Addrs.
	Expected [2][]netip.Addr
}

// ParseHostEndpoint checks a host endpoint's name (at most 15 bytes; it is
// matched against the kernel's interfaces, so any name the kernel could
// have is fine) and expected addresses.
// As ParseWorkload, it joins one *FieldError per problem and returns what
// did parse.
func ParseHostEndpoint(ep *proto.HostEndpoint) (*HostEndpoint, error) {
	var errs []error
	fail := func(field string, err error) { errs = append(errs, &FieldError{Field: field, Err: err}) }
	h := &HostEndpoint{Name: ep.GetName()}
	if len(h.Name) > MaxIfaceNameLen {
		fail("name", fmt.Errorf("interface name %q is longer than %d bytes", h.Name, MaxIfaceNameLen))
	}
	for _, f := range Families {
		addrs := ep.GetExpectedIpv4Addrs()
		if f == IPv6 {
			addrs = ep.GetExpectedIpv6Addrs()
		}
		for j, s := range addrs {
			a, err := ParseAddrIn(f, s)
			if err != nil {
				fail(fmt.Sprintf("expectedIpv%dAddrs[%d]", f.Version(), j), err)
				continue
			}
			h.Expected[f] = append(h.Expected[f], a)
		}
	}
	return h, errors.Join(errs...)
}
