package endpoints

import "github.com/nftep/nftep/felix"

// hasV4SpoofExemption reports whether an endpoint with these parsed fields
// may send from IPv4 sources other than its own, which needs rp_filter=0:
// strict RPF in the kernel would drop what the RPF-skip set lets through.
// Felix set rp_filter=0 for any exemption; only an IPv4 prefix needs it,
// rp_filter being IPv4-only.
func hasV4SpoofExemption(p *felix.Workload) bool {
	for _, pfx := range p.AllowSpoofed {
		if pfx.Addr().Is4() {
			return true
		}
	}
	return false
}

// configureInterfaces writes the sysctls of the workload interfaces that need
// it (Felix's configureInterface). An interface whose writes fail stays
// pending and is retried on the next CompleteDeferredWork; its endpoint is
// down meanwhile, and is reported again once a retry succeeds (quirk 13.5 in
// docs/felix-differences.md).
func (m *Manager) configureInterfaces() {
	if m.deps.Sysctls == nil {
		return
	}
	failed := m.deps.Sysctls.Apply()
	for name := range failed {
		if !m.sysctlsFailed[name] {
			m.sysctlsFailed[name] = true
			m.markIfaceOwnerDirty(name)
		}
	}
	for name := range m.sysctlsFailed {
		if _, still := failed[name]; !still {
			delete(m.sysctlsFailed, name)
			m.markIfaceOwnerDirty(name)
		}
	}
}

// markIfaceOwnerDirty marks the workload endpoint on name for a status report.
func (m *Manager) markIfaceOwnerDirty(name string) {
	if id, ok := m.ifaceToWl[name]; ok {
		m.markWlStatus(id)
	}
}
