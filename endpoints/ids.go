package endpoints

import (
	"cmp"
	"slices"

	"github.com/nftep/nftep/proto"
)

// wlID is a workload endpoint ID as a comparable map key.
type wlID struct {
	orchestrator, workload, endpoint string
}

func wlIDOf(id *proto.WorkloadEndpointID) wlID {
	return wlID{id.GetOrchestratorId(), id.GetWorkloadId(), id.GetEndpointId()}
}

func (id wlID) proto() *proto.WorkloadEndpointID {
	return &proto.WorkloadEndpointID{OrchestratorId: id.orchestrator, WorkloadId: id.workload, EndpointId: id.endpoint}
}

// String is the form used in logs and rule comments: k8s/default/pod-a/eth0.
func (id wlID) String() string {
	return id.orchestrator + "/" + id.workload + "/" + id.endpoint
}

// compareWlIDs orders workload IDs as Felix's wlIdsAscending does:
// orchestrator, then workload, then endpoint, by plain string order.
// The smaller ID wins an interface name.
func compareWlIDs(a, b wlID) int {
	return cmp.Or(
		cmp.Compare(a.orchestrator, b.orchestrator),
		cmp.Compare(a.workload, b.workload),
		cmp.Compare(a.endpoint, b.endpoint),
	)
}

// policyKey is a policy ID as a comparable map key.
type policyKey struct {
	kind, namespace, name string
}

func policyKeyOf(id *proto.PolicyID) policyKey {
	return policyKey{id.GetKind(), id.GetNamespace(), id.GetName()}
}

func sortedWlIDs[V any](m map[wlID]V) []wlID {
	ids := make([]wlID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareWlIDs)
	return ids
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
