package takeover

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
)

// Sweeper removes Calico's leftovers from one network namespace and keeps
// them away. Its methods are safe for concurrent use.
type Sweeper struct {
	ns  *netnsutil.NS
	log *slog.Logger
	// countLegacy counts the rules and cali- chains of an x_tables
	// table from a thread in the namespace (see xtables.go).
	countLegacy func(family, table string) (rules, cali int, err error)

	mu     sync.Mutex
	report Report
}

// New returns a Sweeper for the namespace ns (nil: the caller's). It does
// not touch the kernel.
func New(ns *netnsutil.NS, logger *slog.Logger) *Sweeper {
	if ns == nil {
		ns = netnsutil.Current()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Sweeper{ns: ns, log: logger}
	s.countLegacy = countXTables
	return s
}

// Report is what the Sweeper did and what it could not do, for `nftep
// status` and the metrics.
type Report struct {
	// Removed counts the objects removed since start: Felix's tables,
	// `cali-` chains, rules of other chains, and ipsets.
	RemovedTables int `json:"removedTables"`
	RemovedChains int `json:"removedChains"`
	RemovedRules  int `json:"removedRules"`
	RemovedIPSets int `json:"removedIPSets"`
	// Sweeps counts the transactions that removed something; LastSweep
	// is when the last one committed, LastRemoved what it removed.
	Sweeps      int       `json:"sweeps"`
	LastSweep   time.Time `json:"lastSweep,omitzero"`
	LastRemoved string    `json:"lastRemoved,omitempty"`
	// IPSetsKept are Calico's ipsets something still refers to (an
	// iptables-legacy rule, say), kept until nothing does.
	IPSetsKept []KeptIPSet `json:"ipsetsKept,omitempty"`
	// Legacy are the x_tables (iptables-legacy) tables that hold rules:
	// nftep cannot see or remove them, and their drops decide as surely as
	// any nftables drop.
	Legacy []LegacyTable `json:"iptablesLegacy,omitempty"`
	// LastError is the last sweep's error, if it failed.
	LastError string `json:"lastError,omitempty"`
}

// KeptIPSet is one of Calico's ipsets that could not be removed.
type KeptIPSet struct {
	Name string `json:"name"`
	// References is the kernel's count of rules (or list sets) that use
	// it.
	References int `json:"references"`
}

// Report returns a copy of the report.
func (s *Sweeper) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.report
	r.IPSetsKept = append([]KeptIPSet(nil), r.IPSetsKept...)
	r.Legacy = append([]LegacyTable(nil), r.Legacy...)
	return r
}

// Find reads the namespace and returns what of Calico's is there.
func (s *Sweeper) Find(ctx context.Context) (Found, error) {
	tables, err := nft.ReadForeign(ctx, s.ns.Fd(), wanted, true)
	if err != nil {
		return Found{}, fmt.Errorf("read the tables Calico may have left: %w", err)
	}
	return plan(tables), nil
}

// Removed records that the removals of f committed (alone through Sweep,
// or in nftep's own transaction through nft.Table.SetForeign), logs them,
// and removes the ipsets Calico left that nothing refers to any more.
func (s *Sweeper) Removed(f Found) {
	if f.Empty() {
		return
	}
	s.mu.Lock()
	s.report.RemovedTables += len(f.Tables)
	s.report.RemovedChains += len(f.Chains)
	s.report.RemovedRules += f.Rules
	s.report.Sweeps++
	s.report.LastSweep = time.Now()
	s.report.LastRemoved = f.String()
	s.report.LastError = ""
	s.mu.Unlock()
	s.log.Info("removed what Calico's dataplane left in nftables", "removed", f.String())
	s.CleanIPSets()
}

// failed records a failed sweep.
func (s *Sweeper) failed(err error) {
	s.mu.Lock()
	s.report.LastError = err.Error()
	s.mu.Unlock()
}

// Sweep finds Calico's leftovers and removes them in one transaction of
// their own. It returns what it removed.
func (s *Sweeper) Sweep(ctx context.Context) (Found, error) {
	f, err := s.Find(ctx)
	if err == nil && !f.Empty() {
		err = nft.CommitForeign(ctx, s.ns.Fd(), f.Ops)
	}
	if err != nil {
		s.failed(err)
		return Found{}, err
	}
	s.Removed(f)
	return f, nil
}

// Keep removes Calico's leftovers whenever they come back, until ctx is
// done: it listens to the namespace's nftables commits (nft.WatchCommits),
// and after one by another process that touched a table Calico uses, it
// sweeps (settle after the commit, at most once per minGap). It sweeps
// once at start and after each resubscription (commits in between were not
// seen). Its own commits touch those tables too and are ignored, so there
// is no loop; a sweep that finds nothing commits nothing.
func (s *Sweeper) Keep(ctx context.Context) {
	const (
		settle  = 10 * time.Millisecond
		minGap  = 100 * time.Millisecond
		backoff = time.Second
	)
	kick := make(chan struct{}, 1)
	trigger := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		var last time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
			wait := settle
			if d := time.Until(last.Add(minGap)); d > wait {
				wait = d
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			last = time.Now()
			if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("removing Calico's leftovers failed; retrying at the next change", "error", err)
				// A sweep can fail when the tables change under it
				// (a handle gone): try again shortly.
				time.AfterFunc(backoff, trigger)
			}
		}
	})
	for ctx.Err() == nil {
		trigger()
		err := nft.WatchCommits(ctx, s.ns.Fd(), func(c nft.Commit) {
			if c.Writer != nil && c.Writer.Self() {
				return
			}
			for _, t := range c.Tables {
				if watched(t) {
					trigger()
					return
				}
			}
		})
		if ctx.Err() != nil {
			break
		}
		s.log.Warn("nftables commit watch failed; resubscribing", "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
	}
	wg.Wait()
}
