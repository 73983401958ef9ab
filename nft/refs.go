package nft

// References between the objects of a table: which chains a rule
// reaches and which sets it reads, and which chains packets can reach.

// ruleRefs calls chain for every chain r jumps or goes to and set for
// every set or map it reads.
func ruleRefs(r *Rule, chain func(string), set func(string)) {
	for _, m := range r.Match {
		if m != nil {
			m.sets(set)
		}
	}
	if r.Action != nil {
		r.Action.refs(chain, set)
	}
}

// chainRefsOf calls fn for each reference the rules of c make.
func chainRefsOf(c *Chain, chain func(string), set func(string)) {
	for _, r := range c.Rules {
		ruleRefs(r, chain, set)
	}
}

// liveChains returns the chains of st that packets can reach: the base
// chains and every chain reachable from them through jumps, gotos and
// verdict maps, as far as st knows. unknown is true when it cannot tell (a
// reachable chain with rules it does not know, or a reachable set that is
// not ours): then any chain may be live.
func (st *state) liveChains() (live map[string]bool, unknown bool) {
	live = map[string]bool{}
	seenSets := map[string]bool{}
	var queue []string
	reach := func(name string) {
		if !live[name] {
			live[name] = true
			queue = append(queue, name)
		}
	}
	for name, cs := range st.chains {
		if cs.base != nil {
			reach(name)
		}
	}
	for len(queue) > 0 {
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		cs := st.chains[name]
		switch {
		case cs == nil, cs.chain == nil && cs.empty:
			continue
		case cs.chain == nil:
			return nil, true
		}
		chainRefsOf(cs.chain, reach, func(set string) {
			if seenSets[set] || unknown {
				return
			}
			seenSets[set] = true
			ss := st.sets[set]
			switch {
			case ss == nil:
			case ss.def == nil:
				unknown = true
			case ss.def.Data == DataVerdict:
				for _, e := range ss.elements.all() {
					if c := elementChain(&e); c != "" {
						reach(c)
					}
				}
			}
		})
		if unknown {
			return nil, true
		}
	}
	return live, false
}

// elementChain returns the chain a map element jumps or goes to, or "".
func elementChain(e *Element) string {
	if e.Verdict != nil && (e.Verdict.Kind == Jump || e.Verdict.Kind == Goto) {
		return e.Verdict.Chain
	}
	return ""
}

// ChainReferences counts the references to each chain that m's rules
// (jumps, gotos) and verdict map elements make.
func (m *Model) ChainReferences() map[string]int {
	out := map[string]int{}
	for _, c := range m.chains {
		chainRefsOf(c, func(t string) { out[t]++ }, func(string) {})
	}
	for _, s := range m.sets {
		for _, e := range s.Elements {
			if c := elementChain(&e); c != "" {
				out[c]++
			}
		}
	}
	return out
}
