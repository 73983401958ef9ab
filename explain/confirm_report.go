package explain

import (
	"fmt"
	"io"
	"strings"
)

// TraceStepJSON is one line of the two paths: a rule (or policy) with what
// the kernel's trace says it did and what the tracer computed.
type TraceStepJSON struct {
	Chain string `json:"chain"`
	// Rule counts from 1; 0 is the chain's policy.
	Rule    int    `json:"rule"`
	Comment string `json:"comment,omitempty"`
	// Kernel is the kernel's verdict for the rule ("continue" for a
	// statement), absent when the kernel did not report the rule.
	Kernel string `json:"kernel,omitempty"`
	// Computed is the tracer's outcome, absent when it did not compute the
	// rule as matching.
	Computed string `json:"computed,omitempty"`
	// Agrees is true when both have the rule.
	Agrees bool `json:"agrees"`
}

// ConfirmJSON is `nftep explain --confirm --json`'s "confirm" member.
type ConfirmJSON struct {
	// Probe describes the packet sent.
	Probe string `json:"probe"`
	// Connected says whether a TCP probe's connection was made.
	Connected bool `json:"connected"`
	// TraceID is the kernel's id of the traced packet.
	TraceID uint32 `json:"traceId"`
	// Verdict is the kernel's: "accept" or "drop".
	Verdict string `json:"verdict"`
	// Agrees is true when the kernel's path and verdict equal the
	// computed ones.
	Agrees bool            `json:"agrees"`
	Path   []TraceStepJSON `json:"path"`
}

// JSON converts the confirmation.
func (c *Confirmation) JSON() *ConfirmJSON {
	out := &ConfirmJSON{Probe: c.Probe, Connected: c.Connected, TraceID: c.TraceID, Verdict: c.Verdict, Agrees: c.Agrees, Path: []TraceStepJSON{}}
	for _, ln := range c.Lines {
		var s TraceStepJSON
		if k := ln.Kernel; k != nil {
			s.Chain, s.Rule, s.Kernel = k.Chain, k.Index+1, k.Verdict
			if k.Rule != nil {
				s.Comment = k.Rule.Comment
			}
		}
		if st := ln.Computed; st != nil {
			s.Chain, s.Rule, s.Computed = st.Chain, st.Index+1, st.Outcome
			if st.Rule != nil {
				s.Comment = st.Rule.Comment
			}
			if s.Computed == "" {
				s.Computed = "continue"
			}
		}
		s.Agrees = ln.Agrees()
		out.Path = append(out.Path, s)
	}
	return out
}

// Print writes the kernel's path beside the computed one: "=" where both
// have the rule, "≠" where only one does.
func (c *Confirmation) Print(w io.Writer) {
	j := c.JSON()
	fmt.Fprintf(w, "\nkernel trace of a real probe (%s):\n", j.Probe)
	for _, s := range j.Path {
		mark, who := "=", ""
		switch {
		case s.Kernel == "":
			mark, who = "≠", "computed only: "
		case s.Computed == "":
			mark, who = "≠", "kernel only: "
		}
		what := s.Kernel
		if what == "" {
			what = s.Computed
		}
		where := fmt.Sprintf("chain %s rule %d", s.Chain, s.Rule)
		switch s.Rule {
		case 0:
			where = fmt.Sprintf("chain %s policy", s.Chain)
		case -1:
			where = fmt.Sprintf("chain %s, a rule added since the table was read", s.Chain)
		}
		line := fmt.Sprintf("  %s %s%s: %s", mark, who, where, what)
		if s.Comment != "" {
			line += fmt.Sprintf(" (%s)", s.Comment)
		}
		fmt.Fprintln(w, line)
	}
	outcome := "the probe did not connect"
	switch {
	case strings.HasPrefix(j.Probe, "udp"):
		outcome = "a datagram was sent"
	case j.Connected:
		outcome = "the probe connected"
	}
	if j.Agrees {
		fmt.Fprintf(w, "the kernel agrees: %s (%s)\n", strings.ToUpper(j.Verdict), outcome)
	} else {
		fmt.Fprintf(w, "the kernel DISAGREES: it says %s (%s); the lines marked ≠ differ\n", strings.ToUpper(j.Verdict), outcome)
	}
}
