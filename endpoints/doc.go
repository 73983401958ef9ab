// Package endpoints is nftep's endpoint manager: Felix's workload and host
// endpoint manager, rebuilt for one dual-stack inet table.
//
// It follows Felix's pending/dirty model (spec/endpoint-manager.md §1):
//
//   - OnUpdate only records what a message says (workload updates go into a
//     pending map; host endpoints, interface state and addresses into the
//     manager's inputs).
//   - ResolveUpdateBatch settles interface state and resolves host endpoints
//     to interfaces (§1.3, §5.1–5.3).
//   - CompleteDeferredWork renders what changed into the desired-state models
//     (nft.Model for the inet table and for the ARP table), asks for routes
//     and sysctls, and reports endpoint statuses (§1.4).
//
// The manager never talks to the kernel. Routes and sysctls go through the
// small Routes and Sysctls interfaces; the daemon adapts the real ones.
//
// One manager serves both IP families: the inet table holds both, so each
// endpoint is rendered once. Routes and sysctls are per family, and an
// endpoint's status is the worse of its families (§9.4: error > down > up).
//
// Where Felix has a known quirk (§13) this package fixes it; each decision is
// pinned by a test named after the quirk (TestQuirk...).
package endpoints
