package nft

// changeLog collects the names of the chains and sets of a Model that
// changed since its reader last reset it, so that planning looks at what
// changed instead of comparing the whole model (at 10,000 endpoints the
// comparison walked 20,000 chains and 20,000 map elements for every
// transaction). A Model keeps one log per reader (Model.track); its
// mutators write to every log.
type changeLog struct {
	// all means anything may have changed: a new log, or one whose reader
	// must look at everything (after a read of the kernel's table).
	all bool
	// chains holds chains added, replaced or deleted.
	chains map[string]struct{}
	// sets holds sets added, replaced (definition) or deleted: compared
	// whole.
	sets map[string]struct{}
	// elements holds, per set, the keys of elements added, replaced or
	// deleted.
	elements map[string]map[string]struct{}
}

func newChangeLog() *changeLog {
	return &changeLog{all: true, chains: map[string]struct{}{}, sets: map[string]struct{}{}, elements: map[string]map[string]struct{}{}}
}

// reset forgets what the log holds: the reader has seen it.
func (l *changeLog) reset() {
	l.all = false
	clear(l.chains)
	clear(l.sets)
	clear(l.elements)
}

// track returns a new change log of m: everything counts as changed until
// the reader resets it.
func (m *Model) track() *changeLog {
	l := newChangeLog()
	m.logs = append(m.logs, l)
	return l
}

func (m *Model) chainChanged(name string) {
	m.version++
	for _, l := range m.logs {
		if !l.all {
			l.chains[name] = struct{}{}
		}
	}
}

func (m *Model) setChanged(name string) {
	m.version++
	for _, l := range m.logs {
		if !l.all {
			l.sets[name] = struct{}{}
		}
	}
}

func (m *Model) elementChanged(set, key string) {
	m.version++
	for _, l := range m.logs {
		if l.all {
			continue
		}
		if _, whole := l.sets[set]; whole {
			continue
		}
		ks := l.elements[set]
		if ks == nil {
			ks = map[string]struct{}{}
			l.elements[set] = ks
		}
		ks[key] = struct{}{}
	}
}
