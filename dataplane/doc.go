// Package dataplane is nftep's event loop: it takes Felix's messages from a
// source (a state file, or a real Felix on the driver pipe) and interface
// events from the kernel, hands them to the managers (package endpoints and
// package policy), and programs the result: one nftables transaction per
// table, then routes and sysctls.
//
// One goroutine owns everything (the managers are not safe for concurrent
// use); sources only send it events. A batch of updates is computed and
// applied once it settles (in driver mode as soon as Felix's input holds no
// further frame, as Felix's own dataplane does; otherwise BatchDelay after
// its last message; at most MaxBatchDelay after its first), in Felix's order: OnUpdate to every
// manager, ResolveUpdateBatch, the endpoint manager's CompleteDeferredWork,
// then the policy manager's (which writes the policy chains the endpoint
// chains jump to), then nft.Table.Apply of the inet and arp tables, then
// the route table.
//
// What it guarantees:
//
//   - The node is never open. The first apply always carries the static
//     table, whose dispatch drops unknown workload interfaces; in driver
//     mode, when no table exists yet, that static table is applied as soon
//     as the configuration is known, before any endpoint. A table a previous
//     nftep left is kept as it is until the whole state is known (Felix's
//     graceful restart: its internal dataplane, too, removes nothing before
//     the first InSync).
//   - A failed transaction changes nothing in the kernel. The loop logs the
//     consequence, retries with exponential backoff (250 ms doubling to
//     30 s), and the retry reads the table back first (full resync), which
//     is also what an unknown outcome (nft.IsStateUnknown) needs.
//   - A state file is validated completely, including the nft validation of
//     the ruleset it produces (a dry run through the real managers), before
//     anything is applied; a bad file leaves the running ruleset as it was.
//   - The tables are resynced every NftablesRefreshInterval (180 s), and
//     routes when the route table asks (kernel events, a lost event
//     subscription, grace periods); interface sysctls are read back a
//     slice at a time with each nftables refresh, in the same wakeup
//     (every RouteRefreshInterval when that refresh is off).
//   - Updates that arrive together are applied together: queued events are
//     handled before any timer, and a resync or retry that comes due while
//     a batch settles waits for the batch's flush.
//   - Endpoint statuses go out after the apply that programmed them: to
//     Felix on fd 4 in driver mode, and into the run directory's status.json
//     in every mode. A daemon answers `nftep show` and `nftep status` on the
//     run directory's control socket and records ruleset.nft when it stops;
//     `nftep apply` records it after its apply.
//   - Stopping never removes anything: only Cleanup does.
//
// The entry points are the modes of the nftep command: Apply (reconcile once),
// Run (keep reconciled from a state file), RunDriver (Felix's external
// dataplane driver), DryRun (the ruleset and statuses a state file would
// give), ReadProgrammed (`nftep show`) and Cleanup.
package dataplane
