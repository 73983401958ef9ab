// Package policy is nftep's policy manager: Felix's active policies,
// profiles and IP sets, rendered as chains and sets of the one inet table.
//
// It follows Felix's pending/dirty model: OnUpdate only records a message;
// CompleteDeferredWork writes what changed into the desired-state model
// (nft.Model), which nft.Table later programs in one transaction.
//
// # IP sets
//
// A Felix IP set becomes two nft sets, "ipset-<id>-v4" and "ipset-<id>-v6"
// (IPSetName), because Felix mixes the families in one set. With IPv6 off
// (render.Config.IPv6, Felix's Ipv6Support) only the "-v4" set exists, its
// IPv6 members are dropped, and rules are rendered for IPv4 alone. NET sets are
// interval sets whose elements are the members no other member contains
// (the kernel refuses overlapping intervals); IP sets are plain address
// sets; IP_AND_PORT sets (named ports, service ports) are plain sets of
// `ipv4_addr . inet_proto . inet_service`. Deltas change elements only: no
// chain is rewritten when membership changes. Sets are not layered: one set
// serves every layer.
//
// # Which chains
//
// Endpoint chains (package render) jump to "<layer>-pi-<tier>.<policy>",
// "<layer>-po-…", "<layer>-pri-<profile>" and "<layer>-pro-…" in the
// filter, mangle (pre-DNAT and host egress) and raw (untracked) layers.
// Rather than guess which layers a policy is used in, CompleteDeferredWork
// reads the model's chains and writes exactly the policy and profile chains
// they jump to, rendered for that layer. Felix does the same: it offers
// every policy chain to every table and programs only the referenced ones.
// A jump to a name no known policy or profile has (not sent yet, removed,
// or a Felix bug) gets a placeholder chain that drops everything — fail
// closed — because the kernel refuses a jump to a missing chain and the
// alternative, accepting, would open the endpoint. Chains nothing jumps to
// are deleted. Because the references come from the model, the daemon calls
// this manager's CompleteDeferredWork after the endpoint manager's.
//
// # Rule shapes
//
// A policy chain is entered with the Accept and Pass marks clear (the
// endpoint chain clears them and jumps only while they are) and tells its
// caller the verdict through them, as Felix's policy chains do
// (felix/rules/policy.go):
//
//	allow     <matches> meta mark set meta mark | <Accept>
//	          meta mark & <Accept> == <Accept> return
//	next-tier <matches> meta mark set meta mark | <Pass>
//	          meta mark & <Pass> == <Pass> return
//	deny      <matches> drop            (reject in filter with FilterDenyAction REJECT)
//	log       <matches> log prefix "calico-packet: "   (and go on)
//
// nftep's rules have one action each, so "set the mark and return" is two
// rules, exactly as Felix's iptables rules are; the return needs no copy of
// the matches, since only the rules before it can have set the bit.
//
// Matches are ANDed; a list of CIDRs or ports is one anonymous set. A list
// of IP sets, and "ports OR named-port sets", become several nft rules (one
// per alternative, all with the same action); for log they are made
// disjoint so that a packet is logged once. Rules with addresses, IP sets
// or ICMP types are rendered per family and left out of a family they
// cannot match (other-family CIDRs only, a negated catch-all, ip_version).
// not_icmp_type_code, which nft cannot negate in one match, jumps to a
// helper chain "<layer>-pix-…-r<i>" that returns for the excluded type and
// code and applies the action otherwise.
//
// Every rule's comment names its source: "policy <tier>/<name> inbound rule
// <i> id <rule_id>". A policy with a rule that cannot be rendered (an
// unparsable CIDR, an unknown IP set, ports without a port protocol) gets a
// chain that drops everything in that direction, with the error in its
// comment and in the log; the other policies are unaffected.
package policy
