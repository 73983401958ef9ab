// Package endpoints is nftep's endpoint manager: Felix's workload and host
// endpoint manager, rebuilt for one dual-stack inet table.
//
// It follows the pending/dirty model of Felix's endpoint manager
// (felix/dataplane/linux/endpoint_mgr.go; Felix function names in this
// package's comments are from that file unless another is named):
//
//   - OnUpdate only records what a message says (workload updates go into a
//     pending map; host endpoints, interface state and addresses into the
//     manager's inputs).
//   - ResolveUpdateBatch settles interface state and resolves host endpoints
//     to interfaces.
//   - CompleteDeferredWork renders what changed into the desired-state models
//     (nft.Model for the inet table and for the ARP table), asks for routes
//     and sysctls, and reports endpoint statuses.
//
// The manager never talks to the kernel. Routes and sysctls go through the
// small Routes and Sysctls interfaces; the daemon adapts the real ones.
//
// One manager serves both IP families: the inet table holds both, so each
// endpoint is rendered once. Routes and sysctls are per family, and an
// endpoint's status is the worse of its families (error > down > up, as
// Felix's status combiner, felix/dataplane/linux/status_combiner.go).
//
// Where Felix has a known quirk this package decides it deliberately; each
// decision is listed in docs/felix-differences.md and pinned by a test named
// after the quirk's number there (TestQuirk13_5_... for quirk 13.5).
package endpoints
