package nft

import "sync"

// Generations lets the Tables that one process programs in one network
// namespace recognise each other's commits.
//
// The ruleset generation is global to the namespace: a commit to any table
// moves it. A Table skips the read of a Resync only when the generation is
// one at which it knows what its table holds (see Table.Resync), so without
// this a commit to nftep's arp table would look foreign to its inet table,
// and the next resync of the inet table (the one nftables events trigger
// after every commit, or the periodic one) would read the whole table back
// although nothing but the arp table changed.
//
// Tables sharing a Generations advance each other: a commit that moved the
// generation from g to g+1 by itself (send reads it just before and just
// after the batch) is the committing Table's alone and changed only its own
// table, so every sibling that knew its table at g knows it at g+1 too.
// A foreign commit in between makes the step larger than one, and then no
// sibling advances: their next resync reads.
//
// Tables sharing a Generations must be driven from one goroutine, as a
// single Table must: a commit updates its siblings' state.
type Generations struct {
	mu     sync.Mutex
	tables map[string]*Table // by "family name"; a newer Table replaces an older one
}

// NewGenerations returns an empty Generations; pass it in the TableConfig
// of every Table of one namespace.
func NewGenerations() *Generations {
	return &Generations{tables: map[string]*Table{}}
}

func (g *Generations) add(t *Table) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tables[t.describe()] = t
}

// committed records that by's commit moved the generation from `from` to
// from+1 with no other commit in between.
func (g *Generations) committed(by *Table, from uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.tables {
		if t != by && t.genKnown && t.gen == from {
			t.gen = from + 1
		}
	}
}
