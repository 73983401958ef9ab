package endpoints

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// worseStatus combines the statuses of an endpoint's IP families (as Felix's
// felix/dataplane/linux/status_combiner.go): error beats down beats up; ""
// (no entry in that family) is ignored, and only when every family is "" is
// the result "" (report a removal).
func worseStatus(statuses ...string) string {
	rank := func(s string) int {
		switch s {
		case StatusError:
			return 3
		case StatusDown:
			return 2
		case StatusUp:
			return 1
		}
		return 0
	}
	worst := ""
	for _, s := range statuses {
		if rank(s) > rank(worst) {
			worst = s
		}
	}
	return worst
}

// workloadStatus computes id's status and, when it is not up, why. Each
// condition contributes a status and the worst wins (error > down > up): with
// one manager for both families, "the worse of the families" is simply a
// failure in either family's sysctls making the endpoint down.
func (m *Manager) workloadStatus(id wlID) (status, reason string) {
	r := m.workloadStatusOf(id)
	return r.status, r.reason
}

// statusResult is workloadStatusOf's answer, with what Statuses needs to
// know about how it was reached to cache it (see listedID).
type statusResult struct {
	status, reason string
	// active: computed from an active endpoint, whose inputs change only
	// with a status mark (markWlStatus) or its interface's sysctls.
	active bool
	// iface is the active endpoint's interface; sysPending says that its
	// sysctls were pending when computed.
	iface      string
	sysPending bool
}

func (m *Manager) workloadStatusOf(id wlID) statusResult {
	if w := m.active[id]; w != nil {
		name := w.ep.GetName()
		r := statusResult{status: StatusUp, active: true, iface: name}
		var reasons []string
		down := func(why string) {
			r.status = worseStatus(r.status, StatusDown)
			reasons = append(reasons, why)
		}
		if !w.adminUp {
			down(fmt.Sprintf("state is %q, not \"active\"", w.ep.GetState()))
		}
		if !m.upIfaces[name] {
			down("interface " + name + " is not up")
		} else if m.deps.Sysctls != nil && m.deps.Sysctls.Pending(name) {
			r.sysPending = true
			down("sysctls of interface " + name + " failed; retrying")
		}
		r.reason = strings.Join(reasons, "; ")
		return r
	}
	if ep, ok := m.shadowed[id]; ok {
		// Felix reported nothing (quirk 13.4 in docs/felix-differences.md).
		// The endpoint exists but is not programmed, like a host endpoint
		// that lost its interface to a lower ID, so it gets the same status.
		return statusResult{status: StatusError, reason: fmt.Sprintf("interface %s belongs to workload endpoint %s", ep.GetName(), m.ifaceToWl[ep.GetName()])}
	}
	if inv, ok := m.invalid[id]; ok {
		return statusResult{status: StatusError, reason: inv.reason}
	}
	return statusResult{}
}

// markWlStatus marks id for a status report, and forgets the status
// Statuses cached for it: every change of what an active endpoint's
// status is made of (the endpoint, its interface's state) goes through
// here.
func (m *Manager) markWlStatus(id wlID) {
	m.dirtyWlStatus[id] = true
	if !m.listedBuilt {
		return
	}
	if i, found := slices.BinarySearchFunc(m.listed, id, func(l listedID, id wlID) int { return compareWlIDs(l.id, id) }); found {
		m.listed[i].cached = false
	}
}

// workloadProto returns the endpoint a status report echoes: Felix's status
// file reporter needs it, and drops a non-removal status without it.
func (m *Manager) workloadProto(id wlID) *proto.WorkloadEndpoint {
	if w := m.active[id]; w != nil {
		return w.ep
	}
	if ep, ok := m.shadowed[id]; ok {
		return ep
	}
	return m.invalid[id].ep
}

// hostEndpointStatus computes a host endpoint's status, as Felix does: up
// when every real interface it resolved to is up (the `*` pseudo interface
// counts as up), down otherwise, and error when it resolved to none.
func (m *Manager) hostEndpointStatus(id string) (status, reason string) {
	if _, ok := m.rawHostEps[id]; !ok {
		return "", ""
	}
	if bad := m.hostEpUnnamable[id]; len(bad) > 0 {
		// Its policy is not enforced there: worse than down.
		var reasons []string
		for _, iface := range bad {
			reasons = append(reasons, fmt.Sprintf("not programmed on interface %q: %v", iface, nft.ValidateIfName(iface)))
		}
		return StatusError, strings.Join(reasons, "; ")
	}
	ifaces := m.hostEpIfaces[id]
	if len(ifaces) == 0 {
		return StatusError, "no interface matches it, or each one it matches belongs to a host endpoint with a lower ID"
	}
	for _, iface := range ifaces {
		if iface != AllInterfaces && !m.upIfaces[iface] {
			return StatusDown, fmt.Sprintf("interface %s is not up", iface)
		}
	}
	return StatusUp, ""
}

// reportedStatus is the last status sent for a workload endpoint, with the
// endpoint it echoed.
type reportedStatus struct {
	status string
	ep     *proto.WorkloadEndpoint
}

// reportStatuses sends the status of every endpoint marked dirty during the
// batch, after all rendering (as Felix sends statuses last). A report
// identical to the last one sent for the ID (same status, same endpoint
// message) is skipped, and a removal is sent only for an ID that was reported
// before: the sink sees changes only.
func (m *Manager) reportStatuses() {
	for _, id := range sortedWlIDs(m.dirtyWlStatus) {
		status, reason := m.workloadStatus(id)
		last, had := m.reportedWl[id]
		if status == "" {
			if had {
				delete(m.reportedWl, id)
				m.send(&proto.WorkloadEndpointStatusRemove{Id: id.proto()})
			}
			continue
		}
		ep := m.workloadProto(id)
		if had && last.status == status && last.ep == ep {
			continue
		}
		m.reportedWl[id] = reportedStatus{status, ep}
		if status != StatusUp {
			m.log.Info("workload endpoint not up", "endpoint", id, "status", status, "reason", reason)
		}
		m.send(&proto.WorkloadEndpointStatusUpdate{
			Id:       id.proto(),
			Status:   &proto.EndpointStatus{Status: status},
			Endpoint: ep,
		})
	}
	clear(m.dirtyWlStatus)

	for _, id := range sortedKeys(m.dirtyHostStatus) {
		status, reason := m.hostEndpointStatus(id)
		last, had := m.reportedHost[id]
		if status == "" {
			if had {
				delete(m.reportedHost, id)
				m.send(&proto.HostEndpointStatusRemove{Id: &proto.HostEndpointID{EndpointId: id}})
			}
			continue
		}
		if had && last == status {
			continue
		}
		m.reportedHost[id] = status
		if status != StatusUp {
			m.log.Info("host endpoint not up", "hostEndpoint", id, "status", status, "reason", reason)
		}
		m.send(&proto.HostEndpointStatusUpdate{
			Id:     &proto.HostEndpointID{EndpointId: id},
			Status: &proto.EndpointStatus{Status: status},
		})
	}
	clear(m.dirtyHostStatus)
}

func (m *Manager) send(msg any) {
	if m.deps.Status != nil {
		m.deps.Status(msg)
	}
}

// EndpointStatus is one endpoint's current status, for `nftep status`.
type EndpointStatus struct {
	// Kind is "workload" or "host".
	Kind string
	// ID is the endpoint's ID: orchestrator/workload/endpoint for a
	// workload, the endpoint ID for a host endpoint.
	ID string
	// Status is StatusUp, StatusDown or StatusError.
	Status string
	// Reason says why the status is not up; empty when it is.
	Reason string
}

// Statuses returns the status of every endpoint the manager knows, workloads
// first, each kind sorted by ID. It reflects the last CompleteDeferredWork.
//
// The status file is written with it after changes, so at 10,000 endpoints
// recomputing every status each time cost more than the change itself: the
// status of an active endpoint is cached in its listed entry until
// markWlStatus forgets it, and recomputed while its interface's sysctls
// are (or may have become) pending, which changes without a mark.
// Shadowed and invalid endpoints, few, are recomputed each time.
func (m *Manager) Statuses() []EndpointStatus {
	if !m.listedBuilt {
		ids := map[wlID]bool{}
		for id := range m.active {
			ids[id] = true
		}
		for id := range m.shadowed {
			ids[id] = true
		}
		for id := range m.invalid {
			ids[id] = true
		}
		for _, id := range sortedWlIDs(ids) {
			m.listed = append(m.listed, listedID{id: id, str: id.String()})
		}
		m.listedBuilt = true
	}
	var sysPending map[string]bool
	if m.deps.Sysctls != nil {
		sysPending = map[string]bool{}
		for name := range m.deps.Sysctls.PendingUp() {
			sysPending[name] = true
		}
	}
	out := make([]EndpointStatus, 0, len(m.listed)+len(m.rawHostEps))
	for i := range m.listed {
		l := &m.listed[i]
		if !l.cached || l.sysPending || sysPending[l.iface] {
			r := m.workloadStatusOf(l.id)
			l.status, l.reason, l.iface, l.sysPending, l.cached = r.status, r.reason, r.iface, r.sysPending, r.active
		}
		out = append(out, EndpointStatus{Kind: "workload", ID: l.str, Status: l.status, Reason: l.reason})
	}
	for _, id := range sortedKeys(m.rawHostEps) {
		status, reason := m.hostEndpointStatus(id)
		out = append(out, EndpointStatus{Kind: "host", ID: id, Status: status, Reason: reason})
	}
	return slices.Clip(out)
}

// listedID is a workload ID Statuses lists, with its string and its
// cached status (cached: status, reason, and the interface and sysctl
// state it was computed with; see Statuses).
type listedID struct {
	id  wlID
	str string

	cached         bool
	status, reason string
	iface          string
	sysPending     bool
}

// list adds id to the listed IDs, in order, once it is in active,
// shadowed or invalid.
func (m *Manager) list(id wlID) {
	if !m.listedBuilt {
		return
	}
	i, found := slices.BinarySearchFunc(m.listed, id, func(l listedID, id wlID) int { return compareWlIDs(l.id, id) })
	if !found {
		m.listed = slices.Insert(m.listed, i, listedID{id: id, str: id.String()})
	}
}

// unlist drops id from the listed IDs once it is in none of active,
// shadowed and invalid.
func (m *Manager) unlist(id wlID) {
	if !m.listedBuilt {
		return
	}
	if _, ok := m.active[id]; ok {
		return
	}
	if _, ok := m.shadowed[id]; ok {
		return
	}
	if _, ok := m.invalid[id]; ok {
		return
	}
	if i, found := slices.BinarySearchFunc(m.listed, id, func(l listedID, id wlID) int { return compareWlIDs(l.id, id) }); found {
		m.listed = slices.Delete(m.listed, i, i+1)
	}
}
