package dataplane

import (
	"context"
	"sync"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/takeover"
)

// KeyRemoveCalicoLeftovers turns off (with false) the removal of what
// Calico Felix's own dataplane left on the node (package takeover): its
// nftables mode's `ip calico`, `ip6 calico` and `arp calico-arp` tables,
// its iptables mode's `cali-` chains in iptables-nft's tables, and its
// ipsets. On by default; off only for a node that runs Felix's dataplane
// beside nftep on purpose.
const (
	KeyRemoveCalicoLeftovers = "NftepRemoveCalicoLeftovers"
)

// takeoverKernel is a Kernel that can remove Calico's leftovers (the real
// one).
type takeoverKernel interface {
	Takeover() *takeover.Sweeper
}

// foreignCarrier is a Table that can send removals in other tables with its
// own transaction (*nft.Table).
type foreignCarrier interface {
	SetForeign(ops []nft.ForeignOp)
}

// takeoverState is the loop's part in the take-over: whether the first
// sweep is still to go with nftep's next commit, and the goroutine that
// keeps leftovers away afterwards.
type takeoverState struct {
	sweeper *takeover.Sweeper
	// pending: the next apply carries the sweep (set for each new engine
	// with the setting on, until an apply succeeds).
	pending bool
	// found is what the pending sweep's apply carries.
	found takeover.Found
	// legacyChecked: iptables-legacy tables were looked for (once).
	legacyChecked bool
	// keep: the setting is on, so leftovers are kept away once the first
	// sweep went through (takeoverKeep); stopKeep ends that goroutine.
	keep     bool
	stopKeep func()
}

// takeoverStart prepares the take-over for a new engine: with the setting
// on, the engine's first apply also removes Calico's leftovers, in the same
// transaction as nftep's inet table; with it off, nothing is removed and
// the goroutine that kept them away stops.
func (l *loop) takeoverStart(cfg Config) {
	tk, ok := l.kernel.(takeoverKernel)
	if !ok {
		return
	}
	t := &l.takeover
	if t.sweeper == nil {
		t.sweeper = tk.Takeover()
	}
	if !t.legacyChecked {
		t.legacyChecked = true
		if _, err := t.sweeper.CheckLegacy(); err != nil {
			l.log.Warn("cannot look for iptables-legacy rules", "error", err)
		}
	}
	t.pending, t.keep = cfg.RemoveCalicoLeftovers, cfg.RemoveCalicoLeftovers
	if !cfg.RemoveCalicoLeftovers {
		l.takeoverStop()
	}
}

// takeoverBeforeApply attaches the pending sweep to the inet table's next
// transaction: it reads the tables Calico uses now, so that what the
// transaction removes is what is there.
func (l *loop) takeoverBeforeApply(ctx context.Context) {
	t := &l.takeover
	if !t.pending || l.eng == nil {
		return
	}
	fc, ok := l.eng.inet.(foreignCarrier)
	if !ok {
		return
	}
	f, err := t.sweeper.Find(ctx)
	if err != nil {
		// Not a reason to hold back nftep's own table: the loop's
		// watch sweeps again later.
		l.log.Warn("cannot read what Calico left; nftep's table goes in alone", "error", err)
		t.found = takeover.Found{}
		return
	}
	t.found = f
	fc.SetForeign(f.Ops)
}

// takeoverAfterApply records the outcome of an apply that carried the
// sweep. After a success it logs what was removed, removes Calico's unused
// ipsets and, in a daemon, starts keeping leftovers away. A failed apply
// changed nothing: the sweep stays pending for the retry.
func (l *loop) takeoverAfterApply(ctx context.Context, err error) {
	t := &l.takeover
	if !t.pending || l.eng == nil {
		return
	}
	if fc, ok := l.eng.inet.(foreignCarrier); ok {
		fc.SetForeign(nil)
	}
	if err != nil {
		return
	}
	t.pending = false
	if t.found.Empty() {
		l.log.Info("no leftovers of Calico's dataplane in nftables")
		t.sweeper.CleanIPSets()
	} else {
		t.sweeper.Removed(t.found)
	}
	t.found = takeover.Found{}
	l.takeoverKeep(ctx)
}

// takeoverKeep starts, in a daemon, the goroutine that keeps leftovers away
// once the first sweep went through and Felix's state is programmed. Not
// before: it subscribes to nftables commits, and while anyone listens the
// kernel builds an event for every object a commit touches, which the
// subscriber then has to read (the driver's static table goes in before
// InSync; the cold start that follows adds a quarter of a million rules at
// 10,000 endpoints, and its events kept the goroutine busy for tens of
// seconds afterwards). apply calls it again after each successful apply in
// sync.
func (l *loop) takeoverKeep(ctx context.Context) {
	t := &l.takeover
	if t.sweeper != nil && t.keep && !t.pending && l.watch && l.inSync && t.stopKeep == nil {
		kctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { t.sweeper.Keep(kctx) })
		t.stopKeep = func() {
			cancel()
			wg.Wait()
		}
	}
}

// takeoverStop ends the goroutine that keeps leftovers away.
func (l *loop) takeoverStop() {
	if l.takeover.stopKeep != nil {
		l.takeover.stopKeep()
		l.takeover.stopKeep = nil
	}
}

// takeoverReport is the take-over's report for the status file, nil when
// there is no take-over (a dry run, a test kernel).
func (l *loop) takeoverReport() *takeover.Report {
	if l.takeover.sweeper == nil {
		return nil
	}
	r := l.takeover.sweeper.Report()
	return &r
}
