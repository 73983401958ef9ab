// Package explain answers "why was this packet dropped?" for a node that
// nftep programs: it resolves the two ends of a flow (endpoints by workload
// ID or interface, or addresses) against the table the kernel holds and the
// namespace's routes, walks the packet through the table with package
// tracer, and reports the path, the deciding rule and what would change the
// verdict.
package explain

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/tracer"
)

// Facts are what routing decides, which the rules cannot say: taken from
// netlink in the node's namespace (NetlinkFacts), or given by a test.
type Facts interface {
	// Local says whether a is an address of the host.
	Local(a netip.Addr) bool
	// Route returns the interface the host routes dst out of, and the
	// source address it would pick for a packet it sends there.
	Route(dst netip.Addr) (iface string, src netip.Addr, err error)
	// Addresses returns the addresses that live behind interface iface:
	// the host routes of a workload interface (a /32 or /128 each), or
	// the addresses of a host interface.
	Addresses(iface string) ([]netip.Addr, error)
	// Exists says whether the namespace has an interface named iface.
	Exists(iface string) bool
}

// EgressFacts is implemented by Facts that can also say how a packet
// leaves the node for an address beyond it (NetlinkFacts does).
type EgressFacts interface {
	Egress(dst netip.Addr) (*Egress, error)
}

// Egress is how a packet leaves the node for an address no endpoint of the
// node owns: a pod on another node, a host.
type Egress struct {
	// Route is the main-table route the kernel picked.
	Route overlay.KernelRoute `json:"route"`
	// Encap is what the route's device does with the packet.
	Encap Encap `json:"encapsulation"`
}

// Encap is the encapsulation of a route's device.
type Encap struct {
	// Kind is "vxlan", "ipip" or "none".
	Kind string `json:"kind"`
	// VNI and Port are the VXLAN device's.
	VNI  int `json:"vni,omitempty"`
	Port int `json:"port,omitempty"`
	// NextHop is the route's gateway, or the destination for a route
	// without one.
	NextHop string `json:"nextHop"`
	// RemoteMAC is the next hop's MAC on a VXLAN device (its permanent
	// neighbour): the remote VTEP's.
	RemoteMAC string `json:"remoteMac,omitempty"`
	// Local and Remote are the outer addresses: the device's underlay
	// address and, for VXLAN, the FDB entry's destination for RemoteMAC
	// (the remote node), for IPIP the next hop.
	Local  string `json:"local,omitempty"`
	Remote string `json:"remote,omitempty"`
	// Problem says why the kernel cannot encapsulate: no neighbour for
	// the next hop, no FDB entry for its MAC.
	Problem string `json:"problem,omitempty"`
}

// String describes the encapsulation in a line.
func (e Encap) String() string {
	switch e.Kind {
	case "vxlan":
		s := fmt.Sprintf("VXLAN, VNI %d, UDP port %d", e.VNI, e.Port)
		if e.Remote != "" {
			local := e.Local
			if local == "" {
				local = "the node"
			}
			s += fmt.Sprintf(": outer %s → %s, the remote VTEP of %s (neighbour lladdr %s, FDB dst %s)", local, e.Remote, e.NextHop, e.RemoteMAC, e.Remote)
		}
		if e.Problem != "" {
			s += "; " + e.Problem
		}
		return s
	case "ipip":
		local := e.Local
		if local == "" {
			local = "the node"
		}
		return fmt.Sprintf("IPIP: outer %s → %s (the route's next hop)", local, e.Remote)
	}
	return fmt.Sprintf("none: the packet leaves as it is, to the next hop %s", e.NextHop)
}

// Request is the flow to explain.
type Request struct {
	// From and To name the two ends: a workload endpoint's ID
	// ("k8s/demo/pod-a/eth0"), an unambiguous part of it ("pod-a",
	// "demo/pod-a"), a host endpoint's name, an interface name, an IP
	// address, or "host" for the node itself.
	From, To string
	// Proto is "tcp", "udp", "sctp", "icmp" (ICMPv6 for IPv6) or a number.
	Proto string
	// SPort and DPort are the ports; SPort 0 means an ephemeral port.
	SPort, DPort uint16
	// ICMPType and ICMPCode (ICMP only); type 0 means an echo request.
	ICMPType, ICMPCode uint8
	// State is the conntrack state: "new" (the default), "established",
	// "related", "invalid" or "untracked".
	State string
	// Mark is the packet mark on arrival.
	Mark uint32
	// IPv6 picks the IPv6 addresses of endpoints named without an address.
	IPv6 bool
	// Src and Dst, when valid, replace the addresses of the two ends: for
	// an endpoint that has no route (admin down), or a spoofed source.
	Src, Dst netip.Addr
}

// End is one resolved end of the flow.
type End struct {
	// Kind is "workload", "host endpoint", "host" (the node itself) or
	// "address" (an address behind an interface no endpoint owns).
	Kind string `json:"kind"`
	// ID is the endpoint's ID; empty for the host and for addresses.
	ID string `json:"id,omitempty"`
	// Iface is the interface the packet crosses at this end; empty for
	// the host.
	Iface string `json:"interface,omitempty"`
	// Addr is the address used.
	Addr netip.Addr `json:"address"`
}

func (e End) String() string {
	var b strings.Builder
	b.WriteString(e.Kind)
	if e.ID != "" {
		b.WriteString(" " + e.ID)
	}
	b.WriteString(" (")
	if e.Iface != "" {
		b.WriteString(e.Iface + ", ")
	}
	b.WriteString(e.Addr.String() + ")")
	return b.String()
}

// Report is the answer.
type Report struct {
	From, To End
	Packet   tracer.Packet
	Result   *tracer.Result
	// Alternatives are near misses that would change the verdict.
	Alternatives []tracer.Alternative
	// Confirmation is the kernel's trace of a real probe, when one was
	// sent (see Confirm).
	Confirmation *Confirmation
	// Egress is how the packet leaves the node, for a destination beyond
	// it (an address no endpoint of the node owns) when Facts can say.
	Egress *Egress
}

// endpoint is an endpoint as the table knows it: its dispatch map element.
type endpoint struct {
	kind, id, iface string
}

// endpoints lists the workload and host endpoints of table m, from the
// comments of its dispatch maps' elements ("endpoint <id>", "host endpoint
// <id>").
func endpoints(m *nft.Model) []endpoint {
	var out []endpoint
	seen := map[string]bool{}
	for _, mp := range []string{render.MapFromWorkload, render.MapFromHost, render.MapToHost, render.MapFromHostForward, render.MapToHostForward} {
		s := m.Set(mp)
		if s == nil {
			continue
		}
		for _, e := range s.SortedElements() {
			var ep endpoint
			switch {
			case strings.HasPrefix(e.Comment, "host endpoint "):
				ep = endpoint{"host endpoint", strings.TrimPrefix(e.Comment, "host endpoint "), e.Key}
			case strings.HasPrefix(e.Comment, "endpoint "):
				ep = endpoint{"workload", strings.TrimPrefix(e.Comment, "endpoint "), e.Key}
			default:
				continue
			}
			if !seen[ep.kind+ep.iface] {
				seen[ep.kind+ep.iface] = true
				out = append(out, ep)
			}
		}
	}
	return out
}

// Explain traces req through m, the inet table as the kernel holds it.
func Explain(m *nft.Model, facts Facts, req Request) (*Report, error) {
	eps := endpoints(m)
	ct, err := parseState(req.State)
	if err != nil {
		return nil, err
	}
	from, err := resolve(eps, facts, req.From, req.IPv6, netip.Addr{}, req.Src)
	if err != nil {
		return nil, fmt.Errorf("--from %q: %w", req.From, err)
	}
	want6 := req.IPv6
	if from.Addr.IsValid() {
		want6 = from.Addr.Is6()
	}
	to, err := resolve(eps, facts, req.To, want6, from.Addr, req.Dst)
	if err != nil {
		return nil, fmt.Errorf("--to %q: %w", req.To, err)
	}
	if from.Addr.IsValid() && from.Addr.Is4() != to.Addr.Is4() {
		return nil, fmt.Errorf("--from %s and --to %s are of different families", from.Addr, to.Addr)
	}
	if from.Kind == "host" && !req.Src.IsValid() {
		// The host sends from the address its route to the destination picks.
		_, src, err := facts.Route(to.Addr)
		if err != nil {
			return nil, fmt.Errorf("--from host: %w", err)
		}
		if !src.IsValid() {
			return nil, fmt.Errorf("--from host: no source address for a route to %s", to.Addr)
		}
		from.Addr = src
	}
	proto, err := parseProto(req.Proto, to.Addr.Is6())
	if err != nil {
		return nil, err
	}
	p := tracer.Packet{Src: from.Addr, Dst: to.Addr, Proto: proto, Ct: ct, Mark: req.Mark,
		SPort: req.SPort, DPort: req.DPort, ICMPType: req.ICMPType, ICMPCode: req.ICMPCode}
	if p.SPort == 0 {
		p.SPort = 40000
	}
	if (proto == tracer.ProtoICMP || proto == tracer.ProtoICMPv6) && req.ICMPType == 0 {
		p.ICMPType = 8 // echo request
		if proto == tracer.ProtoICMPv6 {
			p.ICMPType = 128
		}
	}
	switch {
	case from.Kind == "host" && to.Kind == "host":
		return nil, errors.New("--from and --to are both the host: such packets cross only loopback")
	case from.Kind == "host":
		p.Path, p.OIF = tracer.Output, to.Iface
	case to.Kind == "host":
		p.Path, p.IIF = tracer.Input, from.Iface
	default:
		p.Path, p.IIF, p.OIF = tracer.Forward, from.Iface, to.Iface
	}
	if p.IIF != "" {
		// The strict reverse-path check: the route back to the source
		// must leave through the interface the packet came in on.
		back, _, err := facts.Route(p.Src)
		p.RPFFail = err != nil || back != p.IIF
	}
	// The host's and the output interface's addresses, for the fib
	// address-type rules (tunnel traffic) and masquerade (natOutgoing).
	if af, ok := facts.(AddrFacts); ok {
		if p.Local, err = af.HostAddrs(); err != nil {
			return nil, err
		}
		if p.OIF != "" {
			if p.OIFAddrs, err = af.IfaceAddrs(p.OIF); err != nil {
				return nil, err
			}
		}
		p.LocalKnown = true
	}
	res, err := tracer.Trace(m, p)
	if err != nil {
		return nil, err
	}
	alts, err := tracer.Alternatives(m, p, res)
	if err != nil {
		return nil, err
	}
	rep := &Report{From: from, To: to, Packet: p, Result: res, Alternatives: alts}
	if ef, ok := facts.(EgressFacts); ok && to.Kind == "address" {
		if rep.Egress, err = ef.Egress(to.Addr); err != nil {
			return nil, fmt.Errorf("--to %s: %w", to.Addr, err)
		}
	}
	return rep, nil
}

// AddrFacts is what Facts may also answer: the host's addresses and an
// interface's, which rules that test address types and masquerades need.
// Without it such a rule on the path cannot be evaluated.
type AddrFacts interface {
	HostAddrs() ([]netip.Addr, error)
	IfaceAddrs(iface string) ([]netip.Addr, error)
}

// resolve turns a name into an end of the flow. want6 picks the family of
// an endpoint's address; peer is the other end's address when known; addr,
// when valid, is the address to use.
func resolve(eps []endpoint, facts Facts, name string, want6 bool, peer, addr netip.Addr) (End, error) {
	if name == "" {
		return End{}, errors.New("empty: name an endpoint, an interface, an address or host")
	}
	if name == "host" {
		e := End{Kind: "host", Addr: addr}
		if peer.IsValid() && !addr.IsValid() {
			_, src, err := facts.Route(peer)
			if err != nil {
				return End{}, err
			}
			e.Addr = src
		}
		return e, nil
	}
	if a, err := netip.ParseAddr(name); err == nil {
		if facts.Local(a) {
			return End{Kind: "host", Addr: a}, nil
		}
		iface, _, err := facts.Route(a)
		if err != nil {
			return End{}, fmt.Errorf("no route to %s: %w", a, err)
		}
		e := End{Kind: "address", Iface: iface, Addr: a}
		for _, ep := range eps {
			if ep.iface == iface {
				e.Kind, e.ID = ep.kind, ep.id
			}
		}
		return e, nil
	}
	var hits []endpoint
	for _, ep := range eps {
		if ep.iface == name || ep.id == name || strings.HasSuffix(ep.id, "/"+name) || idHasPart(ep.id, name) {
			hits = append(hits, ep)
		}
	}
	if len(hits) == 0 {
		if facts.Exists(name) {
			hits = []endpoint{{kind: "address", iface: name}}
		} else {
			return End{}, fmt.Errorf("no endpoint, interface or address of that name (endpoints: %s)", listEndpoints(eps))
		}
	}
	if len(hits) > 1 {
		return End{}, fmt.Errorf("ambiguous: %s", listEndpoints(hits))
	}
	ep := hits[0]
	e := End{Kind: ep.kind, ID: ep.id, Iface: ep.iface, Addr: addr}
	if addr.IsValid() {
		return e, nil
	}
	addrs, err := facts.Addresses(ep.iface)
	if err != nil {
		return End{}, fmt.Errorf("%s %s: %w", ep.kind, ep.iface, err)
	}
	if peer.IsValid() {
		want6 = peer.Is6()
	}
	for _, a := range addrs {
		if a.Is6() == want6 {
			e.Addr = a
			break
		}
	}
	if !e.Addr.IsValid() {
		return End{}, fmt.Errorf("%s %s has no %s address routed through it (%v); name the address with --src or --dst", ep.kind, ep.iface, family(want6), addrs)
	}
	return e, nil
}

// idHasPart says whether name is a run of whole "/"-separated parts of id:
// "pod-a" and "demo/pod-a" name k8s/demo/pod-a/eth0.
func idHasPart(id, name string) bool {
	parts, want := strings.Split(id, "/"), strings.Split(name, "/")
	for i := 0; i+len(want) <= len(parts); i++ {
		if slices.Equal(parts[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

func listEndpoints(eps []endpoint) string {
	if len(eps) == 0 {
		return "none"
	}
	s := make([]string, len(eps))
	for i, ep := range eps {
		s[i] = ep.id + " (" + ep.iface + ")"
		if ep.id == "" {
			s[i] = ep.iface
		}
	}
	return strings.Join(s, ", ")
}

func family(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

func parseProto(s string, v6 bool) (uint8, error) {
	switch strings.ToLower(s) {
	case "", "tcp":
		return tracer.ProtoTCP, nil
	case "udp":
		return tracer.ProtoUDP, nil
	case "sctp":
		return tracer.ProtoSCTP, nil
	case "icmp", "icmpv6":
		if v6 {
			return tracer.ProtoICMPv6, nil
		}
		return tracer.ProtoICMP, nil
	}
	var n uint8
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		return 0, fmt.Errorf("--proto %q: want tcp, udp, sctp, icmp or a protocol number", s)
	}
	return n, nil
}

func parseState(s string) (nft.CtState, error) {
	switch s {
	case "", "new":
		return nft.CtStateNew, nil
	case "established":
		return nft.CtStateEstablished, nil
	case "related":
		return nft.CtStateRelated, nil
	case "invalid":
		return nft.CtStateInvalid, nil
	case "untracked":
		return nft.CtStateUntracked, nil
	}
	return 0, fmt.Errorf("--state %q: want new, established, related, invalid or untracked", s)
}
