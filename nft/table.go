package nft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
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
	// Generations, when set, is shared by the Tables this process programs
	// in the namespace, so that a commit to one does not make the others
	// read their tables back at their next Resync (see Generations).
	Generations *Generations
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
	// gen is a ruleset generation at which the kernel's table is known to
	// hold what have records, when genKnown: the one our last commit
	// produced, provided the generation before it was also such a known
	// one (so no foreign commit landed in between), or the one at which a
	// resync read the table.
	gen      uint32
	genKnown bool

	last *Transaction
	v    validator
	// rcvbuf, when set, replaces the receive buffer size of transactions
	// (tests use it to lose replies).
	rcvbuf int
	// afterBatch, when set, is called after batch i (from 1) of n of a
	// transaction committed (tests use it to stop a staged apply midway).
	afterBatch func(i, n int)
	// afterRead, when set, is called after each read of a resync, before
	// the generation is read again (tests commit a foreign change there to
	// make every read inconsistent).
	afterRead func()
}

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
	}
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
	if t.needResync {
		rs, err := t.Resync(ctx)
		st := rs.Apply
		st.Resynced = true
		st.Total = rs.Total
		return st, err
	}
	start := time.Now()
	p := &planner{have: t.have, want: t.desired, v: t.v}
	pl, err := p.plan()
	if err != nil {
		return ApplyStats{}, fmt.Errorf("apply to table %s: %w", t.describe(), &invalidError{err})
	}
	st, err := t.execute(ctx, pl, time.Since(start))
	st.Total = time.Since(start)
	return st, err
}

// execute sends pl's transaction (if it has any operations) and records the
// result.
func (t *Table) execute(ctx context.Context, pl *planned, planTime time.Duration) (ApplyStats, error) {
	tx := pl.tx
	t.last = tx
	st := ApplyStats{Operations: tx.NumOperations(), Plan: planTime}
	if len(tx.Ops) == 0 {
		t.have.commit(pl, t.desired)
		return st, nil
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	parts := stages(pl, t.have)
	if parts == nil {
		parts = []*Transaction{tx}
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
	t.log.Debug("nftables transaction committed", "table", t.describe(), "summary", tx.Summary(),
		"batches", st.Batches, "messages", st.Messages, "bytes", st.Bytes, "encode", st.Encode, "kernel", st.Kernel)
	return st, nil
}

// Staging ("prepare, then publish": a chain nothing refers to has no effect
// on traffic, so it can be written ahead of the batch that makes it live; see
// docs/architecture.md). A cold start
// of 10,000 workloads is one batch of 85 MB that the kernel takes without
// complaint (TestKernelScaleCold), but holding it whole doubles the daemon's
// peak memory, and encoding it cannot overlap with the kernel applying it.
// So a transaction that writes more than stageMinRules rules into regular
// chains that nothing live refers to goes in several batches. Those chains
// are the new ones, and the existing ones that no base chain reaches
// (through jumps, gotos and verdict maps) in the kernel's table as the
// Table knows it: after a staged apply that stopped midway, the retry finds
// the prepared chains in the kernel, still unreached, and stages again. The
// batches are:
//
//  1. the table, the new chains, empty (new base chains with policy accept),
//     the new sets with their elements, and flushes of the unreached
//     chains being rewritten;
//  2. the rules of those regular chains, stageRules at a time;
//  3. everything else, in the planned order: the base chains' rules and
//     policies, other rewrites, element changes, deletions.
//
// Nothing is live until the last batch commits. An empty base chain with
// policy accept decides nothing (accept ends only its own base chain), and
// nothing live refers to the chains and sets written early until the last
// batch (only base chains, the chains they reach and new elements of
// existing maps could, and they are all in it). So batches 1 and 2 change
// no packet's fate: what traffic sees still changes in one atomic step; on
// a node where the table already exists, the old rules stay enforced until
// then. Creating every chain in the first batch also keeps the kernel's
// listing order (creation order) the order Model.String prints. While the
// kernel applies one batch, the next is encoded on another CPU. A plan that
// recreates an existing chain or set goes as one batch, since rules written
// early could meet the old definition; so does one when the Table cannot
// tell what is live (a chain it reaches holds rules it does not know).
//
// The sizes are variables only so that tests can stage small tables.
var (
	stageMinRules = 65536
	stageRules    = 16384
)

// stages splits pl's transaction (planned against have) for staging, or
// returns nil when it goes as one batch.
func stages(pl *planned, have *state) []*Transaction {
	if pl.replaces {
		return nil
	}
	tx := pl.tx
	// The rules that could be staged, counted first without the
	// reachability walk, which only a large transaction needs.
	count := func(stage func(name string) bool) int {
		n := 0
		for i := range tx.Ops {
			if op := &tx.Ops[i]; op.Kind == OpAddRules && op.Chain.Base == nil && stage(op.Name) {
				n += len(op.Chain.Rules)
			}
		}
		return n
	}
	if count(func(string) bool { return true }) <= stageMinRules {
		return nil
	}
	var live map[string]bool
	if have != nil {
		var unknown bool
		if live, unknown = have.liveChains(); unknown {
			live = nil
		}
	}
	staged := func(name string) bool {
		if pl.fresh["chain "+name] {
			return true
		}
		if live == nil {
			return false
		}
		cs := have.chains[name]
		return cs != nil && cs.base == nil && !live[name]
	}
	if count(staged) <= stageMinRules {
		return nil
	}
	part := func() *Transaction { return &Transaction{Family: tx.Family, Table: tx.Table} }
	head, publish := part(), part()
	var rules []*Transaction
	n := 0
	for _, op := range tx.Ops {
		switch {
		case op.Kind == OpAddTable,
			op.Kind == OpAddChain && pl.fresh["chain "+op.Name],
			op.Kind == OpAddSet && pl.fresh["set "+op.Name],
			op.Kind == OpFlushChain && staged(op.Name):
			head.Ops = append(head.Ops, op)
		case op.Kind == OpAddChain && pl.fresh["base "+op.Name]:
			c := *op.Chain
			b := *c.Base
			b.Policy = PolicyAccept
			c.Base, c.Rules = &b, nil
			head.Ops = append(head.Ops, Op{Kind: OpAddChain, Name: op.Name, Chain: &c})
			if basePolicy(op.Chain.Base) != PolicyAccept {
				publish.Ops = append(publish.Ops, Op{Kind: OpAddChain, Name: op.Name, Chain: op.Chain, Policy: true})
			}
		case op.Kind == OpAddRules && op.Chain.Base == nil && staged(op.Name):
			if len(rules) == 0 || n > 0 && n+len(op.Chain.Rules) > stageRules {
				rules = append(rules, part())
				n = 0
			}
			cur := rules[len(rules)-1]
			cur.Ops = append(cur.Ops, op)
			n += len(op.Chain.Rules)
		default:
			publish.Ops = append(publish.Ops, op)
		}
	}
	out := append([]*Transaction{head}, rules...)
	if len(publish.Ops) > 0 {
		out = append(out, publish)
	}
	return out
}

// sendStages encodes and sends the parts in order, encoding the next part
// while the kernel applies the current one. It returns the generation the
// last commit produced, known when the Table's generation was known and
// each part's commit followed the previous one (or, for the first part,
// t.gen) with no other commit in between.
func (t *Table) sendStages(ctx context.Context, pl *planned, parts []*Transaction, st *ApplyStats) (uint32, bool, error) {
	type encoded struct {
		b   *batch
		err error
		d   time.Duration
	}
	ch := make(chan encoded)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(ch)
		for _, part := range parts {
			start := time.Now()
			b, err := encodeBatch(t.family, t.cfg.Name, part, pl)
			select {
			case ch <- encoded{b, err, time.Since(start)}:
			case <-done:
				if b != nil {
					b.release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	gen, known := t.gen, t.genKnown
	summary := pl.tx.Summary()
	for i, part := range parts {
		if i > 0 {
			if err := ctx.Err(); err != nil {
				// Earlier batches only prepared unreferenced chains; the
				// resync that follows sorts them out.
				return 0, false, fmt.Errorf("apply to table %s: stopped after batch %d of %d: %w", t.describe(), i, len(parts), err)
			}
		}
		e := <-ch
		st.Encode += e.d
		if e.err != nil {
			if i > 0 {
				return 0, false, fmt.Errorf("apply to table %s: batch %d of %d: %w", t.describe(), i+1, len(parts), e.err)
			}
			return 0, false, fmt.Errorf("apply to table %s: %w", t.describe(), &invalidError{e.err})
		}
		st.Messages += e.b.msgs
		st.Bytes += e.b.size
		st.Batches++
		what := summary
		if len(parts) > 1 {
			what = fmt.Sprintf("%s; batch %d of %d", summary, i+1, len(parts))
		}
		start := time.Now()
		g, ok, err := t.send(ctx, e.b, part, what, gen, known)
		st.Kernel += time.Since(start)
		e.b.release()
		if err != nil {
			return 0, false, err
		}
		gen, known = g, ok
		if t.afterBatch != nil {
			t.afterBatch(i+1, len(parts))
		}
	}
	return gen, known, nil
}

// send opens a fresh socket, sends the batch and reads the kernel's answer.
// It returns the generation read after the commit, and whether the table is
// known to hold exactly what we programmed at that generation: only when
// the caller knew the table at generation want (wantKnown), the generation
// read just before sending is still want (no foreign commit landed since),
// and the one read after is one more (every commit bumps it by exactly one,
// so anything else means another commit came in between).
//
// tx holds the batch's operations (to name the one the kernel refuses);
// summary says what the whole transaction does.
func (t *Table) send(ctx context.Context, b *batch, tx *Transaction, summary string, want uint32, wantKnown bool) (uint32, bool, error) {
	fail := func(op string, err error, more int, unknown bool) error {
		return &Error{Table: t.describe(), Summary: summary, Op: op, Err: err, More: more, unknown: unknown}
	}
	s, err := dialNetfilter(t.cfg.NetNSFd)
	if err != nil {
		return 0, false, fail("", err, 0, false)
	}
	defer s.Close()
	// The send buffer must hold the whole batch (one sendmsg, one skb).
	// Replies are only errors, with NETLINK_CAP_ACK about 40 bytes each but
	// charged to the receive buffer at their skb's true size; room for an
	// error per message means even a batch that fails everywhere is read
	// back completely instead of ending in ENOBUFS.
	rcv := (256 << 10) + b.msgs*1024
	if t.rcvbuf > 0 {
		rcv = t.rcvbuf
	}
	if err := s.setBuffers(b.size+(256<<10), rcv); err != nil {
		return 0, false, fail("", err, 0, false)
	}
	g0, err := s.getGen(ctx)
	if err != nil {
		return 0, false, fail("", err, 0, false)
	}
	if err := s.sendmsg(b.iovecs()); err != nil {
		// Nothing reached nf_tables: netlink_sendmsg failed before
		// delivering (EMSGSIZE, ENOMEM).
		return 0, false, fail("send batch", err, 0, false)
	}
	// nf_tables processes the batch, commit included, inside the sendmsg
	// call (netlink_unicast_kernel runs nfnetlink_rcv in the sender's
	// context), so every reply is queued by now: drain without waiting.
	var (
		errs   []nlError
		endAck bool
	)
	for {
		reply, err := s.recv(false)
		if err != nil {
			// Typically ENOBUFS: replies were dropped, so whether the
			// batch committed is unknown (the kernel may have committed
			// it and then had no room for the replies).
			return 0, false, fail("read the kernel's answer", err, 0, true)
		}
		if reply == nil {
			break
		}
		if err := forEachMsg(reply, func(m nlMsg) error {
			if m.typ != unix.NLMSG_ERROR {
				return nil
			}
			ne, ok := parseNLError(m)
			if !ok {
				return nil
			}
			if ne.errno == 0 {
				if ne.seq == b.endSeq {
					endAck = true
				}
				return nil
			}
			errs = append(errs, ne)
			return nil
		}); err != nil {
			return 0, false, fail("read the kernel's answer", err, 0, true)
		}
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].seq < errs[j].seq })
		first := errs[0]
		var err error = first.errno
		if first.msg != "" {
			err = fmt.Errorf("%w (%s)", first.errno, first.msg)
		}
		return 0, false, fail(b.describe(tx, first.seq), err, len(errs)-1, false)
	}
	if !endAck {
		// BATCH_END carries NLM_F_ACK: the kernel acknowledges it only once
		// the batch committed. No ack and no error means a reply was lost.
		return 0, false, fail("", errors.New("no acknowledgement of the batch end"), 0, true)
	}
	g1, err := s.getGen(ctx)
	if err != nil {
		return 0, false, nil
	}
	if g1 == g0+1 && t.cfg.Generations != nil {
		t.cfg.Generations.committed(t, g0)
	}
	return g1, wantKnown && g0 == want && g1 == g0+1, nil
}

// Delete removes the whole table from the kernel (`nft delete table`), for
// `nftep cleanup`. A table that does not exist is not an error. The desired
// model is kept; a later Apply recreates the table.
func (t *Table) Delete(ctx context.Context) error {
	tx := &Transaction{Family: t.cfg.Family, Table: t.cfg.Name, Ops: []Op{{Kind: OpDeleteTable}}}
	t.last = tx
	b, err := encodeBatch(t.family, t.cfg.Name, tx, nil)
	if err != nil {
		return err
	}
	defer b.release()
	tx.Messages, tx.Bytes, tx.Batches = b.msgs, b.size, 1
	_, _, err = t.send(ctx, b, tx, tx.Summary(), 0, false)
	t.have = newState()
	t.needResync = true
	t.genKnown = false
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// msgRef says which operation (and which rule or element of it) a message
// of the batch belongs to, so that an error can name the object.
type msgRef struct {
	op   int32 // index in Transaction.Ops
	sub  int32 // rule index, or index of the first element in the message
	anon bool  // an anonymous set of rule sub
}

// batch is one encoded transaction: the begin marker, the messages of each
// segment, the end marker.
type batch struct {
	begin, end []byte
	segs       []*batchWriter
	seq0       uint32 // of the begin marker; segment k numbers from seq0+1+k<<segShift
	endSeq     uint32
	msgs, size int // without the markers
}

// segShift spaces the sequence numbers of segments: 16M messages each.
const segShift = 24

// parallelWeight is the size (roughly in rules) above which a batch is
// encoded by several goroutines: a cold start of 240,000 rules encodes in
// half the time on two CPUs, a one-endpoint change is not worth a goroutine.
const parallelWeight = 20000

// opWeight estimates the encoding work of op.
func opWeight(op *Op) int {
	switch op.Kind {
	case OpAddRules:
		return len(op.Chain.Rules)
	case OpAddSet, OpAddElements, OpDeleteElements:
		return 1 + len(op.Elements)/4
	}
	return 1
}

// encodeBatch encodes tx. Large transactions are cut into segments of
// consecutive operations, encoded in parallel and sent in order.
func encodeBatch(family uint8, table string, tx *Transaction, pl *planned) (*batch, error) {
	b := &batch{seq0: uint32(time.Now().UnixNano())}
	total := 0
	for i := range tx.Ops {
		total += opWeight(&tx.Ops[i])
	}
	n := 1
	if total > parallelWeight {
		n = min(runtime.GOMAXPROCS(0), 8)
	}
	// Cut the operations into n runs of about equal weight.
	bounds := []int{0}
	acc, next := 0, 1
	for i := range tx.Ops {
		acc += opWeight(&tx.Ops[i])
		if next < n && acc >= total*next/n && i+1 < len(tx.Ops) {
			bounds = append(bounds, i+1)
			next++
		}
	}
	bounds = append(bounds, len(tx.Ops))
	b.segs = make([]*batchWriter, len(bounds)-1)
	errs := make([]error, len(b.segs))
	var wg sync.WaitGroup
	for k := range b.segs {
		w := &batchWriter{
			family:  family,
			table:   table,
			seqBase: b.seq0 + 1 + uint32(k)<<segShift,
			setID:   uint32(k) << 20,
			digests: map[string]digest{},
		}
		b.segs[k] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := bounds[k]; i < bounds[k+1]; i++ {
				if err := w.op(int32(i), &tx.Ops[i]); err != nil {
					errs[k] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.release()
		return nil, err
	}
	for _, w := range b.segs {
		b.msgs += w.bb.msgs
		b.size += w.bb.size
		if pl != nil && pl.digests != nil {
			for name, d := range w.digests {
				pl.digests[name] = d
			}
		}
	}
	// Begin and end of an nfnetlink batch carry the subsystem id in
	// nfgenmsg.res_id (big endian, nfnetlink.c nfnetlink_rcv_skb_batch).
	var e enc
	e.reset(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, b.seq0, unix.AF_UNSPEC)
	e.b[18], e.b[19] = 0, unix.NFNL_SUBSYS_NFTABLES
	b.begin = append([]byte(nil), e.finish()...)
	// NLM_F_ACK on the end marker: the kernel acknowledges it only when the
	// batch commits, which tells success apart from a lost reply.
	b.endSeq = b.seq0 + 1 + uint32(len(b.segs))<<segShift
	e.reset(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST|unix.NLM_F_ACK, b.endSeq, unix.AF_UNSPEC)
	e.b[18], e.b[19] = 0, unix.NFNL_SUBSYS_NFTABLES
	b.end = append([]byte(nil), e.finish()...)
	return b, nil
}

// iovecs returns the batch as the buffers of one sendmsg.
func (b *batch) iovecs() [][]byte {
	bufs := [][]byte{b.begin}
	for _, w := range b.segs {
		bufs = append(bufs, w.bb.chunks...)
	}
	bufs = append(bufs, b.end)
	if len(bufs) <= maxIovecs {
		return bufs
	}
	merged := &batchBuf{}
	for _, c := range bufs {
		merged.write(c)
	}
	return merged.chunks
}

// release returns the batch's memory.
func (b *batch) release() {
	for _, w := range b.segs {
		w.bb.release()
	}
}

// describe names the operation message seq belonged to, for an error.
func (b *batch) describe(tx *Transaction, seq uint32) string {
	if seq == b.seq0 || seq == b.endSeq {
		// nfnetlink reports a failed commit against the batch begin.
		return "commit"
	}
	rel := seq - b.seq0 - 1
	k, i := int(rel>>segShift), int(rel&(1<<segShift-1))
	if k >= len(b.segs) || i >= len(b.segs[k].refs) {
		return "message with unknown sequence number"
	}
	return b.segs[k].describe(tx, i)
}

// batchWriter encodes a run of a transaction's operations.
type batchWriter struct {
	family  uint8
	table   string
	e       enc
	bb      batchBuf
	refs    []msgRef
	seqBase uint32
	setID   uint32
	// digests of the chains whose rules were written, by chain name.
	digests map[string]digest
}

// seqOf is the sequence number of message i of the run.
func (w *batchWriter) seqOf(i int) uint32 { return w.seqBase + uint32(i) }

// start begins a message of type typ for ref.
func (w *batchWriter) start(typ, flags uint16, ref msgRef) {
	w.e.reset(msgType(typ), unix.NLM_F_REQUEST|flags, w.seqOf(len(w.refs)), w.family)
	w.refs = append(w.refs, ref)
}

func (w *batchWriter) finish() { w.bb.write(w.e.finish()) }

func (w *batchWriter) op(i int32, op *Op) error {
	ref := msgRef{op: i}
	switch op.Kind {
	case OpAddTable:
		w.start(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, ref)
		w.e.str(unix.NFTA_TABLE_NAME, w.table)
		// Flags 0 also wakes a table someone set dormant.
		w.e.be32(unix.NFTA_TABLE_FLAGS, 0)
		w.finish()
	case OpDeleteTable:
		w.start(unix.NFT_MSG_DELTABLE, 0, ref)
		w.e.str(unix.NFTA_TABLE_NAME, w.table)
		w.finish()
	case OpAddChain:
		return w.addChain(op.Chain, ref)
	case OpFlushChain:
		// DELRULE with a chain and no handle flushes the chain.
		w.start(unix.NFT_MSG_DELRULE, 0, ref)
		w.e.str(unix.NFTA_RULE_TABLE, w.table)
		w.e.str(unix.NFTA_RULE_CHAIN, op.Name)
		w.finish()
	case OpDeleteChain:
		w.start(unix.NFT_MSG_DELCHAIN, 0, ref)
		w.e.str(unix.NFTA_CHAIN_TABLE, w.table)
		w.e.str(unix.NFTA_CHAIN_NAME, op.Name)
		w.finish()
	case OpAddRules:
		return w.addRules(op.Chain, i)
	case OpAddSet:
		ns, err := encodeSet(&nftables.Table{Name: w.table, Family: nftables.TableFamily(w.family)}, op.Set)
		if err != nil {
			return err
		}
		w.setID++
		ns.ID = w.setID
		if err := w.addSet(ns, len(op.Elements), ref); err != nil {
			return fmt.Errorf("%s %q: %w", setNoun(op.Set), op.Name, err)
		}
		return w.elements(unix.NFT_MSG_NEWSETELEM, op, ns.Name, ns.ID, i)
	case OpDeleteSet:
		w.start(unix.NFT_MSG_DELSET, 0, ref)
		w.e.str(unix.NFTA_SET_TABLE, w.table)
		w.e.str(unix.NFTA_SET_NAME, op.Name)
		w.finish()
	case OpAddElements:
		return w.elements(unix.NFT_MSG_NEWSETELEM, op, op.Name, 0, i)
	case OpDeleteElements:
		return w.elements(unix.NFT_MSG_DELSETELEM, op, op.Name, 0, i)
	default:
		return fmt.Errorf("unknown operation %v", op.Kind)
	}
	return nil
}

// Verdict codes of a base chain policy (NF_DROP, NF_ACCEPT).
const (
	nfDrop   = 0
	nfAccept = 1
)

// Hook numbers (NF_INET_* and NF_ARP_*, include/uapi/linux/netfilter.h).
var inetHooks = map[Hook]uint32{
	HookPrerouting:  unix.NF_INET_PRE_ROUTING,
	HookInput:       unix.NF_INET_LOCAL_IN,
	HookForward:     unix.NF_INET_FORWARD,
	HookOutput:      unix.NF_INET_LOCAL_OUT,
	HookPostrouting: unix.NF_INET_POST_ROUTING,
}

var arpHooks = map[Hook]uint32{
	HookInput:  0, // NF_ARP_IN
	HookOutput: 1, // NF_ARP_OUT
}

func (w *batchWriter) hookNum(h Hook) (uint32, bool) {
	if w.family == unix.NFPROTO_ARP {
		n, ok := arpHooks[h]
		return n, ok
	}
	n, ok := inetHooks[h]
	return n, ok
}

func (w *batchWriter) addChain(c *Chain, ref msgRef) error {
	w.start(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE, ref)
	w.e.str(unix.NFTA_CHAIN_TABLE, w.table)
	w.e.str(unix.NFTA_CHAIN_NAME, c.Name)
	if b := c.Base; b != nil {
		num, ok := w.hookNum(b.Hook)
		if !ok {
			return fmt.Errorf("chain %q: hook %q is not valid in this family", c.Name, b.Hook)
		}
		h := w.e.nest(unix.NFTA_CHAIN_HOOK)
		w.e.be32(unix.NFTA_HOOK_HOOKNUM, num)
		w.e.be32(unix.NFTA_HOOK_PRIORITY, uint32(int32(b.Priority)))
		if err := w.e.end(h); err != nil {
			return err
		}
		pol := uint32(nfAccept)
		if basePolicy(b) == PolicyDrop {
			pol = nfDrop
		}
		w.e.be32(unix.NFTA_CHAIN_POLICY, pol)
		typ := b.Type
		if typ == "" {
			typ = ChainTypeFilter
		}
		w.e.str(unix.NFTA_CHAIN_TYPE, string(typ))
	}
	w.finish()
	return nil
}

// addRules appends every rule of c, each preceded by the anonymous sets it
// uses. While the rules' userdata passes by, it computes the chain's digest
// for the next resync.
func (w *batchWriter) addRules(c *Chain, opIdx int32) error {
	d := newDigester()
	for ri, r := range c.Rules {
		exprs, anon, err := encodeRule(r)
		if err != nil {
			return fmt.Errorf("chain %q: rule %d: %w", c.Name, ri+1, err)
		}
		ref := msgRef{op: opIdx, sub: int32(ri), anon: true}
		for _, a := range anon {
			a.Set.Table = &nftables.Table{Name: w.table, Family: nftables.TableFamily(w.family)}
			if err := w.addSet(a.Set, len(a.Elements), ref); err != nil {
				return fmt.Errorf("chain %q: rule %d: anonymous set: %w", c.Name, ri+1, err)
			}
			if err := w.elementList(unix.NFT_MSG_NEWSETELEM, a.Set, a.Set.Name, a.Set.ID, a.Elements, ref, nil); err != nil {
				return fmt.Errorf("chain %q: rule %d: anonymous set: %w", c.Name, ri+1, err)
			}
		}
		ud := ruleUserData(r)
		d.add(ruleHashFromUserData(ud))
		w.start(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, msgRef{op: opIdx, sub: int32(ri)})
		w.e.str(unix.NFTA_RULE_TABLE, w.table)
		w.e.str(unix.NFTA_RULE_CHAIN, c.Name)
		list := w.e.nest(unix.NFTA_RULE_EXPRESSIONS)
		for _, x := range exprs {
			el := w.e.nest(unix.NFTA_LIST_ELEM)
			if err := w.e.expr(w.family, x); err != nil {
				return fmt.Errorf("chain %q: rule %d: marshal %T: %w", c.Name, ri+1, x, err)
			}
			if err := w.e.end(el); err != nil {
				return fmt.Errorf("chain %q: rule %d: %w", c.Name, ri+1, err)
			}
		}
		if err := w.e.end(list); err != nil {
			return fmt.Errorf("chain %q: rule %d: %w", c.Name, ri+1, err)
		}
		if len(ud) > 0 {
			w.e.bytes(unix.NFTA_RULE_USERDATA, ud)
		}
		w.finish()
	}
	w.digests[c.Name] = d.sum()
	return nil
}

// Set attributes google/nftables v0.3.0 defines but x/sys/unix does not.
const (
	nftSetConcat       = 0x80 // NFT_SET_CONCAT
	nftaSetDescConcat  = 2    // NFTA_SET_DESC_CONCAT
	nftaSetElemKeyEnd  = 10   // NFTA_SET_ELEM_KEY_END
	nftDataVerdictType = 0xffffff00
)

// addSet writes NEWSET for s as google/nftables' AddSet does (set.go), with
// the vocabulary's userdata, so that nft lists our sets as Set.String prints
// them.
//
// nelems is the number of elements a constant set is created with: nft
// and google/nftables send it as the set's size, and the kernel picks the
// set backend from it.
func (w *batchWriter) addSet(s *nftables.Set, nelems int, ref msgRef) error {
	if s.Counter {
		return errors.New("set counters are not supported")
	}
	flags := setFlags(s)
	w.start(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, ref)
	e := &w.e
	e.str(unix.NFTA_SET_TABLE, w.table)
	e.str(unix.NFTA_SET_NAME, s.Name)
	e.be32(unix.NFTA_SET_FLAGS, flags)
	e.be32(unix.NFTA_SET_KEY_TYPE, s.KeyType.GetNFTMagic())
	e.be32(unix.NFTA_SET_KEY_LEN, s.KeyType.Bytes)
	e.be32(unix.NFTA_SET_ID, s.ID)
	if s.IsMap {
		if s.DataType.GetNFTMagic() == nftables.TypeVerdict.GetNFTMagic() {
			e.be32(unix.NFTA_SET_DATA_TYPE, nftDataVerdictType)
		} else {
			e.be32(unix.NFTA_SET_DATA_TYPE, s.DataType.GetNFTMagic())
		}
		e.be32(unix.NFTA_SET_DATA_LEN, s.DataType.Bytes)
	}
	if s.HasTimeout && s.Timeout != 0 {
		e.attrHeader(unix.NFTA_SET_TIMEOUT, 8)
		e.b = binary.BigEndian.AppendUint64(e.b, uint64(s.Timeout.Milliseconds()))
	}
	if s.Constant {
		d := e.nest(unix.NFTA_SET_DESC)
		e.be32(unix.NFTA_SET_DESC_SIZE, uint32(nelems))
		if err := e.end(d); err != nil {
			return err
		}
	}
	if s.Size > 0 || s.Concatenation {
		d := e.nest(unix.NFTA_SET_DESC)
		if s.Size > 0 {
			e.be32(unix.NFTA_SET_DESC_SIZE, s.Size)
		}
		if s.Concatenation {
			c := e.nest(nftaSetDescConcat)
			for _, f := range nftables.ConcatSetTypeElements(s.KeyType) {
				// Each field: NFTA_LIST_ELEM{NFTA_SET_FIELD_LEN}, as
				// google/nftables encodes it.
				fe := e.nest(unix.NFTA_LIST_ELEM)
				e.be32(unix.NFTA_SET_DESC_SIZE, f.Bytes)
				if err := e.end(fe); err != nil {
					return err
				}
			}
			if err := e.end(c); err != nil {
				return err
			}
		}
		if err := e.end(d); err != nil {
			return err
		}
	}
	// The vocabulary's userdata: google/nftables' plus the data byte order
	// of a mark map, without which nft prints mark 0x1 as 0x01000000.
	ud := nftSetUserData(s)
	if len(ud) > 0 {
		e.bytes(unix.NFTA_SET_USERDATA, ud)
	}
	w.finish()
	return nil
}

// maxElemList is the largest element list we put in one message. The list is
// one nested attribute and nla_len is a u16, so it must stay below 64 KiB;
// google/nftables v0.3.0 lets the length wrap and the kernel then sees only
// the first ~500 elements (2,000 ifname → verdict elements in one call left
// 510 in the kernel, and Flush returned nil).
const maxElemList = 60 << 10

// elements writes op's elements of set name (id != 0 for a set created in
// this batch) in as many messages as their size needs.
func (w *batchWriter) elements(typ uint16, op *Op, name string, id uint32, opIdx int32) error {
	if len(op.Elements) == 0 {
		return nil
	}
	// encodeElements sends elements in the printer's order (so that nft
	// lists a cold-started set as Set.String prints it); put op.Elements in
	// the same order so that an error can name the element it is about.
	sorted, err := sortElements(op.Set, op.Elements)
	if err != nil {
		return err
	}
	for i := range sorted {
		op.Elements[i] = sorted[i].Element
	}
	kes, err := encodeElements(op.Set, op.Elements)
	if err != nil {
		return err
	}
	ns, err := encodeSet(&nftables.Table{Name: w.table, Family: nftables.TableFamily(w.family)}, op.Set)
	if err != nil {
		return err
	}
	// Map kernel elements back to model elements for error messages: an
	// interval end belongs to the element before it.
	owner := make([]int32, len(kes))
	k := int32(-1)
	for i := range kes {
		if !kes[i].IntervalEnd || k < 0 {
			k++
		}
		owner[i] = k
	}
	if typ == unix.NFT_MSG_DELSETELEM {
		// The kernel finds the element by key; sending the value too would
		// only make the message bigger.
		for i := range kes {
			kes[i].VerdictData, kes[i].Val, kes[i].Comment = nil, nil, ""
		}
	}
	return w.elementList(typ, ns, name, id, kes, msgRef{op: opIdx}, owner)
}

// elementList writes kes into NEWSETELEM/DELSETELEM messages of at most
// maxElemList bytes of elements each, never separating an interval's start
// from its end.
func (w *batchWriter) elementList(typ uint16, s *nftables.Set, name string, id uint32, kes []nftables.SetElement, ref msgRef, owner []int32) error {
	flags := uint16(0)
	if typ == unix.NFT_MSG_NEWSETELEM {
		flags = unix.NLM_F_CREATE
	}
	i := 0
	for i < len(kes) {
		r := ref
		if owner != nil {
			r.sub = owner[i]
		}
		w.start(typ, flags, r)
		w.e.str(unix.NFTA_SET_ELEM_LIST_SET, name)
		if id != 0 {
			w.e.be32(unix.NFTA_SET_ELEM_LIST_SET_ID, id)
		}
		w.e.str(unix.NFTA_SET_ELEM_LIST_TABLE, w.table)
		list := w.e.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		listStart := len(w.e.b)
		for i < len(kes) {
			// Keep an interval's end with its start.
			j := i + 1
			if j < len(kes) && kes[j].IntervalEnd && !kes[i].IntervalEnd {
				j++
			}
			mark := len(w.e.b)
			for x := i; x < j; x++ {
				if err := w.element(s, &kes[x]); err != nil {
					return err
				}
			}
			if len(w.e.b)-listStart > maxElemList && mark > listStart {
				w.e.b = w.e.b[:mark]
				break
			}
			i = j
		}
		if err := w.e.end(list); err != nil {
			return err
		}
		w.finish()
	}
	return nil
}

// element appends one element to the message, encoded as google/nftables'
// makeElemList does, but in an NFTA_LIST_ELEM as nft sends it (the kernel
// ignores the type; google/nftables numbers elements from 1, which runs into
// the attribute flag bits past 32,767).
func (w *batchWriter) element(s *nftables.Set, v *nftables.SetElement) error {
	e := &w.e
	item := e.nest(unix.NFTA_LIST_ELEM)
	if v.IntervalEnd {
		e.be32(unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
	}
	k := e.nest(unix.NFTA_SET_ELEM_KEY)
	e.bytes(unix.NFTA_DATA_VALUE, v.Key)
	if err := e.end(k); err != nil {
		return err
	}
	if len(v.KeyEnd) > 0 {
		ke := e.nest(nftaSetElemKeyEnd)
		e.bytes(unix.NFTA_DATA_VALUE, v.KeyEnd)
		if err := e.end(ke); err != nil {
			return err
		}
	}
	if s.HasTimeout && v.Timeout != 0 {
		e.attrHeader(unix.NFTA_SET_ELEM_TIMEOUT, 8)
		e.b = binary.BigEndian.AppendUint64(e.b, uint64(v.Timeout.Milliseconds()))
	}
	switch {
	case v.VerdictData != nil:
		d := e.nest(unix.NFTA_SET_ELEM_DATA)
		vd := e.nest(unix.NFTA_DATA_VERDICT)
		e.be32(unix.NFTA_VERDICT_CODE, uint32(v.VerdictData.Kind))
		if v.VerdictData.Chain != "" {
			e.str(unix.NFTA_VERDICT_CHAIN, v.VerdictData.Chain)
		}
		if err := e.end(vd); err != nil {
			return err
		}
		if err := e.end(d); err != nil {
			return err
		}
	case len(v.Val) > 0:
		d := e.nest(unix.NFTA_SET_ELEM_DATA)
		e.bytes(unix.NFTA_DATA_VALUE, v.Val)
		if err := e.end(d); err != nil {
			return err
		}
	}
	if v.Comment != "" {
		e.bytes(unix.NFTA_SET_ELEM_USERDATA, userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_ELEM_COMMENT, v.Comment))
	}
	return e.end(item)
}

// describe names the operation of message i of the run, for an error.
func (w *batchWriter) describe(tx *Transaction, i int) string {
	ref := w.refs[i]
	op := &tx.Ops[ref.op]
	switch op.Kind {
	case OpAddTable:
		return "add table"
	case OpDeleteTable:
		return "delete table"
	case OpAddChain:
		if op.Chain.Base != nil {
			return fmt.Sprintf("add base chain %q (hook %s priority %d)", op.Name, op.Chain.Base.Hook, op.Chain.Base.Priority)
		}
		return fmt.Sprintf("add chain %q", op.Name)
	case OpFlushChain:
		return fmt.Sprintf("flush chain %q", op.Name)
	case OpDeleteChain:
		return fmt.Sprintf("delete chain %q", op.Name)
	case OpAddRules:
		r := op.Chain.Rules[ref.sub]
		what := "add rule"
		if ref.anon {
			what = "add the anonymous set of rule"
		}
		s := fmt.Sprintf("%s %d to chain %q", what, ref.sub+1, op.Name)
		if r.Comment != "" {
			s += fmt.Sprintf(" (comment %q)", r.Comment)
		}
		return s
	case OpAddSet:
		if i > 0 && w.refs[i-1].op == ref.op && int(ref.sub) < len(op.Elements) {
			return fmt.Sprintf("add element %q to new %s %q", op.Elements[ref.sub].Key, setNoun(op.Set), op.Name)
		}
		return fmt.Sprintf("add %s %q", setNoun(op.Set), op.Name)
	case OpDeleteSet:
		return fmt.Sprintf("delete %s %q", setNoun(op.Set), op.Name)
	case OpAddElements, OpDeleteElements:
		verb, prep := "add", "to"
		if op.Kind == OpDeleteElements {
			verb, prep = "delete", "from"
		}
		first := int(ref.sub)
		n := len(op.Elements) - first
		if i+1 < len(w.refs) && w.refs[i+1].op == ref.op {
			n = int(w.refs[i+1].sub) - first
		}
		s := fmt.Sprintf("%s element %q", verb, op.Elements[first].Key)
		if n > 1 {
			s = fmt.Sprintf("%s %d elements from %q", verb, n, op.Elements[first].Key)
		}
		return fmt.Sprintf("%s %s %s %q", s, prep, setNoun(op.Set), op.Name)
	}
	return op.Kind.String()
}
