// Package docs holds nftep's documentation (the Markdown files beside this
// one). It has no code: its test, TestDocs (`make docs-check`, and part of
// `make test`), runs every command the documentation shows and compares
// the real output with the documented one.
//
// # How examples are marked
//
// A fenced block whose lines start with "$ " is an example: each "$ " line
// is a command (a line ending in a backslash continues it), and the lines
// up to the next command are its output, stdout and stderr together. The
// block must follow a marker comment, with at most blank lines between:
//
//	<!-- docs-check: scenario NAME -->   run the block in scenario NAME
//	<!-- docs-check: skip REASON -->     do not run it (counted and listed)
//
// A block with "$ " lines and no marker fails the check, so no example is
// left out silently. In expected output a line "..." stands for any number
// of lines (an excerpt).
//
// # Scenarios
//
// Blocks naming the same scenario in one file share one instance, built
// when first named and removed at the end of the file, so a page reads as
// one session. Every scenario runs its commands with the freshly built
// nftep and nftep-felix-driver first on PATH, in a work directory holding
// demo.yaml and examples/ (every examples/*.yaml), in a private mount
// namespace whose /run/nftep is a temporary directory (nothing is left in
// the host's /run/nftep):
//
//   - none: an empty network namespace (loopback only), and the commands
//     run inside it: dry runs, error messages. No command ever runs in the
//     host's network namespace.
//   - node1: a network namespace named node1 in the commands (the real name
//     is random and mapped both ways) with one pod namespace, pod-a, wired
//     to it by the veth cali-a, as Calico's CNI plugin would; commands run
//     in the host's namespace and name node1 with --netns or ip -n.
//   - node2: an empty namespace named node2, and real-felix-session.bin
//     (the recorded real Felix stream, testdata/felix/ of the repository)
//     in the work directory.
//   - node: a node namespace and pods pod-a, pod-b, pod-c and pod-x as in
//     `nftep demo` (veths cali-a … cali-x, addresses 10.65.0.1–3 and
//     10.65.0.99, MACs fixed), each pod serving HTTP on ports 8080 and 9090
//     ("pod-b: hello on port 8080"); commands run inside the node namespace,
//     as an operator's shell on a node would (plain `nft list ruleset`,
//     `nftep status`).
//   - cluster: node1 of the example cluster over VXLAN
//     (examples/cluster-node1.yaml): a node namespace named node1 with an
//     eth0 of 192.168.60.11/24 (a veth whose peer, eth0p, stays inside)
//     and pods pod-a (cali-a, 10.65.1.1) and pod-b (cali-b, 10.65.1.2);
//     commands run inside the node namespace.
//
// # What is ignored
//
// Output and documentation are both normalised before comparing (see
// volatile): timestamps (2026-12-02 16:49:22, RFC 3339, and slog's
// time= field, dropped), pids (pid 852, "pid": 852), durations (took=,
// "in 11ms", curl's "after 1001 milliseconds", uptime), the demo's random
// namespace suffix, the real names of scenario namespaces, the work
// directory's path, nf_tables generation numbers, conntrack timeouts and
// ephemeral source ports, and byte counts of counters. Trailing spaces and
// trailing empty lines are ignored too.
package docs
