package explain

import (
	"fmt"
	"io"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/tracer"
)

// RuleJSON names one rule on the path (or a base chain's policy).
type RuleJSON struct {
	// Hook is the hook of the base chain the walk was in.
	Hook string `json:"hook"`
	// Chain is the chain holding the rule.
	Chain string `json:"chain"`
	// Rule is the rule's position in the chain, from 1 (as `nft -a list`
	// counts them in order); 0 for the chain's policy.
	Rule int `json:"rule"`
	// Text is the rule as nft prints it, without its comment; for a
	// policy, "policy accept" or "policy drop".
	Text string `json:"text"`
	// Comment is the rule's comment: the endpoint, tier, policy and rule
	// it comes from.
	Comment string `json:"comment,omitempty"`
	// Outcome is what the rule did: "accept", "drop", "reject", "jump X",
	// "goto X", "return", "mark set 0x…", "notrack", "log" or "".
	Outcome string `json:"outcome,omitempty"`
}

// AlternativeJSON is a near miss that would change the verdict.
type AlternativeJSON struct {
	RuleJSON
	// Condition is what would have to hold.
	Condition string `json:"condition"`
	// Verdict is the verdict the packet would get.
	Verdict string `json:"verdict"`
}

// PacketJSON is the packet that was traced.
type PacketJSON struct {
	Path     string `json:"path"`
	IIF      string `json:"iif,omitempty"`
	OIF      string `json:"oif,omitempty"`
	Src      string `json:"src"`
	Dst      string `json:"dst"`
	Proto    uint8  `json:"proto"`
	SPort    uint16 `json:"sport,omitempty"`
	DPort    uint16 `json:"dport,omitempty"`
	ICMPType uint8  `json:"icmpType,omitempty"`
	ICMPCode uint8  `json:"icmpCode,omitempty"`
	State    string `json:"state"`
	Mark     uint32 `json:"mark,omitempty"`
	RPFFails bool   `json:"rpfFails,omitempty"`
}

// ReportJSON is what `nftep explain --json` prints.
type ReportJSON struct {
	From   End        `json:"from"`
	To     End        `json:"to"`
	Packet PacketJSON `json:"packet"`
	// Verdict is "accept", "drop" or "reject".
	Verdict string `json:"verdict"`
	// DecidedBy is the rule (or policy) that decided; absent when every
	// hook's policy accepted without a rule deciding.
	DecidedBy *RuleJSON `json:"decidedBy,omitempty"`
	// AllowedBy is, for a packet accepted on nftep's accept mark, the
	// policy or profile rule that set it.
	AllowedBy *RuleJSON `json:"allowedBy,omitempty"`
	// Path is every rule that matched, and every policy applied, in order.
	Path []RuleJSON `json:"path"`
	// Alternatives are the near misses that would change the verdict,
	// nearest the decision first.
	Alternatives []AlternativeJSON `json:"alternatives"`
	// Mark is the mark the packet left with.
	Mark uint32 `json:"mark"`
	// SourceNAT is the source NAT the packet gets (natOutgoing, tunnel
	// masquerade): absent when none.
	SourceNAT *NATJSON `json:"sourceNAT,omitempty"`
	// Confirm is the kernel's trace of a real probe (--confirm).
	Confirm *ConfirmJSON `json:"confirm,omitempty"`
	// Egress is how the packet leaves the node for a destination beyond
	// it: the route, its device and the encapsulation.
	Egress *Egress `json:"egress,omitempty"`
}

// NATJSON is a source NAT: masquerade or snat, to which address (empty when
// a masquerade's output interface has no address of the family), the port
// range, and the rule.
type NATJSON struct {
	Kind        string   `json:"kind"`
	To          string   `json:"to,omitempty"`
	Ports       string   `json:"ports,omitempty"`
	FullyRandom bool     `json:"fullyRandom,omitempty"`
	By          RuleJSON `json:"by"`
}

func ruleJSON(st *tracer.Step) RuleJSON {
	r := RuleJSON{Hook: string(st.Hook), Chain: st.Chain, Rule: st.Index + 1, Outcome: st.Outcome}
	if st.Rule == nil {
		r.Text = "policy " + st.Outcome
		return r
	}
	bare := *st.Rule
	bare.Comment = ""
	r.Text, r.Comment = bare.String(), st.Rule.Comment
	return r
}

// JSON converts the report.
func (r *Report) JSON() *ReportJSON {
	p := r.Packet
	out := &ReportJSON{From: r.From, To: r.To, Verdict: r.Result.Verdict, Mark: r.Result.Mark,
		Path: []RuleJSON{}, Alternatives: []AlternativeJSON{},
		Packet: PacketJSON{Path: string(p.Path), IIF: p.IIF, OIF: p.OIF, Src: p.Src.String(), Dst: p.Dst.String(),
			Proto: p.Proto, SPort: p.SPort, DPort: p.DPort, ICMPType: p.ICMPType, ICMPCode: p.ICMPCode,
			State: stateName(p.Ct), Mark: p.Mark, RPFFails: p.RPFFail}}
	if d := r.Result.Deciding(); d != nil {
		j := ruleJSON(d)
		out.DecidedBy = &j
	}
	if c := r.Result.Causing(); c != nil {
		j := ruleJSON(c)
		out.AllowedBy = &j
	}
	for i := range r.Result.Steps {
		if st := &r.Result.Steps[i]; st.Matched {
			out.Path = append(out.Path, ruleJSON(st))
		}
	}
	for _, a := range r.Alternatives {
		out.Alternatives = append(out.Alternatives, AlternativeJSON{RuleJSON: ruleJSON(&a.Step), Condition: a.Condition, Verdict: a.Verdict})
	}
	if n := r.Result.NAT; n != nil {
		j := &NATJSON{Kind: n.Kind, FullyRandom: n.FullyRandom, By: ruleJSON(&r.Result.Steps[r.Result.NATStep])}
		if n.To.IsValid() {
			j.To = n.To.String()
		}
		if n.Ports != nil {
			j.Ports = fmt.Sprintf("%d-%d", n.Ports.First, n.Ports.Last)
		}
		out.SourceNAT = j
	}
	if r.Confirmation != nil {
		out.Confirm = r.Confirmation.JSON()
	}
	out.Egress = r.Egress
	return out
}

func stateName(s nft.CtState) string {
	for _, n := range []struct {
		s    nft.CtState
		name string
	}{{nft.CtStateNew, "new"}, {nft.CtStateEstablished, "established"}, {nft.CtStateRelated, "related"}, {nft.CtStateInvalid, "invalid"}, {nft.CtStateUntracked, "untracked"}} {
		if s == n.s {
			return n.name
		}
	}
	return "new"
}

// Print writes the report for a reader: the packet, the path (each chain
// entered and each rule that matched, with its comment), the verdict with
// the rule that decided it, and what would change it.
func (r *Report) Print(w io.Writer) {
	j := r.JSON()
	p := j.Packet
	flow := fmt.Sprintf("%s → %s", p.Src, p.Dst)
	if p.SPort != 0 || p.DPort != 0 {
		flow = fmt.Sprintf("%s port %d → %s port %d", p.Src, p.SPort, p.Dst, p.DPort)
	}
	fmt.Fprintf(w, "packet: %s %s, %s path, conntrack state %s", protoWord(p.Proto), flow, p.Path, p.State)
	if p.Mark != 0 {
		fmt.Fprintf(w, ", mark %#08x", p.Mark)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "from:   %s\n", j.From)
	fmt.Fprintf(w, "to:     %s\n", j.To)
	if e := j.Egress; e != nil {
		fmt.Fprintf(w, "route:  %s\n", e.Route)
		fmt.Fprintf(w, "encap:  %s\n", e.Encap)
	}
	if p.RPFFails {
		fmt.Fprintf(w, "note:   the route back to %s does not leave through %s (strict reverse-path check fails)\n", p.Src, p.IIF)
	}
	fmt.Fprintln(w, "\npath:")
	hook, chain := "", ""
	for _, st := range j.Path {
		if st.Hook != hook {
			hook, chain = st.Hook, ""
			fmt.Fprintf(w, "  hook %s\n", hook)
		}
		if st.Chain != chain {
			chain = st.Chain
			fmt.Fprintf(w, "    chain %s\n", chain)
		}
		fmt.Fprintf(w, "      %s\n", ruleLine(st))
	}
	fmt.Fprintf(w, "\nverdict: %s\n", strings.ToUpper(j.Verdict))
	if d := j.DecidedBy; d != nil {
		fmt.Fprintf(w, "  decided by chain %s %s\n", d.Chain, ruleLine(*d))
	} else {
		fmt.Fprintln(w, "  no rule decided: every base chain's policy accepted")
	}
	if c := j.AllowedBy; c != nil {
		fmt.Fprintf(w, "  allowed by chain %s %s\n", c.Chain, ruleLine(*c))
	}
	if n := j.SourceNAT; n != nil && j.Verdict == "accept" {
		to := n.To
		if to == "" {
			to = "the output interface's address"
		}
		fmt.Fprintf(w, "  source NAT: %s to %s", n.Kind, to)
		if n.Ports != "" {
			fmt.Fprintf(w, ", source ports %s", n.Ports)
		}
		if n.FullyRandom {
			fmt.Fprint(w, ", fully-random")
		}
		fmt.Fprintf(w, "\n    (chain %s %s)\n", n.By.Chain, ruleLine(n.By))
	} else if j.Verdict == "accept" && p.State == "new" && (p.Path == "forward" || p.Path == "output") {
		fmt.Fprintln(w, "  source NAT: none (the source address is kept)")
	}
	if len(j.Alternatives) == 0 {
		fmt.Fprintln(w, "\nno single condition of a rule on the path would change the verdict")
	} else {
		fmt.Fprintln(w, "\nwould change the verdict:")
		for _, a := range j.Alternatives {
			fmt.Fprintf(w, "  %s if %s\n", a.Verdict, a.Condition)
			fmt.Fprintf(w, "    (chain %s %s)\n", a.Chain, ruleLine(a.RuleJSON))
		}
	}
	if r.Confirmation != nil {
		r.Confirmation.Print(w)
	}
}

func ruleLine(r RuleJSON) string {
	if r.Rule == 0 {
		return r.Text
	}
	s := fmt.Sprintf("rule %d: %s", r.Rule, r.Text)
	if r.Comment != "" {
		s += fmt.Sprintf(" comment %q", r.Comment)
	}
	return s
}

func protoWord(p uint8) string {
	switch p {
	case tracer.ProtoTCP:
		return "tcp"
	case tracer.ProtoUDP:
		return "udp"
	case tracer.ProtoSCTP:
		return "sctp"
	case tracer.ProtoICMP:
		return "icmp"
	case tracer.ProtoICMPv6:
		return "icmpv6"
	}
	return fmt.Sprintf("protocol %d", p)
}
