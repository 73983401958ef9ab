package policy

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// LogPrefix is the prefix of the kernel log lines a "log" rule writes:
// Felix's default LogPrefix, with the ": " Felix appends.
const LogPrefix = "calico-packet: "

// maxVariants bounds the nft rules one Felix rule may expand to. Every
// OR-list of sets or named ports multiplies the count (see variants); real
// rules have at most one of each, so hitting the bound means a broken or
// hostile input, which fails closed instead of writing a huge chain.
const maxVariants = 256

// Felix rule actions (Rule.action).
const (
	actionAllow    = "allow"
	actionDeny     = "deny"
	actionLog      = "log"
	actionNextTier = "next-tier"
	actionPass     = "pass"
)

// Protocol numbers the renderer needs by name.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
	protoSCTP   = 132
	protoUDPLit = 136
)

// protoNumbers are the protocol names Felix sends (lower-cased by Felix).
var protoNumbers = map[string]uint8{
	"tcp": protoTCP, "udp": protoUDP, "icmp": protoICMP, "icmpv6": protoICMPv6,
	"sctp": protoSCTP, "udplite": protoUDPLit,
}

// portProtos can carry ports: nft's `th dport` means something only for
// them (nft.Port requires one).
var portProtos = map[uint8]bool{protoTCP: true, protoUDP: true, protoSCTP: true, protoUDPLit: true, 33: true}

// setTypes reports the type of each IP set Felix has sent; a rule naming a
// set it does not know cannot be rendered.
type setTypes func(id string) (proto.IPSetUpdate_IPSetType, bool)

// renderer renders the rules of one policy or profile direction into one
// layer.
type renderer struct {
	cfg   render.Config
	layer render.Layer
	sets  setTypes
	// chain is the chain being rendered; helper chains are named after it.
	chain string
	// who names the policy or profile and direction in comments:
	// "policy default/p1 inbound".
	who string
	// helpers collects the helper chains of not_icmp_type_code rules.
	helpers []*nft.Chain
}

// rendered is one rendered policy or profile chain and its helper chains.
type rendered struct {
	chain   *nft.Chain
	helpers []*nft.Chain
}

// renderChain renders rules as the chain name. A rule that cannot be
// rendered (an unparsable CIDR, an unknown IP set, a port without a port
// protocol…) makes the whole chain fail closed: one unconditional drop
// whose comment gives the error. Rendering the other rules would not be
// safe: a missing deny could open what the policy closes.
func renderChain(cfg render.Config, layer render.Layer, name, who string, rules []*proto.Rule, sets setTypes) (rendered, error) {
	r := &renderer{cfg: cfg, layer: layer, sets: sets, chain: name, who: who}
	var out []*nft.Rule
	for i, fr := range rules {
		rs, err := r.rule(i, fr)
		if err != nil {
			err = fmt.Errorf("%s rule %d: %w", who, i, err)
			return rendered{chain: failClosed(name, who+": fail closed: "+err.Error())}, err
		}
		out = append(out, rs...)
	}
	return rendered{chain: &nft.Chain{Name: name, Rules: out, Comment: nft.SanitizeComment(who)}, helpers: r.helpers}, nil
}

// failClosed returns a chain that drops everything. Drop rather than the
// configured reject: it stands for a policy we could not understand, and
// it must be legal in every layer (reject is not, in raw and mangle).
func failClosed(name, why string) *nft.Chain {
	return &nft.Chain{Name: name, Comment: nft.SanitizeComment(why), Rules: []*nft.Rule{{
		Action:  nft.Verdict{Kind: nft.Drop},
		Comment: nft.SanitizeComment(why),
	}}}
}

// parsedRule is a Felix rule with its fields parsed and checked, before it
// is split by family.
type parsedRule struct {
	action    string
	ipVersion proto.IPVersion
	proto     *uint8
	notProto  *uint8
	src, dst  side
	// dstIPPort are service IP+port sets (IP_AND_PORT), ORed.
	dstIPPort []string
	icmp      *nft.ICMP // family filled in per family
	notICMP   *nft.ICMP // a type only (nft.ICMP's Negate form)
	// notICMPCode is not_icmp_type_code: not (type T and code C), which
	// nft.ICMP cannot negate; rendered through a helper chain.
	notICMPCode *nft.ICMP
}

// side is the source or destination half of a rule.
type side struct {
	nets    []netip.Prefix // positive CIDRs, both families
	hasNets bool           // the positive list was not empty
	notNets []netip.Prefix
	ports   []nft.PortRange
	// namedPorts are IP_AND_PORT sets matched on this side's address,
	// protocol and port; ORed with ports.
	namedPorts    []string
	notPorts      []nft.PortRange
	notNamedPorts []string
	sets          []string // ORed
	notSets       []string
}

func (r *renderer) parse(fr *proto.Rule) (*parsedRule, error) {
	p := &parsedRule{ipVersion: fr.GetIpVersion()}
	switch a := fr.GetAction(); a {
	case "", actionAllow:
		p.action = actionAllow
	case actionDeny, actionLog:
		p.action = a
	case actionNextTier, actionPass:
		p.action = actionPass
	default:
		return nil, fmt.Errorf("unknown action %q", a)
	}
	switch p.ipVersion {
	case proto.IPVersion_ANY, proto.IPVersion_IPV4, proto.IPVersion_IPV6:
	default:
		return nil, fmt.Errorf("unknown ip_version %d", p.ipVersion)
	}
	var err error
	if p.proto, err = parseProtocol(fr.GetProtocol()); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	if p.notProto, err = parseProtocol(fr.GetNotProtocol()); err != nil {
		return nil, fmt.Errorf("not_protocol: %w", err)
	}

	if p.src, err = r.parseSide("src", fr.GetSrcNet(), fr.GetNotSrcNet(), fr.GetSrcPorts(), fr.GetNotSrcPorts(),
		fr.GetSrcIpSetIds(), fr.GetNotSrcIpSetIds(), fr.GetSrcNamedPortIpSetIds(), fr.GetNotSrcNamedPortIpSetIds()); err != nil {
		return nil, err
	}
	if p.dst, err = r.parseSide("dst", fr.GetDstNet(), fr.GetNotDstNet(), fr.GetDstPorts(), fr.GetNotDstPorts(),
		fr.GetDstIpSetIds(), fr.GetNotDstIpSetIds(), fr.GetDstNamedPortIpSetIds(), fr.GetNotDstNamedPortIpSetIds()); err != nil {
		return nil, err
	}
	for _, id := range dedupe(fr.GetDstIpPortSetIds()) {
		if err := r.checkSet("dst_ip_port_set_ids", id, proto.IPSetUpdate_IP_AND_PORT); err != nil {
			return nil, err
		}
		p.dstIPPort = append(p.dstIPPort, id)
	}

	hasPorts := len(p.src.ports)+len(p.src.notPorts)+len(p.dst.ports)+len(p.dst.notPorts) > 0
	if hasPorts && (p.proto == nil || !portProtos[*p.proto]) {
		return nil, fmt.Errorf("ports need protocol tcp, udp, sctp or udplite")
	}

	if fr.GetIcmp() != nil {
		m, err := icmpMatch(fr.GetIcmp())
		if err != nil {
			return nil, fmt.Errorf("icmp: %w", err)
		}
		p.icmp = &m
	}
	if fr.GetNotIcmp() != nil {
		m, err := icmpMatch(fr.GetNotIcmp())
		if err != nil {
			return nil, fmt.Errorf("not_icmp: %w", err)
		}
		m.Negate = true
		if m.Code != nil {
			p.notICMPCode = &m
		} else {
			p.notICMP = &m
		}
	}
	if p.icmp != nil || p.notICMP != nil || p.notICMPCode != nil {
		// The ICMP flavour decides the family; Felix's validation
		// guarantees the protocol (and derives ip_version from it).
		if p.proto == nil || (*p.proto != protoICMP && *p.proto != protoICMPv6) {
			return nil, fmt.Errorf("icmp type or code needs protocol icmp or icmpv6")
		}
	}
	return p, nil
}

func parseProtocol(pr *proto.Protocol) (*uint8, error) {
	if pr == nil || pr.GetNumberOrName() == nil {
		return nil, nil
	}
	switch v := pr.GetNumberOrName().(type) {
	case *proto.Protocol_Number:
		if v.Number < 0 || v.Number > 255 {
			return nil, fmt.Errorf("number %d out of range 0-255", v.Number)
		}
		n := uint8(v.Number)
		return &n, nil
	case *proto.Protocol_Name:
		name := strings.ToLower(v.Name)
		if n, ok := protoNumbers[name]; ok {
			return &n, nil
		}
		if n, err := strconv.ParseUint(name, 10, 8); err == nil {
			u := uint8(n)
			return &u, nil
		}
		return nil, fmt.Errorf("unknown protocol %q", v.Name)
	}
	return nil, fmt.Errorf("unknown protocol form %T", pr.GetNumberOrName())
}

// icmpMatch parses the icmp oneof (positive or negated form).
func icmpMatch(v any) (nft.ICMP, error) {
	var typ, code int32
	hasCode := false
	switch v := v.(type) {
	case *proto.Rule_IcmpType:
		typ = v.IcmpType
	case *proto.Rule_IcmpTypeCode:
		typ, code, hasCode = v.IcmpTypeCode.GetType(), v.IcmpTypeCode.GetCode(), true
	case *proto.Rule_NotIcmpType:
		typ = v.NotIcmpType
	case *proto.Rule_NotIcmpTypeCode:
		typ, code, hasCode = v.NotIcmpTypeCode.GetType(), v.NotIcmpTypeCode.GetCode(), true
	default:
		return nft.ICMP{}, fmt.Errorf("unknown form %T", v)
	}
	if typ < 0 || typ > 255 {
		return nft.ICMP{}, fmt.Errorf("type %d out of range 0-255", typ)
	}
	m := nft.ICMP{Type: uint8(typ)}
	if hasCode {
		if code < 0 || code > 255 {
			return nft.ICMP{}, fmt.Errorf("code %d out of range 0-255", code)
		}
		c := uint8(code)
		m.Code = &c
	}
	return m, nil
}

func (r *renderer) parseSide(name string, nets, notNets []string, ports, notPorts []*proto.PortRange,
	sets, notSets, named, notNamed []string) (side, error) {
	var s side
	var err error
	if s.nets, err = parseNets(nets); err != nil {
		return s, fmt.Errorf("%s_net: %w", name, err)
	}
	s.hasNets = len(nets) > 0
	if s.notNets, err = parseNets(notNets); err != nil {
		return s, fmt.Errorf("not_%s_net: %w", name, err)
	}
	if s.ports, err = parsePorts(ports); err != nil {
		return s, fmt.Errorf("%s_ports: %w", name, err)
	}
	if s.notPorts, err = parsePorts(notPorts); err != nil {
		return s, fmt.Errorf("not_%s_ports: %w", name, err)
	}
	for _, l := range []struct {
		field string
		ids   []string
		typ   proto.IPSetUpdate_IPSetType
		out   *[]string
	}{
		{name + "_ip_set_ids", sets, proto.IPSetUpdate_NET, &s.sets},
		{"not_" + name + "_ip_set_ids", notSets, proto.IPSetUpdate_NET, &s.notSets},
		{name + "_named_port_ip_set_ids", named, proto.IPSetUpdate_IP_AND_PORT, &s.namedPorts},
		{"not_" + name + "_named_port_ip_set_ids", notNamed, proto.IPSetUpdate_IP_AND_PORT, &s.notNamedPorts},
	} {
		for _, id := range dedupe(l.ids) {
			if err := r.checkSet(l.field, id, l.typ); err != nil {
				return s, err
			}
			*l.out = append(*l.out, id)
		}
	}
	return s, nil
}

// checkSet checks that Felix sent the set id and that its type fits the
// field: address fields take NET or IP sets (both are sets of addresses),
// named-port and service fields take IP_AND_PORT sets.
func (r *renderer) checkSet(field, id string, want proto.IPSetUpdate_IPSetType) error {
	typ, ok := r.sets(id)
	if !ok {
		return fmt.Errorf("%s: unknown IP set %q", field, id)
	}
	wantPorts := want == proto.IPSetUpdate_IP_AND_PORT
	if wantPorts != (typ == proto.IPSetUpdate_IP_AND_PORT) {
		need := "NET or IP"
		if wantPorts {
			need = "IP_AND_PORT"
		}
		return fmt.Errorf("%s: IP set %q has type %v, the field needs %s", field, id, typ, need)
	}
	return nil
}

func parseNets(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		p, err := felix.ParseNet(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePorts(prs []*proto.PortRange) ([]nft.PortRange, error) {
	var out []nft.PortRange
	for _, pr := range prs {
		first, last := pr.GetFirst(), pr.GetLast()
		if first < 0 || last > 65535 || first > last {
			return nil, fmt.Errorf("bad port range %d-%d", first, last)
		}
		out = append(out, nft.PortRange{First: uint16(first), Last: uint16(last)})
	}
	return mergePorts(out), nil
}

// mergePorts sorts ranges and merges those that overlap or touch: nft
// refuses overlapping elements in the anonymous interval set of a port
// list, and touching ones mean the same as their union.
func mergePorts(rs []nft.PortRange) []nft.PortRange {
	if len(rs) == 0 {
		return nil
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b nft.PortRange) int { return int(a.First) - int(b.First) })
	out := []nft.PortRange{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if int(r.First) <= int(last.Last)+1 {
			last.Last = max(last.Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// needsFamily reports whether the rule matches on anything that exists in
// one IP family only, so that it must be rendered once per family.
func (p *parsedRule) needsFamily() bool {
	if p.ipVersion != proto.IPVersion_ANY || p.icmp != nil || p.notICMP != nil || p.notICMPCode != nil || len(p.dstIPPort) > 0 {
		return true
	}
	for _, s := range []side{p.src, p.dst} {
		if s.hasNets || len(s.notNets) > 0 || len(s.sets) > 0 || len(s.notSets) > 0 ||
			len(s.namedPorts) > 0 || len(s.notNamedPorts) > 0 {
			return true
		}
	}
	return false
}

// slot is one position of a rule's match list: a single match, or (with
// several alternatives) an OR that expands the rule into variants.
type slot []nft.Match

// rule renders Felix rule i as nft rules.
//
// Shape. All criteria of a Felix rule are ANDed and the entries of a list
// are ORed. A list of CIDRs or ports is one match on an anonymous set. A
// list of IP sets, and "numeric ports OR named-port sets", cannot be one
// match, so each such OR is a slot of alternatives and the rule expands
// into one nft rule per combination (variant). For allow and pass, every
// variant sets the mark and one rule after them returns; for deny every
// variant drops. For log the variants are made disjoint (alternative k also
// requires "not any earlier alternative"), so a packet is logged once.
//
// Families. A rule that matches addresses, IP sets or ICMP types is
// rendered once per family it can match, as Felix's FilterRuleToIPVersion
// decides (felix/rules/policy.go): not at all for a family its ip_version
// excludes, nor for a family that one of its CIDR lists, positive or
// negated, has no entry of (the rule was written for the other family),
// nor for a family whose negated CIDRs include the catch-all (the rule can
// never match). IP sets do not decide the family: a set may hold members
// of both families at any time, so a set match is rendered against each
// family's half of the set, as Felix does with its per-family ipsets. A
// rule that matches on none of those is rendered once, for both families.
//
// With IPv6 off (render.Config.IPv6) the only family is IPv4, as for Felix,
// which then renders its IPv4 tables alone: a rule that needs a family is
// rendered for IPv4 or not at all, and every variant of it is pinned to
// IPv4 (pinFamilies), so no IPv6 packet matches it. A rule that needs no
// family is rendered once, unpinned, as with IPv6 on.
func (r *renderer) rule(i int, fr *proto.Rule) ([]*nft.Rule, error) {
	p, err := r.parse(fr)
	if err != nil {
		return nil, err
	}
	why := fmt.Sprintf("%s rule %d", r.who, i)
	if id := fr.GetRuleId(); id != "" {
		why += " id " + id
	}
	families := []nft.IPFamily{0}
	if p.needsFamily() {
		families = r.cfg.Families()
	}
	perFamily := map[nft.IPFamily][][]nft.Match{}
	total := 0
	for _, f := range families {
		slots, ok := r.slots(p, f)
		if !ok {
			continue
		}
		vs, err := expand(slots, p.action == actionLog)
		if err != nil {
			return nil, err
		}
		perFamily[f] = vs
		if total += len(vs); total > maxVariants {
			return nil, fmt.Errorf("expands to more than %d nft rules", maxVariants)
		}
	}
	variants := pinFamilies(families, perFamily)
	if len(variants) == 0 {
		return nil, nil
	}

	m := r.cfg.Marks
	var action nft.Action
	var bit uint32
	switch p.action {
	case actionAllow:
		action, bit = nft.SetMark{And: ^m.Accept, Xor: m.Accept}, m.Accept
	case actionPass:
		action, bit = nft.SetMark{And: ^m.Pass, Xor: m.Pass}, m.Pass
	case actionDeny:
		action = r.deny()
	case actionLog:
		action = nft.Log{Prefix: LogPrefix}
	}
	if p.notICMPCode != nil {
		action = nft.Verdict{Kind: nft.Jump, Chain: r.helper(i, p, action, why)}
	} else if sm, ok := action.(nft.SetMark); ok {
		// The policy decided: set the mark and return to the endpoint
		// chain, which reads it, in one rule. (A rule fewer per allow or
		// pass rule: each rule reachable from the base chains is walked
		// by the kernel's validation of every commit that adds rules,
		// which is most of the time a policy change takes on a large
		// node.)
		sm.Return = true
		action, bit = sm, 0
	}
	var out []*nft.Rule
	for _, v := range variants {
		out = append(out, &nft.Rule{Match: v, Action: action, Comment: nft.SanitizeComment(why)})
	}
	if bit != 0 {
		// The helper chain (not_icmp_type_code) set the mark: return to
		// the endpoint chain, which reads it. Accept and Pass are both clear when a policy chain is
		// entered (the endpoint chain clears them and only jumps while
		// they are), so the bit can only come from the rules above.
		word := map[string]string{actionAllow: "allowed", actionPass: "passed to next tier"}[p.action]
		out = append(out, &nft.Rule{
			Match:   []nft.Match{nft.Mark{Mask: bit, Value: bit}},
			Action:  nft.Verdict{Kind: nft.Return},
			Comment: nft.SanitizeComment(fmt.Sprintf("%s rule %d: return if %s", r.who, i, word)),
		})
	}
	return out, nil
}

// deny is the configured deny action of the layer: reject only in filter
// (reject is not allowed at postrouting, and before kernel 5.19 not at
// prerouting), drop everywhere else. render's endpoint chains do the same.
func (r *renderer) deny() nft.Action {
	if r.layer == render.LayerFilter && r.cfg.FilterDenyAction == render.ActionReject {
		return nft.Reject{}
	}
	return nft.Verdict{Kind: nft.Drop}
}

// helper returns the chain a not_icmp_type_code rule jumps to, creating it:
// a return for the excluded type and code, then the rule's action. nft has
// no negation of "type T and code C" as one match, and the two rules
// "type T and code C → skip" and "→ action" need a chain of their own to
// express "skip". The policy chain's mark-and-return rule after the jump
// still works: the helper only sets the mark.
func (r *renderer) helper(i int, p *parsedRule, action nft.Action, why string) string {
	name := helperChainName(r.chain, i)
	for _, h := range r.helpers {
		if h.Name == name {
			return name
		}
	}
	excl := *p.notICMPCode
	excl.Negate = false
	excl.Family = nft.IPv4
	if *p.proto == protoICMPv6 {
		excl.Family = nft.IPv6
	}
	r.helpers = append(r.helpers, &nft.Chain{Name: name, Comment: nft.SanitizeComment(why), Rules: []*nft.Rule{
		{Match: []nft.Match{excl}, Action: nft.Verdict{Kind: nft.Return}, Comment: nft.SanitizeComment(why + ": excluded icmp type and code")},
		{Action: action, Comment: nft.SanitizeComment(why)},
	}})
	return name
}

// slots returns the rule's match slots for family f (0: both families), or
// false when the rule cannot match in f.
func (r *renderer) slots(p *parsedRule, f nft.IPFamily) ([]slot, bool) {
	if f != 0 {
		if p.ipVersion != proto.IPVersion_ANY && int(p.ipVersion) != int(f) {
			return nil, false
		}
		if p.proto != nil && (p.icmp != nil || p.notICMP != nil || p.notICMPCode != nil) {
			if (*p.proto == protoICMP) != (f == nft.IPv4) {
				return nil, false
			}
		}
	}
	var slots []slot
	one := func(m nft.Match) { slots = append(slots, slot{m}) }
	if p.proto != nil {
		one(nft.L4Proto{Protos: []uint8{*p.proto}})
	}
	if p.notProto != nil {
		one(nft.L4Proto{Protos: []uint8{*p.notProto}, Negate: true})
	}
	for _, sd := range []struct {
		s   side
		dir nft.Direction
	}{{p.src, nft.In}, {p.dst, nft.Out}} {
		s, dir := sd.s, sd.dir
		if f != 0 {
			if s.hasNets {
				nets := nft.DisjointPrefixes(ofFamily(s.nets, f))
				if len(nets) == 0 {
					return nil, false // only other-family CIDRs
				}
				if !isCatchAll(nets) {
					one(nft.Addr{Family: f, Dir: dir, Prefixes: nets})
				}
			}
			if len(s.notNets) > 0 {
				nets := nft.DisjointPrefixes(ofFamily(s.notNets, f))
				if len(nets) == 0 {
					// Only other-family CIDRs: the rule was written for
					// the other family (Calico rejects mixed lists), so
					// it does not exist in this one. Leaving the match
					// out instead would turn "tcp from anywhere but
					// 10.0.0.0/8" into "tcp from anywhere" here.
					return nil, false
				}
				if isCatchAll(nets) {
					return nil, false // "not anywhere": never matches
				}
				one(nft.Addr{Family: f, Dir: dir, Prefixes: nets, Negate: true})
			}
			if len(s.sets) > 0 {
				var alts slot
				for _, id := range s.sets {
					alts = append(alts, nft.Addr{Family: f, Dir: dir, Set: IPSetName(id, f)})
				}
				slots = append(slots, alts)
			}
			for _, id := range s.notSets {
				one(nft.Addr{Family: f, Dir: dir, Set: IPSetName(id, f), Negate: true})
			}
		}
		var alts slot
		if len(s.ports) > 0 {
			alts = append(alts, nft.Port{Dir: dir, Ranges: s.ports})
		}
		if f != 0 {
			for _, id := range s.namedPorts {
				alts = append(alts, namedPortLookup(f, dir, id, false))
			}
		}
		if len(alts) > 0 {
			slots = append(slots, alts)
		}
		if len(s.notPorts) > 0 {
			one(nft.Port{Dir: dir, Ranges: s.notPorts, Negate: true})
		}
		if f != 0 {
			for _, id := range s.notNamedPorts {
				one(namedPortLookup(f, dir, id, true))
			}
		}
	}
	if f != 0 && len(p.dstIPPort) > 0 {
		var alts slot
		for _, id := range p.dstIPPort {
			alts = append(alts, namedPortLookup(f, nft.Out, id, false))
		}
		slots = append(slots, alts)
	}
	if p.icmp != nil {
		m := *p.icmp
		m.Family = f
		one(m)
	}
	if p.notICMP != nil {
		m := *p.notICMP
		m.Family = f
		one(m)
	}
	return slots, true
}

// pinFamilies turns the per-family variants of a rule into its nft rules.
// A variant whose matches imply its family (an address, a lookup of
// addresses, an ICMP type) stays as it is. One that does not (numeric ports
// as the alternative to a named-port set, or a rule limited only by
// ip_version or other-family negations) would match the other family too:
// if the other family has the very same variant it is written once for
// both, otherwise it gets a `meta nfproto` match. With IPv6 off there are
// no IPv6 variants, so every such IPv4 variant is pinned: "tcp dport 80 or
// named port web" must not let IPv6 to port 80 through when nothing is
// rendered for IPv6.
func pinFamilies(families []nft.IPFamily, perFamily map[nft.IPFamily][][]nft.Match) [][]nft.Match {
	if len(families) == 1 && families[0] == 0 {
		return perFamily[0]
	}
	var out [][]nft.Match
	for _, f := range families {
		other := nft.IPv6
		if f == nft.IPv6 {
			other = nft.IPv4
		}
		for _, v := range perFamily[f] {
			switch {
			case pinned(v):
				out = append(out, v)
			case slices.ContainsFunc(perFamily[other], func(o []nft.Match) bool { return !pinned(o) && reflect.DeepEqual(o, v) }):
				// Both families have it: write it once, unpinned, with
				// the IPv4 variants (families are in the order v4, v6).
				if f == nft.IPv4 {
					out = append(out, v)
				}
			case icmpProto(v):
				// nft lists `meta nfproto ipv4 meta l4proto icmp` without
				// the nfproto (it takes it for the protocol's dependency),
				// which the printer does not model; after the protocol it
				// lists as written.
				out = append(out, append(slices.Clip(v), nft.NFProto{Family: f}))
			default:
				out = append(out, append([]nft.Match{nft.NFProto{Family: f}}, v...))
			}
		}
	}
	return out
}

// icmpProto reports whether v's first match is `meta l4proto icmp` or
// `icmpv6`.
func icmpProto(v []nft.Match) bool {
	if len(v) == 0 {
		return false
	}
	l4, ok := v[0].(nft.L4Proto)
	return ok && !l4.Negate && len(l4.Protos) == 1 && (l4.Protos[0] == protoICMP || l4.Protos[0] == protoICMPv6)
}

// pinned reports whether a match list implies an IP family.
func pinned(v []nft.Match) bool {
	for _, m := range v {
		switch m.(type) {
		case nft.Addr, nft.ICMP, nft.Lookup, nft.NFProto:
			return true
		}
	}
	return false
}

// namedPortLookup matches the address, protocol and port of one side
// against an IP_AND_PORT set: `ip daddr . meta l4proto . th dport @set`.
func namedPortLookup(f nft.IPFamily, dir nft.Direction, id string, negate bool) nft.Lookup {
	addr, port := nft.SelIPSaddr, nft.SelTHSport
	if dir == nft.Out {
		addr, port = nft.SelIPDaddr, nft.SelTHDport
	}
	if f == nft.IPv6 {
		addr = map[nft.Selector]nft.Selector{nft.SelIPSaddr: nft.SelIP6Saddr, nft.SelIPDaddr: nft.SelIP6Daddr}[addr]
	}
	return nft.Lookup{Keys: []nft.Selector{addr, nft.SelL4Proto, port}, Set: IPSetName(id, f), Negate: negate}
}

func ofFamily(ps []netip.Prefix, f nft.IPFamily) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if familyOf(p) == f {
			out = append(out, p)
		}
	}
	return out
}

// isCatchAll reports whether a disjoint prefix list is the whole family
// (0.0.0.0/0 or ::/0).
func isCatchAll(ps []netip.Prefix) bool { return len(ps) == 1 && ps[0].Bits() == 0 }

// expand returns every combination of one alternative per slot. With
// disjoint, alternative k of a slot also carries the negation of the
// alternatives before it, so that exactly one variant matches a packet.
func expand(slots []slot, disjoint bool) ([][]nft.Match, error) {
	n := 1
	for _, s := range slots {
		n *= len(s)
		if n > maxVariants {
			return nil, fmt.Errorf("expands to more than %d nft rules", maxVariants)
		}
	}
	out := [][]nft.Match{nil}
	for _, s := range slots {
		var next [][]nft.Match
		for _, prefix := range out {
			for k, alt := range s {
				v := slices.Clip(prefix)
				if disjoint {
					for _, earlier := range s[:k] {
						v = append(v, negate(earlier))
					}
				}
				next = append(next, append(v, alt))
			}
		}
		out = next
	}
	return out, nil
}

// negate returns the negation of an alternative (an address, port or
// lookup match: the only kinds slots hold).
func negate(m nft.Match) nft.Match {
	switch m := m.(type) {
	case nft.Addr:
		m.Negate = !m.Negate
		return m
	case nft.Port:
		m.Negate = !m.Negate
		return m
	case nft.Lookup:
		m.Negate = !m.Negate
		return m
	}
	panic(fmt.Sprintf("policy: cannot negate %T", m))
}

// setIDs returns every IP set a list of rules names.
func setIDs(rules []*proto.Rule) []string {
	var out []string
	for _, r := range rules {
		for _, l := range [][]string{
			r.GetSrcIpSetIds(), r.GetDstIpSetIds(), r.GetNotSrcIpSetIds(), r.GetNotDstIpSetIds(),
			r.GetSrcNamedPortIpSetIds(), r.GetDstNamedPortIpSetIds(),
			r.GetNotSrcNamedPortIpSetIds(), r.GetNotDstNamedPortIpSetIds(), r.GetDstIpPortSetIds(),
		} {
			out = append(out, l...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
