package endpoints

import (
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// renderer is the part of package render the manager calls per endpoint.
// It is an interface so that tests can count renders: a one-endpoint change
// must render one endpoint, whatever the number of endpoints.
type renderer interface {
	workload(in render.WorkloadInput) render.Output
	host(in render.HostInput) render.Output
}

// pureRenderer calls package render with a fixed configuration.
type pureRenderer struct{ cfg render.Config }

func (r pureRenderer) workload(in render.WorkloadInput) render.Output {
	return render.Workload(r.cfg, in)
}

func (r pureRenderer) host(in render.HostInput) render.Output { return render.Host(r.cfg, in) }

// objectsOf turns render's output into what the manager tracks per owner.
func objectsOf(out render.Output) *objects {
	return &objects{chains: out.Chains, shared: out.Shared, elems: out.Elements, arpElems: out.ARPElements}
}

// writeStatic writes the objects that do not depend on any endpoint: base
// chains, dispatch chains with their fail-closed defaults, and the empty
// maps and sets. Endpoints only ever add elements and chains to
// these.
func (m *Manager) writeStatic() {
	chains, sets := render.Static(m.rcfg)
	for _, s := range sets {
		m.deps.Table.SetSet(s)
	}
	for _, c := range chains {
		m.tables.setChain(c)
	}
	if m.deps.ARP == nil {
		return
	}
	chains, sets = render.ARPStatic(m.rcfg)
	for _, s := range sets {
		m.deps.ARP.SetSet(s)
	}
	for _, c := range chains {
		m.deps.ARP.SetChain(c)
	}
}

// selectors is the render.SelectorFunc over the policies the manager has
// seen: their selectors decide how an endpoint's policies are grouped.
func (m *Manager) selectors(id *proto.PolicyID) (string, bool) {
	sel, ok := m.policySelectors[policyKeyOf(id)]
	return sel, ok
}

// endpointMark returns the endpoint mark of iface, allocating one on first
// use, or 0 when endpoint marks are off or none is free (then the endpoint
// works, but kube-proxy IPVS traffic from it is not attributed to it).
func (m *Manager) endpointMark(iface string) uint32 {
	if m.marks == nil {
		return 0
	}
	mark, err := m.marks.EndpointMark(iface)
	if err != nil {
		m.log.Error("no endpoint mark for interface", "iface", iface, "err", err)
		return 0
	}
	return mark
}

// releaseMark frees iface's endpoint mark. Felix never released host endpoint
// marks (quirk 13.8 in docs/felix-differences.md); here both kinds are
// released when their interface loses its endpoint.
func (m *Manager) releaseMark(iface string) {
	if m.marks != nil {
		m.marks.ReleaseEndpointMark(iface)
	}
}
