package routes

// Stats counts what Apply wrote to the kernel since the last TakeStats.
// Neighbour entries are not counted: they follow their routes.
type Stats struct {
	// Programmed is the number of routes added or replaced.
	Programmed int
	// Removed is the number of routes deleted.
	Removed int
	// Repaired counts the writes (of Programmed and Removed) that a full
	// resync called for: keys whose desired state had not changed since
	// the previous Apply, so the kernel had drifted (someone deleted or
	// changed our route, or left one on a workload interface).
	Repaired int
}

// TakeStats returns what Apply wrote since the last call and starts
// counting again from zero.
func (t *Table) TakeStats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.stats
	t.stats = Stats{}
	return s
}

// countWrite records one successful route write for key k.
func (t *Table) countWrite(k routeKey, add bool) {
	if add {
		t.stats.Programmed++
	} else {
		t.stats.Removed++
	}
	if _, ok := t.resyncDirty[k]; ok {
		t.stats.Repaired++
	}
}
