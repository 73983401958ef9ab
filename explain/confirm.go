package explain

// --confirm: the computed path checked against the kernel's. A temporary
// table sets the nftrace bit of the explained flow alone, a real probe of
// that flow is sent from the source's namespace, and the kernel's trace
// events for nftep's table are set beside the steps the tracer computed.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/tracer"
)

// traceTablePriority runs the trace table's chains before every chain of
// nftep's table (raw is -300), so the bit is set before nftep's first rule.
const traceTablePriority = -400

// ConfirmRequest says where to confirm a report.
type ConfirmRequest struct {
	// Node is the namespace nftep's table lives in.
	Node *netnsutil.NS
	// Source is the namespace the probe is sent from: the source pod's,
	// or Node itself when the packet comes from the host.
	Source *netnsutil.NS
	// Table is nftep's table (inet) as read from the kernel, with the
	// rules' handles.
	Table *nft.KernelTable
	// TraceTable names the temporary table ("<table>-trace").
	TraceTable string
	// Timeout bounds the probe and the wait for trace events.
	Timeout time.Duration
}

// KernelStep is one event the kernel reported for nftep's table.
type KernelStep struct {
	// Chain and Index say which rule matched (Index -1: the chain's
	// policy).
	Chain string
	Index int
	// Verdict is what the kernel says the rule did: "continue" (a
	// statement), "accept", "drop", "jump X", "goto X", "return"; for a
	// policy, the policy.
	Verdict string
	// Rule is the rule as the kernel holds it; nil for a policy or a rule
	// the table read before the probe does not have.
	Rule *nft.Rule
}

// ConfirmLine is one line of the two paths set side by side.
type ConfirmLine struct {
	// Kernel and Computed are the kernel's event and the tracer's step
	// for the same rule; either is nil where only the other has it.
	Kernel   *KernelStep
	Computed *tracer.Step
}

// Agrees says whether both paths have the rule.
func (l ConfirmLine) Agrees() bool { return l.Kernel != nil && l.Computed != nil }

// Confirmation is the kernel's path of a real probe beside the computed
// one.
type Confirmation struct {
	// Probe describes the packet sent and from where.
	Probe string
	// Connected says whether a TCP probe's connection was made.
	Connected bool
	// TraceID is the kernel's id of the traced packet.
	TraceID uint32
	// Verdict is the kernel's: "drop" if a rule or policy of nftep's
	// table dropped the packet, else "accept".
	Verdict string
	// Lines are the two paths aligned.
	Lines []ConfirmLine
	// Agrees is true when every line has both sides and the verdicts
	// are equal.
	Agrees bool
}

// Confirm sends a probe of r's packet and reads the kernel's trace of it.
// Nothing but the temporary trace table is changed, and that table is
// deleted before Confirm returns; it is also owned by Confirm's socket, so
// the kernel deletes it if the process dies first.
func Confirm(ctx context.Context, r *Report, req ConfirmRequest) (*Confirmation, error) {
	p := r.Packet
	if p.Ct != nft.CtStateNew && p.Ct != 0 {
		return nil, fmt.Errorf("--confirm sends the first packet of a new flow; it cannot send one in state %s", stateName(p.Ct))
	}
	if p.Proto != tracer.ProtoTCP && p.Proto != tracer.ProtoUDP {
		return nil, fmt.Errorf("--confirm sends tcp or udp probes, not %s", protoWord(p.Proto))
	}
	if p.Mark != 0 {
		return nil, errors.New("--confirm cannot send a packet with a mark on arrival (--mark)")
	}
	trace, err := nft.NewTable(nft.TableConfig{Family: nft.FamilyINet, Name: req.TraceTable, NetNSFd: req.Node.Fd(), Owned: true})
	if err != nil {
		return nil, err
	}
	defer trace.Close()
	flow := flowMatch(p)
	hook := nft.HookPrerouting
	if p.Path == tracer.Output {
		hook = nft.HookOutput
	}
	trace.Desired().SetChain(&nft.Chain{Name: string(hook),
		Base:  &nft.BaseChain{Type: nft.ChainTypeFilter, Hook: hook, Priority: traceTablePriority, Policy: nft.PolicyAccept},
		Rules: []*nft.Rule{{Match: flow, Action: nft.SetNftrace{}, Comment: "nftep explain --confirm: trace this flow"}}})

	l, err := nft.ListenTrace(req.Node.Fd())
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if _, err := trace.Apply(ctx); err != nil {
		return nil, fmt.Errorf("add the trace table %s: %w", req.TraceTable, err)
	}
	// Removed on every way out, Ctrl-C included (ctx is cancelled then,
	// so the deletion gets a context of its own).
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = trace.Delete(dctx)
	}()

	c := &Confirmation{Probe: fmt.Sprintf("%s %s, sent from %s", protoWord(p.Proto),
		flowString(p), req.Source)}
	c.Connected, err = Probe(ctx, req.Source, p, req.Timeout)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	events, err := l.Collect(wctx, 200*time.Millisecond)
	if err != nil {
		return nil, err
	}
	kernel, id, err := kernelPath(events, req.Table)
	if err != nil {
		return nil, err
	}
	c.TraceID = id
	c.Verdict = "accept"
	for _, k := range kernel {
		if k.Verdict == "drop" {
			c.Verdict = "drop"
		}
	}
	c.Lines = align(kernel, computedPath(r.Result))
	c.Agrees = c.Verdict == verdictClass(r.Result.Verdict)
	for _, ln := range c.Lines {
		c.Agrees = c.Agrees && ln.Agrees()
	}
	return c, nil
}

// flowMatch matches p's flow alone: its addresses, protocol and ports.
func flowMatch(p tracer.Packet) []nft.Match {
	fam := nft.IPv4
	if p.Src.Is6() {
		fam = nft.IPv6
	}
	one := func(a netip.Addr) []netip.Prefix { return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())} }
	return []nft.Match{
		nft.Addr{Family: fam, Dir: nft.In, Prefixes: one(p.Src)},
		nft.Addr{Family: fam, Dir: nft.Out, Prefixes: one(p.Dst)},
		nft.L4Proto{Protos: []uint8{p.Proto}},
		nft.Port{Dir: nft.In, Ranges: []nft.PortRange{{First: p.SPort, Last: p.SPort}}},
		nft.Port{Dir: nft.Out, Ranges: []nft.PortRange{{First: p.DPort, Last: p.DPort}}},
	}
}

func flowString(p tracer.Packet) string {
	return netip.AddrPortFrom(p.Src, p.SPort).String() + " → " + netip.AddrPortFrom(p.Dst, p.DPort).String()
}

// kernelPath picks the events of the first traced packet (a TCP probe
// that is not answered is sent again, and each copy is traced) in nftep's
// table, and names their rules by chain and position through the handles
// of t. The implicit returns are left out: the computed path has no step
// for them.
func kernelPath(events []nft.TraceEvent, t *nft.KernelTable) ([]KernelStep, uint32, error) {
	if len(events) == 0 {
		return nil, 0, errors.New("the kernel reported no trace event for the probe: did it leave its namespace? (is there a route to the destination?)")
	}
	id := events[0].ID
	table := t.Model.Name
	where := map[uint64]KernelStep{}
	for chain, rules := range t.Rules {
		c := t.Model.Chain(chain)
		for i, kr := range rules {
			ks := KernelStep{Chain: chain, Index: i}
			if c != nil && i < len(c.Rules) {
				ks.Rule = c.Rules[i]
			}
			where[kr.Handle] = ks
		}
	}
	var out []KernelStep
	for _, e := range events {
		if e.ID != id || e.Table != table || e.Family != familyINet {
			continue
		}
		switch e.Type {
		case nft.TraceRule:
			ks, ok := where[e.Handle]
			if !ok {
				// A rule added after the table was read.
				ks = KernelStep{Chain: e.Chain, Index: -2}
			}
			ks.Verdict = e.Verdict
			out = append(out, ks)
		case nft.TracePolicy:
			out = append(out, KernelStep{Chain: e.Chain, Index: -1, Verdict: e.Policy})
		}
	}
	return out, id, nil
}

// familyINet is NFPROTO_INET, the family of nftep's table in trace events.
const familyINet = 1

// computedPath is the steps the kernel reports an event for: a rule whose
// matches held, unless its map lookup found no element (the kernel ends
// such a rule as if a match failed), and each policy applied.
func computedPath(res *tracer.Result) []*tracer.Step {
	var out []*tracer.Step
	for i := range res.Steps {
		st := &res.Steps[i]
		if !st.Matched {
			continue
		}
		if st.Index >= 0 && st.Outcome == "" {
			switch st.Rule.Action.(type) {
			case nft.VMap, nft.SetMarkFromMap:
				continue
			}
		}
		out = append(out, st)
	}
	return out
}

// align sets the two paths side by side by their longest common
// subsequence of rules, so that one extra or missing rule shows as one
// line, not as a shifted remainder.
func align(kernel []KernelStep, computed []*tracer.Step) []ConfirmLine {
	same := func(i, j int) bool {
		return kernel[i].Chain == computed[j].Chain && kernel[i].Index == computed[j].Index
	}
	n, m := len(kernel), len(computed)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if same(i, j) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []ConfirmLine
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && same(i, j):
			out = append(out, ConfirmLine{Kernel: &kernel[i], Computed: computed[j]})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			out = append(out, ConfirmLine{Computed: computed[j]})
			j++
		default:
			out = append(out, ConfirmLine{Kernel: &kernel[i]})
			i++
		}
	}
	return out
}

// verdictClass is what a verdict does to the packet: a reject drops it.
func verdictClass(v string) string {
	if v == "reject" {
		return "drop"
	}
	return v
}
