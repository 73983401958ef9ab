package render

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// chainType selects which steps of the endpoint rule sequence (see render
// below; Felix's felix/rules/endpoints.go) a chain gets.
type chainType uint8

const (
	// typeNormal: workload chains, host filter th/fh and mangle th.
	typeNormal chainType = iota
	// typeForward: host thfw/fhfw; no failsafe, no profiles, default
	// allow when the tier list is empty.
	typeForward
	// typeUntracked: raw th/fh; no conntrack, notrack on accept, no
	// end-of-tier drop, no profiles.
	typeUntracked
	// typePreDNAT: mangle fh; no end-of-tier drop, no profiles.
	typePreDNAT
)

// chainSpec is everything one endpoint chain's body depends on. It holds no
// interface name: that is what lets identical bodies be shared.
type chainSpec struct {
	layer     Layer
	typ       chainType
	dir       Dir
	tiers     []*proto.TierInfo
	profiles  []string
	failsafe  string // failsafe chain to jump to, or ""
	allow     string // ActionAccept or ActionReturn
	encap     bool   // the workload-egress VXLAN/IPIP drops apply
	qos       *proto.QoSControls
	adminDown bool
	selectors SelectorFunc
}

// body is a rendered endpoint chain body and the group chains it jumps to.
type body struct {
	rules  []*nft.Rule
	groups []*nft.Chain
	// stateful is set when a rule keeps per-rule kernel state (a limit
	// rate or a ct count): such a body must not be shared, or one
	// endpoint's traffic would eat another's budget.
	stateful bool
}

// flowLogDir is Felix's nflog group (1 ingress, 2 egress) and letter.
func flowLogDir(d Dir) (uint16, string) {
	if d == Egress {
		return 2, "E"
	}
	return 1, "I"
}

// render builds the rule sequence of an endpoint chain, in Felix's order
// (felix/rules/endpoints.go): packet-rate limit, conntrack, connection
// limit, failsafe, mark clear, encap drops, tiers, forward default-allow,
// profiles and the final deny.
func (cfg Config) render(s chainSpec) body {
	var b body
	deny := cfg.denyAction(s.layer)
	add := func(r *nft.Rule) { b.rules = append(b.rules, r) }
	m := cfg.Marks
	dir := dirWord(s.dir)

	if s.adminDown {
		add(rule("Endpoint admin disabled", deny))
		return b
	}

	// 1. Packet-rate limit, before conntrack so established floods count too.
	if s.typ == typeNormal && s.qos != nil {
		rate, burst := s.qos.GetIngressPacketRate(), s.qos.GetIngressPacketBurst()
		if s.dir == Egress {
			rate, burst = s.qos.GetEgressPacketRate(), s.qos.GetEgressPacketBurst()
		}
		if rate > 0 {
			add(rule("Drop packets over "+dir+" packet rate limit", drop,
				nft.Limit{Rate: uint64(rate), Burst: uint32(burst)}))
			b.stateful = true
		}
	}

	// 2. Conntrack: established flows skip policy; invalid ones never pass.
	if s.typ != typeUntracked {
		if s.allow == ActionReturn {
			// A return verdict alone would not tell the caller the
			// packet was allowed: say so with the accept mark.
			add(rule("Mark established and related as accepted", setBits(m.Accept), ctEstablished))
		}
		add(rule("Allow established and related", allowVerdict(s.allow), ctEstablished))
		if !cfg.DisableConntrackInvalidCheck {
			add(rule(cfg.denyWord(s.layer)+" conntrack invalid", deny, ctInvalid))
		}
	}

	// 3. Connection limit, after conntrack so only new connections count.
	if s.typ == typeNormal && s.qos != nil {
		maxConn := s.qos.GetIngressMaxConnections()
		if s.dir == Egress {
			maxConn = s.qos.GetEgressMaxConnections()
		}
		if maxConn > 0 {
			// A TCP reset needs a TCP packet to answer; nft refuses
			// `reject with tcp reset` on a rule that may match others.
			add(rule("Reject connections over "+dir+" connection limit",
				nft.Reject{With: nft.RejectTCPReset}, l4(protoTCP), nft.CtCount{Over: uint32(maxConn)}))
			b.stateful = true
		}
	}

	// 4. Failsafe ports come before any policy can drop.
	if s.failsafe != "" {
		add(rule("Failsafe ports", jump(s.failsafe)))
	}

	// 5. Policy chains report through the accept and pass bits: start clean.
	add(rule("Clear accept and pass marks", clearBits(m.Accept|m.Pass)))

	// 6. Workloads must not originate overlay traffic (it would bypass
	//    the policy of the workloads it is addressed to).
	if s.encap {
		if !cfg.AllowVXLANFromWorkloads {
			add(rule(cfg.denyWord(s.layer)+" VXLAN encapped packets originating in workloads", deny,
				l4(protoUDP), dport(cfg.VXLANPort)))
		}
		if !cfg.AllowIPIPFromWorkloads {
			add(rule(cfg.denyWord(s.layer)+" IPinIP encapped packets originating in workloads", deny,
				l4(protoIPIP)))
		}
	}

	// 7. Tiers.
	for _, t := range s.tiers {
		pols := t.GetIngressPolicies()
		if s.dir == Egress {
			pols = t.GetEgressPolicies()
		}
		if len(pols) == 0 {
			continue
		}
		tier := t.GetName()
		add(rule("Start of tier "+tier, clearBits(m.Pass)))
		anyActive := false
		for _, g := range groupPolicies(tier, s.dir, pols, s.selectors) {
			active := g.active()
			if g.inlined() {
				for _, p := range active {
					add(rule("Policy "+tier+"."+policyName(p),
						jump(policyChainName(s.layer, s.dir, tier, p)), markClear(m.Pass)))
				}
			} else {
				gc := g.chain(s.layer, m)
				b.groups = append(b.groups, gc)
				add(rule(fmt.Sprintf("Policy group %s: %d policies of tier %s", g.uid(), len(active), tier),
					jump(gc.Name), markClear(m.Pass)))
			}
			if len(active) == 0 {
				continue
			}
			anyActive = true
			if s.typ == typeUntracked {
				add(rule("Untrack if policy accepted", nft.Notrack{}, markSet(m.Accept)))
			}
			add(rule("Return if policy accepted", ret, markSet(m.Accept)))
		}
		if s.typ != typeNormal && s.typ != typeForward {
			continue // untracked and pre-DNAT policy only ever allows early
		}
		group, letter := flowLogDir(s.dir)
		if anyActive && t.GetDefaultAction() != "Pass" {
			if cfg.FlowLogs {
				add(rule("Log end of tier "+tier, nft.NFLog{Group: group, Prefix: nflogPrefix("DP" + letter + "|" + tier)},
					markClear(m.Pass)))
			}
			add(rule("End of tier "+tier+". "+cfg.denyWord(s.layer)+" if no policies passed packet", deny, markClear(m.Pass)))
		} else if cfg.FlowLogs {
			add(rule("Log pass at end of tier "+tier, nft.NFLog{Group: group, Prefix: nflogPrefix("PP" + letter + "|" + tier)},
				markClear(m.Pass)))
		}
	}

	// 8. Forwarded traffic is not policed until the endpoint has forward tiers.
	if s.typ == typeForward && len(s.tiers) == 0 {
		add(rule("Allow forwarded traffic by default", setBits(m.Accept)))
		add(rule("Return for accepted forward traffic", ret))
	}

	// 9. Profiles, then the final deny.
	if s.typ == typeNormal {
		for _, p := range s.profiles {
			add(rule("Profile "+p, jump(profileChainName(s.layer, s.dir, p))))
			add(rule("Return if profile accepted", ret, markSet(m.Accept)))
		}
		if cfg.FlowLogs {
			group, letter := flowLogDir(s.dir)
			add(rule("Log no profile matched", nft.NFLog{Group: group, Prefix: "DR" + letter}))
		}
		add(rule(cfg.denyWord(s.layer)+" if no profiles matched", deny))
	}
	return b
}

// maxNFLogPrefix is the longest nflog prefix (64 bytes with the NUL).
const maxNFLogPrefix = 63

// nflogPrefix shortens a prefix of 63 bytes or more as Felix does: the first
// 10 characters, "_" and 41 hash characters, "_", the last 10 (63 in all).
// The prefix holds a tier name from the datastore, so what nft cannot print
// back (quotes, backslashes, control bytes, invalid UTF-8, including a
// sequence the cut splits) becomes '_', as in comments: never longer, so
// the limit holds. The hash is of the prefix as given.
func nflogPrefix(p string) string {
	if len(p) < maxNFLogPrefix {
		return nft.SanitizeComment(p)
	}
	sum := sha256.Sum256([]byte(p))
	h := base64.RawURLEncoding.EncodeToString(sum[:])[:41]
	return nft.SanitizeComment(p[:10]) + "_" + h + "_" + nft.SanitizeComment(p[len(p)-10:])
}

// withEndpoint prefixes every rule comment of an owned chain with the
// endpoint's name, so `nft list ruleset` says whose chain it is. Shared
// chains keep the bare reasons: their map elements name the endpoints.
func withEndpoint(who string, rules []*nft.Rule) []*nft.Rule {
	out := make([]*nft.Rule, len(rules))
	for i, r := range rules {
		c := *r
		c.Comment = safeComment(who + ": " + r.Comment)
		out[i] = &c
	}
	return out
}

// contentHashLen is the length of a shared chain's content hash: 20 base64
// characters are 120 bits of SHA-256, so two different bodies on one node
// do not collide in practice. With the "_" the suffix is 21 bytes, longer
// than any interface name (15), so a shared chain never takes the name of a
// per-interface one.
const contentHashLen = 20

// contentName returns the content-addressed name "<layer>-<kind>-_<hash>"
// of a shared endpoint chain. The hash covers every rule (matches, action
// and comment), so equal names mean equal bodies.
func contentName(layer Layer, kind string, rules []*nft.Rule) string {
	sum := sha256.Sum256([]byte(rulesKey(rules)))
	return string(layer) + "-" + kind + "-_" + base64.RawURLEncoding.EncodeToString(sum[:])[:contentHashLen]
}

// rulesKey is a stable text form of rules (type and fields of every match
// and action), independent of pointers and of the printer's formatting.
func rulesKey(rules []*nft.Rule) string {
	var s []byte
	for _, r := range rules {
		s = fmt.Appendf(s, "rule %q counter=%v\n", r.Comment, r.Counter)
		for _, m := range r.Match {
			s = fmt.Appendf(s, " match %T%+v\n", m, m)
		}
		s = fmt.Appendf(s, " action %T%+v\n", r.Action, r.Action)
	}
	return string(s)
}
