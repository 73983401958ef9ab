package endpoints

import (
	"maps"
	"net/netip"
	"slices"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// resolveHostEndpoints maps interfaces to the host endpoint that owns them
// (Felix's resolveHostEndpoints). Candidates are exactly the non-workload
// interfaces with an address report; oper state does not matter here, only
// for status. An endpoint with a name matches only that interface (the name
// beats any IP match); one without a name matches interfaces holding any of
// its expected addresses. The lowest endpoint ID wins each interface. The
// lowest `*` endpoint becomes the default, under the pseudo name
// AllInterfaces.
//
// An interface whose name nftables cannot take (the kernel allows quotes,
// backslashes and non-ASCII bytes; nft does not) is left out: its name in a
// dispatch map would fail the whole transaction. The endpoint that won it
// is recorded in m.resolvedUnnamable and reports an error.
func (m *Manager) resolveHostEndpoints() map[string]string {
	res := map[string]string{}
	unnamable := map[string][]string{}
	defer func() {
		for _, ifaces := range unnamable {
			slices.Sort(ifaces)
		}
		m.resolvedUnnamable = unnamable
	}()
	var star string
	expected := map[string][]netip.Addr{}
	for id, hep := range m.rawHostEps {
		switch hep.GetName() {
		case "*":
			if star == "" || id < star {
				star = id
			}
		case "":
			expected[id] = m.expectedAddrs(id, hep)
		}
	}
	for iface, addrs := range m.hostIfaceAddrs {
		best := ""
		for id, hep := range m.rawHostEps {
			if best != "" && id > best {
				continue
			}
			name := hep.GetName()
			match := name == iface
			if name == "" {
				for _, a := range expected[id] {
					if addrs[a] {
						match = true
						break
					}
				}
			}
			if match {
				best = id
			}
		}
		switch {
		case best == "":
		case nft.ValidateIfName(iface) != nil:
			unnamable[best] = append(unnamable[best], iface)
		default:
			res[iface] = best
		}
	}
	if star != "" {
		res[AllInterfaces] = star
	}
	return res
}

// expectedAddrs parses a host endpoint's expected addresses, both families
// (an IPv6 address can select an interface in an inet table as well as an
// IPv4 one), with felix.ParseHostEndpoint. An address that does not parse,
// or is listed under the other family, can never match; it is logged.
func (m *Manager) expectedAddrs(id string, hep *proto.HostEndpoint) []netip.Addr {
	h, err := felix.ParseHostEndpoint(hep)
	if err != nil {
		m.log.Warn("host endpoint has bad fields; ignoring them", "hostEndpoint", id, "err", err)
	}
	return slices.Concat(h.Expected[felix.IPv4], h.Expected[felix.IPv6])
}

// updateHostEndpoints programs the resolved host endpoints (as Felix's
// updateHostEndpoints): per-interface chains in each layer, dispatch map
// elements, the `*` defaults of the dispatch chains, and the interface
// callbacks. Felix called the callbacks only after the chains; the order does
// not matter here because the callbacks see decisions, not the tables.
//
// All resolved interfaces are re-rendered: there are few of them, and the
// renderer is pure, so unchanged ones produce the same chains and the nft
// table sends nothing for them.
func (m *Manager) updateHostEndpoints() {
	resolved := m.resolvedIfaceToHostEp

	// Interface ownership changes: callbacks, and statuses of both sides.
	for _, iface := range sortedKeys(m.activeIfaceToHostEp) {
		old := m.activeIfaceToHostEp[iface]
		cur, ok := resolved[iface]
		switch {
		case !ok:
			m.cb.RemoveInterface(iface)
			m.dirtyHostStatus[old] = true
		case cur != old:
			m.cb.UpdateInterface(iface, &proto.HostEndpointID{EndpointId: cur})
			m.dirtyHostStatus[old] = true
			m.dirtyHostStatus[cur] = true
		}
	}
	for _, iface := range sortedKeys(resolved) {
		if _, ok := m.activeIfaceToHostEp[iface]; !ok {
			id := resolved[iface]
			m.cb.AddInterface(iface, &proto.HostEndpointID{EndpointId: id})
			m.dirtyHostStatus[id] = true
		}
	}

	// Chains and dispatch elements, per interface. New before old, so shared
	// policy-group chains never drop out in between.
	newObjs := make(map[string]*objects, len(resolved))
	for _, iface := range sortedKeys(resolved) {
		id := resolved[iface]
		hep := m.rawHostEps[id]
		in := render.HostInput{ID: id, Interface: iface, Endpoint: hep, Selectors: m.selectors}
		if iface == AllInterfaces {
			if len(hep.GetUntrackedTiers()) > 0 {
				m.log.Warn("untracked (DoNotTrack) policy is not supported for the `*` host endpoint; ignoring it",
					"hostEndpoint", id)
			}
		} else {
			in.Mark = m.endpointMark(iface)
		}
		objs := objectsOf(m.r.host(in))
		m.tables.replace(m.hostIfaceObjs[iface], objs)
		newObjs[iface] = objs
	}
	for iface, objs := range m.hostIfaceObjs {
		if _, ok := newObjs[iface]; !ok {
			m.tables.replace(objs, nil)
			m.releaseMark(iface)
		}
	}
	m.hostIfaceObjs = newObjs

	// The dispatch chains' defaults: the `*` endpoint's chains, or return.
	var star *proto.HostEndpoint
	if id, ok := resolved[AllInterfaces]; ok {
		star = m.rawHostEps[id]
	}
	for _, c := range render.HostDispatch(m.rcfg, star) {
		m.tables.setChain(c)
	}

	// Endpoints that matched interfaces nft cannot name: their status
	// changes with the list.
	for _, id := range sortedKeys(mergeKeys(m.hostEpUnnamable, m.resolvedUnnamable)) {
		old, cur := m.hostEpUnnamable[id], m.resolvedUnnamable[id]
		if slices.Equal(old, cur) {
			continue
		}
		m.dirtyHostStatus[id] = true
		for _, iface := range cur {
			if !slices.Contains(old, iface) {
				m.log.Error("host endpoint not programmed on an interface whose name nftables cannot take",
					"hostEndpoint", id, "iface", iface, "err", nft.ValidateIfName(iface))
			}
		}
	}
	m.hostEpUnnamable = m.resolvedUnnamable

	m.activeIfaceToHostEp = maps.Clone(resolved)
	clear(m.hostEpIfaces)
	for _, iface := range sortedKeys(resolved) {
		id := resolved[iface]
		m.hostEpIfaces[id] = append(m.hostEpIfaces[id], iface)
	}
}

// mergeKeys returns a map with the keys of a and b.
func mergeKeys[V any](a, b map[string]V) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
