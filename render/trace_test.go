package render

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
)

// The packet tracer walks a packet through a rendered model the way the
// kernel would: the base chains of each hook on the packet's path in
// priority order (an accept ends only its own base chain), following
// verdict maps, jump, goto and return, and carrying the mark between chains.
// It knows exactly the vocabulary of package nft and fails the test on
// anything it cannot evaluate, so a new rule shape cannot silently pass.

// path is the sequence of hooks a packet crosses.
type path string

const (
	pathInput   path = "input"   // arrives at the host: prerouting, input
	pathForward path = "forward" // routed through: prerouting, forward, postrouting
	pathOutput  path = "output"  // sent by the host: output, postrouting
)

var pathHooks = map[path][]nft.Hook{
	pathInput:   {nft.HookPrerouting, nft.HookInput},
	pathForward: {nft.HookPrerouting, nft.HookForward, nft.HookPostrouting},
	pathOutput:  {nft.HookOutput, nft.HookPostrouting},
}

// packet is the part of a packet and its kernel context the rules look at.
type packet struct {
	path     path
	iif, oif string
	src, dst string // addresses; the family follows from src
	proto    uint8  // 6 tcp, 17 udp, 58 icmpv6, 4 ipip
	sport    uint16
	dport    uint16
	icmpType uint8
	ct       nft.CtState // conntrack state; 0 means new
	dnat     bool        // conntrack status has dnat
	rpfFail  bool        // the strict reverse-path check fails
	mark     uint32      // the mark on arrival
}

// traceResult is where a packet ended up.
type traceResult struct {
	verdict string   // "accept" (passed every hook), "drop" or "reject"
	mark    uint32   // the final mark
	notrack bool     // a notrack statement ran
	steps   []string // every rule evaluated, "chain[i] comment (matched)"
	// firstRuleOf maps a chain to the step index at which its first rule
	// was evaluated (for dispatch-cost assertions).
	firstRuleOf map[string]int
}

func (r traceResult) String() string {
	return fmt.Sprintf("%s (mark %#x)\n  %s", r.verdict, r.mark, strings.Join(r.steps, "\n  "))
}

type tracer struct {
	t   testing.TB
	m   *nft.Model
	p   packet
	src netip.Addr
	dst netip.Addr
	res traceResult
}

// tracePacket runs p through m.
func tracePacket(t testing.TB, m *nft.Model, p packet) traceResult {
	t.Helper()
	tr := &tracer{t: t, m: m, p: p, res: traceResult{mark: p.mark, firstRuleOf: map[string]int{}}}
	var err error
	if tr.src, err = netip.ParseAddr(p.src); err != nil {
		t.Fatalf("tracer: packet source %q: %v", p.src, err)
	}
	if tr.dst, err = netip.ParseAddr(p.dst); err != nil {
		t.Fatalf("tracer: packet destination %q: %v", p.dst, err)
	}
	if tr.p.ct == 0 {
		tr.p.ct = nft.CtStateNew
	}
	for _, hook := range pathHooks[p.path] {
		for _, base := range tr.baseChains(hook) {
			if v := tr.run(base); v == "drop" || v == "reject" {
				tr.res.verdict = v
				return tr.res
			}
		}
	}
	tr.res.verdict = "accept"
	return tr.res
}

// baseChains returns the base chains at hook, in priority order.
func (tr *tracer) baseChains(hook nft.Hook) []*nft.Chain {
	var out []*nft.Chain
	for _, n := range tr.m.ChainNames() {
		if c := tr.m.Chain(n); c.Base != nil && c.Base.Hook == hook {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Base.Priority < out[j].Base.Priority })
	return out
}

type frame struct {
	chain *nft.Chain
	next  int
}

// run evaluates one base chain and returns "accept" (go on to the next
// base chain: explicit accept or policy accept), "drop" or "reject".
func (tr *tracer) run(base *nft.Chain) string {
	stack := []frame{{chain: base}}
	for steps := 0; ; steps++ {
		if steps > 100000 {
			tr.t.Fatalf("tracer: loop in %s\n%s", base.Name, tr.res)
		}
		if len(stack) == 0 {
			return string(base.Base.Policy)
		}
		top := &stack[len(stack)-1]
		if top.next >= len(top.chain.Rules) {
			stack = stack[:len(stack)-1] // implicit return
			continue
		}
		idx := top.next
		r := top.chain.Rules[idx]
		top.next++
		if idx == 0 {
			if _, seen := tr.res.firstRuleOf[top.chain.Name]; !seen {
				tr.res.firstRuleOf[top.chain.Name] = len(tr.res.steps)
			}
		}
		ok := tr.matches(r)
		step := fmt.Sprintf("%s[%d] %s", top.chain.Name, idx, r.Comment)
		if ok {
			step += " (matched)"
		}
		tr.res.steps = append(tr.res.steps, step)
		if !ok {
			continue
		}
		var v *nft.Verdict
		switch a := r.Action.(type) {
		case nft.Verdict:
			v = &a
		case nft.VMap:
			v = tr.vmap(a)
		case nft.SetMark:
			tr.res.mark = tr.res.mark&a.And ^ a.Xor
		case nft.Notrack:
			tr.res.notrack = true
		case nft.NFLog, nft.Log:
		case nft.Reject:
			return "reject"
		default:
			tr.t.Fatalf("tracer: %s[%d]: unknown action %T", top.chain.Name, idx, r.Action)
		}
		if v == nil {
			continue
		}
		switch v.Kind {
		case nft.Accept:
			return "accept"
		case nft.Drop:
			return "drop"
		case nft.Return:
			stack = stack[:len(stack)-1]
		case nft.Jump, nft.Goto:
			c := tr.m.Chain(v.Chain)
			if c == nil {
				tr.t.Fatalf("tracer: %s[%d]: %s to missing chain %q", top.chain.Name, idx, v.Kind, v.Chain)
			}
			if v.Kind == nft.Goto {
				stack = stack[:len(stack)-1]
			}
			stack = append(stack, frame{chain: c})
		default:
			tr.t.Fatalf("tracer: unknown verdict %q", v.Kind)
		}
	}
}

// vmap looks the packet up in a verdict map; nil means no element.
func (tr *tracer) vmap(a nft.VMap) *nft.Verdict {
	s := tr.m.Set(a.Map)
	if s == nil {
		tr.t.Fatalf("tracer: vmap on missing map %q", a.Map)
	}
	var key string
	switch a.Key {
	case nft.SelIIFName:
		key = tr.p.iif
	case nft.SelOIFName:
		key = tr.p.oif
	case nft.SelMark:
		mask := a.Mask
		if mask == 0 {
			mask = ^uint32(0)
		}
		key = markKey(tr.res.mark & mask)
	default:
		tr.t.Fatalf("tracer: vmap key %q not supported", a.Key)
	}
	if e, ok := s.Elements[key]; ok {
		return e.Verdict
	}
	return nil
}

func (tr *tracer) family() nft.IPFamily {
	if tr.src.Is4() {
		return nft.IPv4
	}
	return nft.IPv6
}

func (tr *tracer) matches(r *nft.Rule) bool {
	for _, m := range r.Match {
		if !tr.match(m) {
			return false
		}
	}
	return true
}

func (tr *tracer) match(m nft.Match) bool {
	p := tr.p
	switch m := m.(type) {
	case nft.IfName:
		name := p.iif
		if m.Dir == nft.Out {
			name = p.oif
		}
		ok := name == m.Name
		if m.Wildcard {
			ok = name != "" && strings.HasPrefix(name, m.Name)
		}
		return ok != m.Negate
	case nft.Addr:
		if m.Family != tr.family() {
			return false
		}
		a := tr.src
		if m.Dir == nft.Out {
			a = tr.dst
		}
		if m.Set != "" {
			tr.t.Fatalf("tracer: address sets not supported")
		}
		in := false
		for _, pfx := range m.Prefixes {
			in = in || pfx.Contains(a)
		}
		return in != m.Negate
	case nft.NFProto:
		return m.Family == tr.family()
	case nft.L4Proto:
		in := false
		for _, x := range m.Protos {
			in = in || x == p.proto
		}
		return in != m.Negate
	case nft.Port:
		if p.proto != protoTCP && p.proto != protoUDP {
			return false
		}
		port := p.sport
		if m.Dir == nft.Out {
			port = p.dport
		}
		if m.Set != "" {
			tr.t.Fatalf("tracer: port sets not supported")
		}
		in := false
		for _, r := range m.Ranges {
			in = in || (port >= r.First && port <= r.Last)
		}
		return in != m.Negate
	case nft.ICMP:
		want := uint8(1)
		if m.Family == nft.IPv6 {
			want = protoICMPv6
		}
		ok := p.proto == want && p.icmpType == m.Type && m.Code == nil
		return ok != m.Negate
	case nft.CtStateMatch:
		st := p.ct
		if tr.res.notrack {
			st = nft.CtStateUntracked
		}
		return (st&m.States != 0) != m.Negate
	case nft.CtStatusMatch:
		var st nft.CtStatus
		if p.dnat {
			st |= nft.CtStatusDNAT
		}
		return (st&m.Status != 0) != m.Negate
	case nft.CtCount:
		return false // the tracer's connections are always under the limit
	case nft.Mark:
		mask := m.Mask
		if mask == 0 {
			mask = ^uint32(0)
		}
		return (tr.res.mark&mask == m.Value) != m.Negate
	case nft.RPF:
		return p.rpfFail
	case nft.Limit:
		return false // the tracer's packets are always under the rate
	case nft.Lookup:
		return tr.lookup(m) != m.Negate
	default:
		tr.t.Fatalf("tracer: unknown match %T", m)
	}
	return false
}

// lookup evaluates `<keys> @set` for the concatenations render uses.
func (tr *tracer) lookup(m nft.Lookup) bool {
	s := tr.m.Set(m.Set)
	if s == nil {
		tr.t.Fatalf("tracer: lookup in missing set %q", m.Set)
	}
	for _, e := range s.Elements {
		fields := strings.Split(e.Key, " . ")
		if len(fields) != len(m.Keys) {
			tr.t.Fatalf("tracer: set %q element %q has %d fields, lookup %d", m.Set, e.Key, len(fields), len(m.Keys))
		}
		all := true
		for i, k := range m.Keys {
			if !tr.fieldMatches(k, fields[i]) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func (tr *tracer) fieldMatches(k nft.Selector, field string) bool {
	switch k {
	case nft.SelIIFName:
		return tr.p.iif == field
	case nft.SelOIFName:
		return tr.p.oif == field
	case nft.SelIPSaddr, nft.SelIP6Saddr, nft.SelIPDaddr, nft.SelIP6Daddr:
		want := nft.IPv4
		if k == nft.SelIP6Saddr || k == nft.SelIP6Daddr {
			want = nft.IPv6
		}
		if tr.family() != want {
			return false
		}
		a := tr.src
		if k == nft.SelIPDaddr || k == nft.SelIP6Daddr {
			a = tr.dst
		}
		pfx, err := felix.ParseNet(field)
		if err != nil {
			tr.t.Fatalf("tracer: bad prefix %q in set", field)
		}
		return pfx.Contains(a)
	case nft.SelTHDport, nft.SelTHSport:
		port := tr.p.sport
		if k == nft.SelTHDport {
			port = tr.p.dport
		}
		n, err := strconv.Atoi(field)
		if err != nil {
			tr.t.Fatalf("tracer: bad port %q in set", field)
		}
		return int(port) == n
	default:
		tr.t.Fatalf("tracer: lookup key %q not supported", k)
	}
	return false
}
