// Package tracer walks a packet through an nft.Model the way the kernel's
// nf_tables would, and says which rule decided its fate.
//
// It takes the base chains of each hook on the packet's path in priority
// order (an accept ends only its own base chain; a drop or reject ends the
// packet), and inside a base chain follows verdict maps, jump, goto and
// return, named and anonymous set lookups with the set's real elements, mark
// set and test, the reverse-path check and notrack. It knows exactly the
// rule vocabulary of package nft; a rule it cannot evaluate (a foreign
// expression another program added, say) stops the walk with an *Error
// naming the rule, so it never guesses.
//
// What the rules cannot know from the packet itself is part of the Packet:
// the path routing chose (input, forward or output), the interfaces, the
// conntrack state and whether the reverse-path check would fail. The caller
// (nftep explain) takes those from the kernel of the namespace in question.
package tracer

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nftep/nftep/nft"
)

// Path is the route a packet takes through the host, which decides the
// hooks it crosses.
type Path string

const (
	// Input: the packet is addressed to the host (prerouting, input).
	Input Path = "input"
	// Forward: the host routes the packet on (prerouting, forward,
	// postrouting).
	Forward Path = "forward"
	// Output: the host sends the packet (output, postrouting).
	Output Path = "output"
)

// Hooks returns the netfilter hooks a packet on path p crosses, in order.
func (p Path) Hooks() []nft.Hook {
	switch p {
	case Input:
		return []nft.Hook{nft.HookPrerouting, nft.HookInput}
	case Forward:
		return []nft.Hook{nft.HookPrerouting, nft.HookForward, nft.HookPostrouting}
	case Output:
		return []nft.Hook{nft.HookOutput, nft.HookPostrouting}
	}
	return nil
}

// Protocol numbers the tracer looks inside.
const (
	ProtoICMP   uint8 = 1
	ProtoTCP    uint8 = 6
	ProtoUDP    uint8 = 17
	ProtoICMPv6 uint8 = 58
	ProtoSCTP   uint8 = 132
)

// Packet is the part of a packet, and of its kernel context, that nftep's
// rules look at.
type Packet struct {
	Path Path
	// IIF and OIF are the input and output interface names; IIF is empty
	// on the output path, OIF on the input path.
	IIF, OIF string
	// Src and Dst are the addresses; their family is the packet's.
	Src, Dst netip.Addr
	// Proto is the layer-4 protocol (ProtoTCP, …).
	Proto uint8
	// SPort and DPort are the ports of TCP, UDP and SCTP.
	SPort, DPort uint16
	// ICMPType and ICMPCode are those of ICMP and ICMPv6.
	ICMPType, ICMPCode uint8
	// Ct is the conntrack state; 0 means new.
	Ct nft.CtState
	// DNAT says the connection was destination-NATed (ct status dnat).
	DNAT bool
	// RPFFail says the strict reverse-path check fails: the route back to
	// Src does not leave through IIF.
	RPFFail bool
	// Mark is the packet mark on arrival.
	Mark uint32
	// Local lists the host's addresses, and OIFAddrs those of the output
	// interface (its first address of the packet's family is what a
	// masquerade picks): what `fib … type local` and masquerade need.
	// With LocalKnown false a rule that needs them cannot be evaluated.
	Local, OIFAddrs []netip.Addr
	LocalKnown      bool
}

// family is the packet's IP family.
func (p *Packet) family() nft.IPFamily {
	if p.Src.Is4() {
		return nft.IPv4
	}
	return nft.IPv6
}

// String describes the packet in one line.
func (p *Packet) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", p.Path, protoName(p.Proto))
	switch p.Proto {
	case ProtoTCP, ProtoUDP, ProtoSCTP:
		fmt.Fprintf(&b, " %s:%d → %s:%d", hostPort(p.Src), p.SPort, hostPort(p.Dst), p.DPort)
	case ProtoICMP, ProtoICMPv6:
		fmt.Fprintf(&b, " %s → %s type %d code %d", p.Src, p.Dst, p.ICMPType, p.ICMPCode)
	default:
		fmt.Fprintf(&b, " %s → %s", p.Src, p.Dst)
	}
	if p.IIF != "" {
		fmt.Fprintf(&b, " iif %s", p.IIF)
	}
	if p.OIF != "" {
		fmt.Fprintf(&b, " oif %s", p.OIF)
	}
	fmt.Fprintf(&b, " ct %s", ctName(p.ct()))
	if p.Mark != 0 {
		fmt.Fprintf(&b, " mark %#08x", p.Mark)
	}
	if p.RPFFail {
		b.WriteString(" (reverse path fails)")
	}
	return b.String()
}

func (p *Packet) ct() nft.CtState {
	if p.Ct == 0 {
		return nft.CtStateNew
	}
	return p.Ct
}

func hostPort(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// Step is one rule the packet was evaluated against, or a base chain's
// policy.
type Step struct {
	// Hook and Chain say where: Chain is the chain holding the rule, Hook
	// the hook of the base chain the walk started from.
	Hook  nft.Hook
	Chain string
	// Index is the rule's position in Chain (0 is the first), or -1 for
	// the policy of base chain Chain.
	Index int
	// Rule is the rule; nil for a policy.
	Rule *nft.Rule
	// Matched says every match of the rule held.
	Matched bool
	// Failed are the matches that did not hold (all of them, not only the
	// first, so that a caller can tell a near miss).
	Failed []nft.Match
	// Outcome is what a matched rule, or the policy, did: "accept",
	// "drop", "reject", "jump X", "goto X", "return", "mark set 0x…"
	// ("mark set 0x…, return" for a mark set that returns),
	// "notrack", "log", or "" (a verdict map without an element for the
	// packet, or a rule with no action).
	Outcome string
	// MarkBefore and MarkAfter are the packet mark before and after the
	// rule.
	MarkBefore, MarkAfter uint32
}

// RuleRef names a rule by its chain and position.
type RuleRef struct {
	Chain string
	Index int
}

func (s *Step) ref() RuleRef { return RuleRef{s.Chain, s.Index} }

// Result is where the packet ended up.
type Result struct {
	// Verdict is "accept" (it passed every hook), "drop" or "reject".
	Verdict string
	// Mark is the mark the packet left with.
	Mark uint32
	// Notrack says a notrack statement ran.
	Notrack bool
	// NAT is the source NAT the packet got (nil: none), and NATStep the
	// index in Steps of the rule that did it.
	NAT     *NAT
	NATStep int
	// Steps are every rule evaluated, in order, and the policies applied.
	Steps []Step
	// Decider is the index in Steps of the rule or policy that decided the
	// verdict: the drop or reject, or for an accepted packet the last
	// accept in the hook that filters its path (input, forward or
	// output). -1 when no rule decided (every base chain fell through to
	// an accept policy without a rule accepting).
	Decider int
	// Cause is the index in Steps of the rule that set the mark the
	// deciding rule tested, when it accepted on a mark (nftep's policy
	// rules set an accept bit that the base chain turns into the verdict):
	// the policy or profile rule that allowed the packet. -1 otherwise.
	Cause int
}

// NAT is a source NAT applied to the packet: a masquerade or snat. Only the
// first packet of a connection meets the nat chains; the others follow it.
type NAT struct {
	// Kind is "masquerade" or "snat".
	Kind string
	// To is the new source address; invalid when a masquerade's output
	// interface has no address of the family (the kernel then drops the
	// packet) or the tracer was not told the interface's addresses.
	To netip.Addr
	// Ports is the source port range, when the rule gives one.
	Ports *nft.PortRange
	// FullyRandom says the port is chosen fully at random.
	FullyRandom bool
}

// Causing returns the step that set the deciding mark, or nil.
func (r *Result) Causing() *Step {
	if r.Cause < 0 {
		return nil
	}
	return &r.Steps[r.Cause]
}

// Deciding returns the step that decided, or nil.
func (r *Result) Deciding() *Step {
	if r.Decider < 0 {
		return nil
	}
	return &r.Steps[r.Decider]
}

// Error is a rule the tracer cannot evaluate.
type Error struct {
	Chain  string
	Index  int
	Rule   string // the rule in nft syntax
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cannot evaluate: chain %s rule %d: %s: %s", e.Chain, e.Index+1, e.Rule, e.Reason)
}

// maxSteps bounds one walk: nftables refuses loops, but a model handed to
// the tracer has not been through the kernel.
const maxSteps = 1 << 20

// Trace runs p through m.
func Trace(m *nft.Model, p Packet) (*Result, error) {
	return trace(m, p, nil)
}

func trace(m *nft.Model, p Packet, force map[RuleRef]bool) (*Result, error) {
	if !p.Src.IsValid() || !p.Dst.IsValid() || p.Src.Is4() != p.Dst.Is4() {
		return nil, fmt.Errorf("packet %s → %s: need a source and a destination address of one family", p.Src, p.Dst)
	}
	hooks := p.Path.Hooks()
	if hooks == nil {
		return nil, fmt.Errorf("packet path %q: want input, forward or output", p.Path)
	}
	tr := &walk{m: m, p: p, force: force, res: &Result{Mark: p.Mark, Decider: -1, Cause: -1, NATStep: -1}}
	filterHook := hooks[len(hooks)-1]
	if p.Path == Forward {
		filterHook = nft.HookForward
	} else if p.Path == Output {
		filterHook = nft.HookOutput
	}
	for _, hook := range hooks {
		for _, base := range baseChains(m, hook) {
			// A nat chain sees the first packet of a connection only
			// (and none that is untracked).
			if base.Base.Type == nft.ChainTypeNAT && (p.ct() != nft.CtStateNew || tr.res.Notrack) {
				continue
			}
			v, at, err := tr.run(hook, base)
			if err != nil {
				return nil, err
			}
			switch v {
			case "drop", "reject":
				tr.res.Verdict, tr.res.Decider = v, at
				return tr.res, nil
			case "accept":
				if hook == filterHook && at >= 0 && tr.res.Steps[at].Index >= 0 {
					tr.res.Decider = at
				}
			}
		}
	}
	tr.res.Verdict = "accept"
	tr.res.Cause = cause(tr.res)
	return tr.res, nil
}

// cause finds the rule that made the deciding rule's mark test hold: the
// last rule before it that changed the mark from one the test refuses to
// one it accepts.
func cause(res *Result) int {
	d := res.Deciding()
	if d == nil || d.Rule == nil {
		return -1
	}
	var marks []nft.Mark
	for _, m := range d.Rule.Match {
		if m, ok := m.(nft.Mark); ok {
			marks = append(marks, m)
		}
	}
	if len(marks) == 0 {
		return -1
	}
	holds := func(mark uint32) bool {
		for _, m := range marks {
			mask := m.Mask
			if mask == 0 {
				mask = ^uint32(0)
			}
			if (mark&mask == m.Value) == m.Negate {
				return false
			}
		}
		return true
	}
	for i := res.Decider - 1; i >= 0; i-- {
		st := &res.Steps[i]
		if st.Matched && st.MarkBefore != st.MarkAfter && !holds(st.MarkBefore) && holds(st.MarkAfter) {
			return i
		}
	}
	return -1
}

// baseChains returns m's base chains at hook in priority order (by name
// where priorities tie, which the kernel orders by creation).
func baseChains(m *nft.Model, hook nft.Hook) []*nft.Chain {
	var out []*nft.Chain
	for _, n := range m.ChainNames() {
		if c := m.Chain(n); c.Base != nil && c.Base.Hook == hook {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *nft.Chain) int { return a.Base.Priority - b.Base.Priority })
	return out
}

type walk struct {
	m     *nft.Model
	p     Packet
	force map[RuleRef]bool
	res   *Result
	steps int
}

type frame struct {
	chain *nft.Chain
	next  int
}

// run evaluates one base chain. It returns "accept" (go on to the next base
// chain: an accept verdict or the accept policy), "drop" or "reject", and
// the index of the step that said so.
func (w *walk) run(hook nft.Hook, base *nft.Chain) (string, int, error) {
	stack := []frame{{chain: base}}
	for {
		if w.steps++; w.steps > maxSteps {
			return "", 0, fmt.Errorf("chain %s: more than %d rules evaluated for one packet (a loop?)", base.Name, maxSteps)
		}
		if len(stack) == 0 {
			policy := string(base.Base.Policy)
			if policy == "" {
				policy = string(nft.PolicyAccept)
			}
			w.res.Steps = append(w.res.Steps, Step{Hook: hook, Chain: base.Name, Index: -1, Matched: true, Outcome: policy, MarkBefore: w.res.Mark, MarkAfter: w.res.Mark})
			return policy, len(w.res.Steps) - 1, nil
		}
		top := &stack[len(stack)-1]
		if top.next >= len(top.chain.Rules) {
			stack = stack[:len(stack)-1] // the end of a chain returns
			continue
		}
		idx := top.next
		r := top.chain.Rules[idx]
		top.next++
		step := Step{Hook: hook, Chain: top.chain.Name, Index: idx, Rule: r, MarkBefore: w.res.Mark, MarkAfter: w.res.Mark}
		for _, m := range r.Match {
			ok, err := w.match(m)
			if err != nil {
				return "", 0, &Error{Chain: top.chain.Name, Index: idx, Rule: r.String(), Reason: err.Error()}
			}
			if !ok {
				step.Failed = append(step.Failed, m)
			}
		}
		step.Matched = len(step.Failed) == 0 || w.force[step.ref()]
		if !step.Matched {
			w.res.Steps = append(w.res.Steps, step)
			continue
		}
		v, outcome, err := w.act(r.Action)
		if err != nil {
			return "", 0, &Error{Chain: top.chain.Name, Index: idx, Rule: r.String(), Reason: err.Error()}
		}
		step.Outcome, step.MarkAfter = outcome, w.res.Mark
		w.res.Steps = append(w.res.Steps, step)
		at := len(w.res.Steps) - 1
		if v == nil {
			continue
		}
		if outcome == "reject" {
			return "reject", at, nil
		}
		switch v.Kind {
		case nft.Accept:
			return "accept", at, nil
		case nft.Drop:
			return "drop", at, nil
		case nft.Return:
			stack = stack[:len(stack)-1]
		case nft.Jump, nft.Goto:
			c := w.m.Chain(v.Chain)
			if c == nil {
				return "", 0, &Error{Chain: top.chain.Name, Index: idx, Rule: r.String(), Reason: fmt.Sprintf("%s to chain %q, which does not exist", v.Kind, v.Chain)}
			}
			if v.Kind == nft.Goto {
				stack = stack[:len(stack)-1]
			}
			stack = append(stack, frame{chain: c})
		default:
			return "", 0, &Error{Chain: top.chain.Name, Index: idx, Rule: r.String(), Reason: fmt.Sprintf("verdict %q", v.Kind)}
		}
	}
}

// rejectVerdict stands for a reject: it ends the packet like a drop.
var rejectVerdict = nft.Verdict{Kind: nft.Drop}

// returnVerdict ends a rule that sets the mark and returns.
var returnVerdict = nft.Verdict{Kind: nft.Return}

// natVerdict: a nat statement ends its base chain with an accept.
var natVerdict = nft.Verdict{Kind: nft.Accept}

// act runs a matched rule's action and returns the verdict it leads to (nil
// to go on with the next rule) and what it did.
func (w *walk) act(a nft.Action) (*nft.Verdict, string, error) {
	switch a := a.(type) {
	case nil:
		return nil, "", nil
	case nft.Verdict:
		return &a, verdictString(a), nil
	case nft.VMap:
		v, err := w.vmap(a)
		if err != nil || v == nil {
			return nil, "", err
		}
		return v, verdictString(*v), nil
	case nft.SetMark:
		w.res.Mark = w.res.Mark&a.And ^ a.Xor
		if a.Return {
			return &returnVerdict, fmt.Sprintf("mark set %#08x, return", w.res.Mark), nil
		}
		return nil, fmt.Sprintf("mark set %#08x", w.res.Mark), nil
	case nft.SetMarkFromMap:
		s := w.m.Set(a.Map)
		if s == nil {
			return nil, "", fmt.Errorf("map %q does not exist", a.Map)
		}
		v, err := w.selector(a.Key)
		if err != nil || v == "" {
			return nil, "", err
		}
		e, ok, err := s.Lookup(v)
		if err != nil {
			return nil, "", err
		}
		if !ok {
			// The kernel's map lookup without an element ends the
			// rule (NFT_BREAK): the mark stays.
			return nil, "", nil
		}
		w.res.Mark = e.Mark
		return nil, fmt.Sprintf("mark set %#08x", w.res.Mark), nil
	case nft.Notrack:
		w.res.Notrack = true
		return nil, "notrack", nil
	case nft.NFLog, nft.Log:
		return nil, "log", nil
	case nft.Reject:
		return &rejectVerdict, "reject", nil
	case nft.Masquerade:
		n := &NAT{Kind: "masquerade", Ports: a.Ports, FullyRandom: a.FullyRandom}
		if w.p.LocalKnown {
			for _, x := range w.p.OIFAddrs {
				if x.Is4() == w.p.Src.Is4() && !x.IsLinkLocalUnicast() {
					n.To = x
					break
				}
			}
		}
		w.res.NAT, w.res.NATStep = n, len(w.res.Steps)
		return &natVerdict, "masquerade", nil
	case nft.SNAT:
		if a.Addr.Is4() != w.p.Src.Is4() {
			// The kernel's nat expression of the other family does
			// nothing to this packet.
			return nil, "", nil
		}
		w.res.NAT, w.res.NATStep = &NAT{Kind: "snat", To: a.Addr, Ports: a.Ports, FullyRandom: a.FullyRandom}, len(w.res.Steps)
		return &natVerdict, "snat", nil
	}
	return nil, "", fmt.Errorf("action %T is not one the tracer knows", a)
}

func verdictString(v nft.Verdict) string {
	if v.Kind == nft.Jump || v.Kind == nft.Goto {
		return string(v.Kind) + " " + v.Chain
	}
	return string(v.Kind)
}

// vmap looks the packet up in a verdict map; nil means no element.
func (w *walk) vmap(a nft.VMap) (*nft.Verdict, error) {
	s := w.m.Set(a.Map)
	if s == nil {
		return nil, fmt.Errorf("verdict map %q does not exist", a.Map)
	}
	var key string
	if a.Key == nft.SelMark {
		mask := a.Mask
		if mask == 0 {
			mask = ^uint32(0)
		}
		key = fmt.Sprintf("%#08x", w.res.Mark&mask)
	} else {
		var err error
		if key, err = w.selector(a.Key); err != nil {
			return nil, err
		}
	}
	if key == "" { // no such interface on this path: no element matches
		return nil, nil
	}
	e, ok, err := s.Lookup(key)
	if err != nil || !ok {
		return nil, err
	}
	return e.Verdict, nil
}

// selector is the packet's value of k, as an element key field.
func (w *walk) selector(k nft.Selector) (string, error) {
	p := &w.p
	switch k {
	case nft.SelIIFName:
		return p.IIF, nil
	case nft.SelOIFName:
		return p.OIF, nil
	case nft.SelIPSaddr, nft.SelIP6Saddr:
		return p.Src.String(), nil
	case nft.SelIPDaddr, nft.SelIP6Daddr:
		return p.Dst.String(), nil
	case nft.SelL4Proto:
		return strconv.Itoa(int(p.Proto)), nil
	case nft.SelTHSport:
		return strconv.Itoa(int(p.SPort)), nil
	case nft.SelTHDport:
		return strconv.Itoa(int(p.DPort)), nil
	case nft.SelMark:
		return fmt.Sprintf("%#08x", w.res.Mark), nil
	}
	return "", fmt.Errorf("selector %q is not one the tracer knows", k)
}

// selectorApplies says whether the packet has the field k loads at all: an
// IPv4 selector on an IPv6 packet, or a port on ICMP, makes the kernel's
// rule stop (the family or protocol dependency fails).
func (w *walk) selectorApplies(k nft.Selector) bool {
	switch k {
	case nft.SelIPSaddr, nft.SelIPDaddr:
		return w.p.family() == nft.IPv4
	case nft.SelIP6Saddr, nft.SelIP6Daddr:
		return w.p.family() == nft.IPv6
	case nft.SelTHSport, nft.SelTHDport:
		return hasPorts(w.p.Proto)
	}
	return true
}

func hasPorts(proto uint8) bool {
	return proto == ProtoTCP || proto == ProtoUDP || proto == ProtoSCTP
}

// match evaluates one match against the packet.
func (w *walk) match(m nft.Match) (bool, error) {
	p := &w.p
	switch m := m.(type) {
	case nft.IfName:
		name := p.IIF
		if m.Dir == nft.Out {
			name = p.OIF
		}
		ok := name == m.Name
		if m.Wildcard {
			ok = name != "" && strings.HasPrefix(name, m.Name)
		}
		return ok != m.Negate, nil
	case nft.NFProto:
		return m.Family == p.family(), nil
	case nft.Addr:
		// An address of the other family stops the rule whatever the
		// negation: the kernel's family dependency fails first.
		if m.Family != p.family() {
			return false, nil
		}
		a := p.Src
		if m.Dir == nft.Out {
			a = p.Dst
		}
		if m.Set != "" {
			in, err := w.inSet(m.Set, a.String())
			return in != m.Negate, err
		}
		in := false
		for _, pfx := range m.Prefixes {
			in = in || pfx.Contains(a)
		}
		return in != m.Negate, nil
	case nft.L4Proto:
		return slices.Contains(m.Protos, p.Proto) != m.Negate, nil
	case nft.Port:
		if !hasPorts(p.Proto) {
			return false, nil
		}
		port := p.SPort
		if m.Dir == nft.Out {
			port = p.DPort
		}
		if m.Set != "" {
			in, err := w.inSet(m.Set, strconv.Itoa(int(port)))
			return in != m.Negate, err
		}
		in := false
		for _, r := range m.Ranges {
			in = in || (port >= r.First && port <= r.Last)
		}
		return in != m.Negate, nil
	case nft.ICMP:
		want := ProtoICMP
		if m.Family == nft.IPv6 {
			want = ProtoICMPv6
		}
		if p.Proto != want {
			return false, nil
		}
		ok := p.ICMPType == m.Type && (m.Code == nil || *m.Code == p.ICMPCode)
		return ok != m.Negate, nil
	case nft.CtStateMatch:
		st := p.ct()
		if w.res.Notrack {
			st = nft.CtStateUntracked
		}
		return (st&m.States != 0) != m.Negate, nil
	case nft.CtStatusMatch:
		var st nft.CtStatus
		if p.DNAT {
			st |= nft.CtStatusDNAT
		}
		return (st&m.Status != 0) != m.Negate, nil
	case nft.CtCount:
		// One probe is one connection: never over a connection limit.
		return false, nil
	case nft.Limit:
		// One probe is never over a rate limit.
		return false, nil
	case nft.Mark:
		mask := m.Mask
		if mask == 0 {
			mask = ^uint32(0)
		}
		return (w.res.Mark&mask == m.Value) != m.Negate, nil
	case nft.FibLocal:
		if !w.p.LocalKnown {
			return false, fmt.Errorf("fib address type: the host's addresses were not given")
		}
		a := w.p.Dst
		if m.Dir == nft.In {
			a = w.p.Src
		}
		set := w.p.Local
		if m.OIF {
			set = w.p.OIFAddrs
		}
		return slices.Contains(set, a) != m.Negate, nil
	case nft.RPF:
		// `fib saddr . mark . iif oif 0`: no route back through iif.
		return p.RPFFail, nil
	case nft.Lookup:
		vals := make([]string, len(m.Keys))
		for i, k := range m.Keys {
			if !w.selectorApplies(k) {
				return false, nil
			}
			v, err := w.selector(k)
			if err != nil {
				return false, err
			}
			vals[i] = v
		}
		in, err := w.inSet(m.Set, vals...)
		return in != m.Negate, err
	case nft.ARPOperation, nft.ARPSenderIP:
		return false, fmt.Errorf("an ARP match in a table for IP packets")
	case nft.Foreign:
		return false, fmt.Errorf("expression %q is not one nftep emits", m.Text)
	}
	return false, fmt.Errorf("match %T is not one the tracer knows", m)
}

func (w *walk) inSet(name string, vals ...string) (bool, error) {
	s := w.m.Set(name)
	if s == nil {
		return false, fmt.Errorf("set %q does not exist", name)
	}
	if slices.Contains(vals, "") { // no such interface on this path
		return false, nil
	}
	_, ok, err := s.Lookup(vals...)
	return ok, err
}

func protoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoICMP:
		return "icmp"
	case ProtoICMPv6:
		return "icmpv6"
	case ProtoSCTP:
		return "sctp"
	case 4:
		return "ipip"
	}
	return "proto " + strconv.Itoa(int(p))
}

func ctName(s nft.CtState) string {
	var names []string
	for _, n := range []struct {
		s    nft.CtState
		name string
	}{{nft.CtStateInvalid, "invalid"}, {nft.CtStateEstablished, "established"}, {nft.CtStateRelated, "related"}, {nft.CtStateNew, "new"}, {nft.CtStateUntracked, "untracked"}} {
		if s&n.s != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}
