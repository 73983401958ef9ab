package nft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// TableConfig says which table a Table owns and where.
type TableConfig struct {
	// Family is the table's family, FamilyINet for nftep's main table.
	Family Family
	// Name is the table's name, e.g. "nftep".
	Name string
	// NetNSFd is an open file descriptor of the network namespace the
	// table lives in; -1 or 0 means the caller's namespace. The descriptor
	// must stay open as long as the Table is used.
	NetNSFd int
	// Transport, when set, replaces the kernel of NetNSFd: a *Fake in
	// tests.
	Transport Transport
	// Generations, when set, is shared by the Tables this process programs
	// in the namespace, so that a commit to one does not make the others
	// read their tables back at their next Resync (see Generations).
	Generations *Generations
	// Owned makes the table live only as long as the Table: it is created
	// with NFT_TABLE_F_OWNER (Linux 5.12) through a socket the Table keeps,
	// only that socket may change it, and the kernel deletes it when the
	// socket closes, on Close or when the process dies, however it dies.
	// For temporary tables such as `nftep explain --confirm`'s; never for
	// nftep's own, whose rules must outlive a restart. Ignored by a
	// Transport other than the kernel's.
	Owned bool
	// Logger receives one debug line per transaction and an info line when a
	// resync finds drift; nil discards.
	Logger *slog.Logger
}

// Table keeps one nftables table in step with a desired-state Model.
//
// The managers change Desired(); Apply sends the difference to the kernel as
// one atomic transaction (a very large batch of new chains is prepared in a
// few batches first, see stages); Resync reads the kernel's table back and
// repairs any drift the same way. A Table remembers what it last
// programmed, so an Apply with nothing changed sends nothing and a
// one-endpoint change sends a batch whose size does not depend on the size of
// the table. A Table is not safe for concurrent use: nftep drives it from its
// event loop.
type Table struct {
	cfg    TableConfig
	family uint8
	log    *slog.Logger

	desired *Model
	have    *state

	// needResync is set when the kernel's state is not known: at start, and
	// after a transaction failed or its outcome was lost.
	needResync bool
	// writer is the last other process the kernel named as committing a
	// change to the table (set by Watch, which may run on another
	// goroutine); Resync names it when it repairs drift.
	writer atomic.Pointer[Writer]
	// gen is a ruleset generation at which the kernel's table is known to
	// hold what have records, when genKnown: the one our last commit
	// produced, provided the generation before it was also such a known
	// one (so no foreign commit landed in between), or the one at which a
	// resync read the table.
	gen      uint32
	genKnown bool

	last *Transaction
	v    validator
	// tr is the transport: the kernel of cfg.NetNSFd, or cfg.Transport.
	tr Transport
	// tune holds sizes and timings (tests change them).
	tune tuning
	// changes logs what changed in desired since the last commit (see
	// changeLog); reset when the kernel holds desired.
	changes *changeLog
	// afterBatch, when set, is called after batch i (from 1) of n of a
	// transaction committed (tests use it to stop a staged apply midway).
	afterBatch func(i, n int)
	// afterRead, when set, is called after each read of a resync, before
	// the generation is read again (tests commit a foreign change there to
	// make every read inconsistent).
	afterRead func()
	// foreign are removals in other tables for the next transaction (see
	// SetForeign).
	foreign []ForeignOp
	// partial is set by Trust: desired holds only part of the table.
	partial bool
	// plan is the transaction Plan prepared, if any.
	plan *tablePlan
}

// SetForeign makes the next transaction Apply or Resync sends also remove
// the objects of other tables that ops name, in the same kernel transaction
// (the last batch of a staged one), so that the kernel switches from their
// rules to ours at once. If the table needs no change, the removals are
// sent alone. They are sent once, whatever the outcome: a refused
// transaction changes nothing, and the caller, which knows whether they are
// still wanted, sets them again for the retry. SetForeign(nil) drops them.
func (t *Table) SetForeign(ops []ForeignOp) { t.foreign = ops }

// NewTable returns a Table for the table cfg names. It does not touch the
// kernel: the first Apply reads the table back (a previous nftep may have
// left it programmed) and then makes it match Desired().
func NewTable(cfg TableConfig) (*Table, error) {
	var fam uint8
	switch cfg.Family {
	case FamilyINet:
		fam = unix.NFPROTO_INET
	case FamilyARP:
		fam = unix.NFPROTO_ARP
	default:
		return nil, fmt.Errorf("table %q: unsupported family %q", cfg.Name, cfg.Family)
	}
	if cfg.Name == "" || len(cfg.Name) > 255 {
		return nil, fmt.Errorf("table name %q: must be 1 to 255 bytes", cfg.Name)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Table{
		cfg:        cfg,
		family:     fam,
		log:        log,
		desired:    NewModel(cfg.Family, cfg.Name),
		have:       newState(),
		needResync: true,
		v:          vocabularyValidator{},
		tr:         cfg.Transport,
		tune:       defaultTuning(),
	}
	if t.tr == nil {
		k := newKernelTransport(cfg.NetNSFd)
		k.owned = cfg.Owned
		t.tr = k
	}
	t.changes = t.desired.track()
	if cfg.Generations != nil {
		cfg.Generations.add(t)
	}
	return t, nil
}

// Desired returns the model the managers change. Apply makes the kernel
// match it.
func (t *Table) Desired() *Model { return t.desired }

// Programmed returns a copy of what the Table believes the kernel holds: the
// model as of the last successful Apply or Resync. Chains whose content a
// resync could not match appear with no rules. For tests.
func (t *Table) Programmed() *Model { return t.have.model(t.cfg.Family, t.cfg.Name) }

// LastTransaction returns the record of the last transaction Apply, Resync
// or Delete planned (sent or not), or nil before the first.
func (t *Table) LastTransaction() *Transaction { return t.last }

// NeedsResync reports whether the next Apply will read the table back first:
// before the first Apply, and after a transaction that failed or whose
// outcome is unknown.
func (t *Table) NeedsResync() bool { return t.needResync }

// Live reports whether the kernel holds the table as this Table last
// committed or read it, with no resync pending: the table exists, and what
// it enforces is what was committed. False before the first Apply, and
// after a transaction that failed or whose outcome is unknown.
func (t *Table) Live() bool { return !t.needResync && t.have.table }

func (t *Table) describe() string { return string(t.cfg.Family) + " " + t.cfg.Name }

// ApplyStats describes one transaction.
type ApplyStats struct {
	// Operations is the number of objects added or removed (rules and
	// elements count one each); 0 when nothing needed sending.
	Operations int
	// Messages and Bytes are the size of the netlink batches, Batches
	// their number: 1, or more for a large cold start (see stages).
	Messages int
	Bytes    int
	Batches  int
	// Resynced is true when Apply read the table back first (see
	// NeedsResync).
	Resynced bool
	// Plan is the time spent comparing models, Encode building the batch,
	// Kernel sending it and reading the kernel's answer (the kernel applies
	// the batch inside that send), Total all of Apply.
	Plan, Encode, Kernel, Total time.Duration
}

// Apply makes the kernel's table match Desired() in one transaction and
// returns what it sent. (When the transaction would write more than 65,536
// rules into chains nothing live refers to, such as a cold start of
// thousands of endpoints, those chains are first filled in batches that
// nothing refers to yet, and one last batch makes them live: see stages.)
// If the model holds an invalid object, Apply returns
// an error naming it and sends nothing (IsInvalid). If the kernel refuses the
// transaction, nothing changed; Apply returns an *Error saying what the
// transaction was doing and which operation the kernel refused, and the next
// Apply first reads the table back. An error for which IsStateUnknown holds
// means the transaction may or may not have been committed; the next Apply
// resyncs as well.
func (t *Table) Apply(ctx context.Context) (ApplyStats, error) {
	if t.needResync && t.partial {
		return ApplyStats{}, fmt.Errorf("apply to table %s: %w", t.describe(), ErrPartial)
	}
	if t.needResync || t.plan != nil && t.plan.resync {
		rs, err := t.Resync(ctx)
		st := rs.Apply
		st.Resynced = true
		st.Total = rs.Total
		return st, err
	}
	start := time.Now()
	p := t.takePlan(false)
	if p != nil {
		start = start.Add(-p.took)
	} else {
		var err error
		if p, err = t.planApply(); err != nil {
			return ApplyStats{}, err
		}
	}
	st, err := t.execute(ctx, p.pl, p.plan)
	st.Total = time.Since(start)
	return st, err
}

// planApply plans Apply's transaction from what the Table knows the kernel
// holds.
func (t *Table) planApply() (*tablePlan, error) {
	start := time.Now()
	pl, err := (&planner{have: t.have, want: t.desired, v: t.v, changed: t.changes, partial: t.partial}).plan()
	if err != nil {
		return nil, fmt.Errorf("apply to table %s: %w", t.describe(), &invalidError{err})
	}
	took := time.Since(start)
	return &tablePlan{pl: pl, plan: took, took: took, version: t.desired.version}, nil
}

// tablePlan is a planned transaction: Plan's for the next Apply or Resync,
// or the one Apply or Resync plans for itself.
type tablePlan struct {
	pl *planned
	// plan is the time spent planning; took the time of the whole
	// preparation (with a resync's read).
	plan, took time.Duration
	// resync: planned as Resync plans, after a read of the table (or a
	// check of the generation); rs says what the read did.
	resync bool
	rs     ResyncStats
	// version is the desired model's version (Model.version) planned.
	version uint64
}

// Plan prepares the transaction that the next Apply, or with resync the
// next Resync, sends, and checks it, without sending anything: it reads
// the table back first when that call would (NeedsResync, or resync), and
// an invalid object of the model fails here (IsInvalid). So a caller can
// know that every table it is about to program is valid before it changes
// anything, in the kernel or elsewhere (nftep writes interface sysctls
// only then). The plan is sent by the next Apply or Resync if Desired() has
// not changed since; otherwise that call plans again.
func (t *Table) Plan(ctx context.Context, resync bool) error {
	t.plan = nil
	var (
		p   *tablePlan
		err error
	)
	switch {
	case t.needResync && t.partial:
		return fmt.Errorf("apply to table %s: %w", t.describe(), ErrPartial)
	case resync || t.needResync:
		p, err = t.planResync(ctx)
	default:
		p, err = t.planApply()
	}
	if err != nil {
		return err
	}
	t.plan = p
	return nil
}

// takePlan returns the plan Plan made, if it is still the plan for the
// call (resync: Resync's) and Desired() is unchanged since, and forgets
// it.
func (t *Table) takePlan(resync bool) *tablePlan {
	p := t.plan
	t.plan = nil
	if p == nil || p.resync != resync || p.version != t.desired.version {
		return nil
	}
	return p
}

// execute sends pl's transaction (if it has any operations) and records the
// result.
func (t *Table) execute(ctx context.Context, pl *planned, planTime time.Duration) (ApplyStats, error) {
	tx := pl.tx
	t.last = tx
	foreign := t.foreign
	t.foreign = nil
	st := ApplyStats{Operations: tx.NumOperations() + len(foreign), Plan: planTime}
	if len(tx.Ops) == 0 && len(foreign) > 0 {
		tx.Foreign = foreign
		if err := ctx.Err(); err != nil {
			return st, err
		}
		return st, t.sendForeignOnly(ctx, tx, &st)
	}
	if len(tx.Ops) == 0 {
		t.have.commit(pl, t.desired)
		t.changes.reset()
		return st, nil
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	parts := stages(pl, t.have, t.tune.stageMinRules, t.tune.stageRules)
	if parts == nil {
		parts = []*Transaction{tx}
	}
	if len(foreign) > 0 {
		last := *parts[len(parts)-1]
		last.Foreign = foreign
		parts[len(parts)-1] = &last
		tx.Foreign = foreign
	}
	gen, genKnown, err := t.sendStages(ctx, pl, parts, &st)
	tx.Messages, tx.Bytes, tx.Batches = st.Messages, st.Bytes, st.Batches
	if err != nil {
		t.needResync = true
		t.genKnown = false
		return st, err
	}
	tx.Gen = gen
	t.gen, t.genKnown = gen, genKnown
	t.have.commit(pl, t.desired)
	t.changes.reset()
	t.log.Debug("nftables transaction committed", "table", t.describe(), "summary", tx.Summary(),
		"batches", st.Batches, "messages", st.Messages, "bytes", st.Bytes, "encode", st.Encode, "kernel", st.Kernel)
	return st, nil
}

// sendForeignOnly sends tx, which holds only removals in other tables. Our
// table is unchanged, so what we know of it stays known: the generation
// moves by our commit alone when it was known right before.
func (t *Table) sendForeignOnly(ctx context.Context, tx *Transaction, st *ApplyStats) error {
	b, err := t.tr.prepare(t.family, t.cfg.Name, tx, nil)
	if err != nil {
		return err
	}
	defer b.release()
	st.Messages, st.Bytes = b.stats()
	st.Batches = 1
	tx.Messages, tx.Bytes, tx.Batches = st.Messages, st.Bytes, 1
	start := time.Now()
	gen, known, err := t.send(ctx, b, tx, tx.Summary(), t.gen, t.genKnown)
	st.Kernel = time.Since(start)
	if err != nil {
		// Our table is untouched by a refused transaction.
		return err
	}
	tx.Gen = gen
	t.gen, t.genKnown = gen, known
	return nil
}

// Delete removes the whole table from the kernel (`nft delete table`), for
// `nftep cleanup`. A table that does not exist is not an error. The desired
// model is kept; a later Apply recreates the table.
func (t *Table) Delete(ctx context.Context) error {
	tx := &Transaction{Family: t.cfg.Family, Table: t.cfg.Name, Ops: []Op{{Kind: OpDeleteTable}}}
	t.last = tx
	b, err := t.tr.prepare(t.family, t.cfg.Name, tx, nil)
	if err != nil {
		return err
	}
	defer b.release()
	tx.Messages, tx.Bytes = b.stats()
	tx.Batches = 1
	_, _, err = t.send(ctx, b, tx, tx.Summary(), 0, false)
	t.have = newState()
	t.needResync = true
	t.genKnown = false
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// Close releases what the Table holds in the kernel beyond the table: for
// an Owned table, the socket that owns it, which makes the kernel delete
// the table. For other tables it does nothing.
func (t *Table) Close() error {
	if c, ok := t.tr.(interface{ close() error }); ok {
		return c.close()
	}
	return nil
}

// tuning holds the engine's sizes and timings. NewTable sets the defaults;
// tests in this package set smaller ones (to stage a small table, to
// resubscribe quickly).
type tuning struct {
	// stageMinRules and stageRules: see stages.
	stageMinRules, stageRules int
	// watchBackoffMin and watchBackoffMax bound the wait before a failed
	// event subscription is opened again (see Watch).
	watchBackoffMin, watchBackoffMax time.Duration
	// watchSubscribed, when set, is called each time Watch's
	// subscription is open.
	watchSubscribed func()
}

func defaultTuning() tuning {
	return tuning{
		stageMinRules: defaultStageMinRules, stageRules: defaultStageRules,
		watchBackoffMin: 100 * time.Millisecond, watchBackoffMax: 10 * time.Second,
	}
}
