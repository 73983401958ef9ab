package nft

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// Fake is an in-memory nf_tables with the kernel's semantics where nftep
// depends on them, for tests that run without root and want to see what was
// sent. Pass it as TableConfig.Transport to any number of Tables (a
// namespace's tables share one Fake, as they share the kernel's generation):
//
//   - a transaction applies whole or not at all; each commit moves the
//     ruleset generation by one;
//   - a rule or verdict-map element that jumps to a missing chain, or names
//     a missing set, is refused (ENOENT); a jump to a base chain too
//     (EOPNOTSUPP); so are jumps that make a loop (ELOOP);
//   - deleting a chain or set something still refers to is refused (EBUSY),
//     as is deleting what does not exist (ENOENT);
//   - an element whose key is there with another value, or that overlaps an
//     interval of the set, is refused (EEXIST);
//   - rules keep nftep's hash as the kernel keeps their userdata, so a
//     resync reads them back as it would from the kernel;
//   - every commit sends its subscribers the kernel's events: a message per
//     object added or removed, naming its table, then NEWGEN with the
//     generation and the committing process (this one for a Table's
//     commits; another for foreign changes). Table.Watch reads them as it
//     reads the kernel's.
//
// Tests make foreign changes with its other methods (FlushChain,
// InsertRule, DeleteElement, …), which commit like someone else's `nft`
// command: they move the generation and notify subscribers. Dump prints
// what it holds in nft syntax.
type Fake struct {
	mu         sync.Mutex
	skipEncode bool
	inPlace    bool
	gen        uint32
	tables     map[fakeKey]*fakeTable
	monitors   map[*eventQueue]struct{}
	// eventQueue is how many commits' events a subscriber holds unread
	// before it loses them (defaultFakeEventQueue; tests lower it).
	eventQueue int
	fail       []error
	commits    []*Transaction
	onCommit   func()
}

type fakeKey struct {
	family Family
	name   string
}

type fakeTable struct {
	chains   map[string]*fakeChain
	order    []string // creation order: how the kernel lists chains
	sets     map[string]*fakeSet
	setOrder []string
	// refs counts the references to each chain (from rules and verdict
	// map elements) and set (from rules), as the kernel's use counters
	// do, so that a deletion checks it in constant time; nil until first
	// needed, then kept by every change (see fakeRefs).
	refs *fakeRefs
}

type fakeChain struct {
	base  *BaseChain
	rules []fakeRule
}

// fakeRule is a rule; foreign ones (someone else's) carry no nftep hash in
// their userdata.
type fakeRule struct {
	r       *Rule
	foreign bool
}

type fakeSet struct {
	def      *Set // without elements
	elements map[string]Element
}

// NewFake returns an empty Fake at generation 1.
func NewFake() *Fake {
	return &Fake{gen: 1, tables: map[fakeKey]*fakeTable{}, monitors: map[*eventQueue]struct{}{}, eventQueue: defaultFakeEventQueue}
}

var _ Transport = (*Fake)(nil)

func familyOf(family uint8) Family {
	if family == unix.NFPROTO_ARP {
		return FamilyARP
	}
	return FamilyINet
}

// fakeBatch is a prepared transaction: the operations, and the size of the
// batch the kernel transport would send for them (encoding them also
// checks that they can be encoded).
type fakeBatch struct {
	key        fakeKey
	msgs, size int
}

func (b *fakeBatch) stats() (int, int) { return b.msgs, b.size }
func (b *fakeBatch) release()          {}

// SkipEncoding makes the Fake take transactions without encoding them
// first (a dry run's check of a large state, where encoding would be most
// of the cost); Messages and Bytes then read 0.
func (f *Fake) SkipEncoding() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.skipEncode = true
}

// InPlace makes the Fake commit a transaction into its table as it goes,
// instead of into a copy it installs when the whole transaction passed:
// a commit then costs what it changes, not the size of the table, and a
// refused one leaves the table half changed. For a dry run that drops its
// engine, and this Fake, when a transaction is refused (fileValidator).
func (f *Fake) InPlace() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inPlace = true
}

func (f *Fake) prepare(family uint8, table string, part *Transaction, pl *planned) (prepared, error) {
	key := fakeKey{familyOf(family), table}
	f.mu.Lock()
	skip := f.skipEncode
	f.mu.Unlock()
	if skip {
		return &fakeBatch{key: key}, nil
	}
	b, err := encodeBatch(family, table, part, pl, 0)
	if err != nil {
		return nil, err
	}
	defer b.release()
	return &fakeBatch{key: key, msgs: b.msgs, size: b.size}, nil
}

func (f *Fake) commit(ctx context.Context, p prepared, part *Transaction) (uint32, generation, error) {
	b := p.(*fakeBatch)
	f.mu.Lock()
	g0 := f.gen
	err := f.applyLocked(b.key, part)
	g1, hook := f.gen, f.onCommit
	f.mu.Unlock()
	if err != nil {
		return 0, generation{}, err
	}
	if hook != nil {
		hook()
	}
	return g0, generation{g1, true}, nil
}

// applyLocked applies part to the table key as one transaction, all or
// nothing, and records it; a refusal is a *refusal. f.mu is held.
func (f *Fake) applyLocked(key fakeKey, part *Transaction) error {
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		return &refusal{op: "commit", err: err}
	}
	if len(part.Foreign) > 0 {
		// The Fake holds nftep's tables only.
		return &refusal{op: part.Foreign[0].String(), err: syscall.EOPNOTSUPP}
	}
	next := f.tables[key]
	if !f.inPlace {
		next = next.clone()
	}
	for i := range part.Ops {
		var sub int
		var err error
		next, sub, err = next.apply(&part.Ops[i])
		if err != nil {
			return &refusal{op: describeOp(&part.Ops[i], sub), err: err}
		}
	}
	if err := next.loops(part.Ops); err != nil {
		return &refusal{op: "commit", err: err}
	}
	f.set(key, next, part.Ops, fakeSelf())
	f.commits = append(f.commits, part)
	return nil
}

// set installs t (nil: no table) as the table of key, the commit of ops by
// the process by: it moves the generation and sends the commit's events to
// the subscribers. f.mu is held.
func (f *Fake) set(key fakeKey, t *fakeTable, ops []Op, by Writer) {
	if t == nil {
		delete(f.tables, key)
	} else {
		f.tables[key] = t
	}
	f.gen++
	if len(f.monitors) == 0 {
		return
	}
	events := commitEvents(key, ops, f.gen, by)
	for q := range f.monitors {
		q.push(events)
	}
}

// monitor subscribes to the Fake's events (see eventQueue); closing the
// queue does not unsubscribe it, unmonitor does.
func (f *Fake) monitor() *eventQueue {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := newEventQueue(f.eventQueue)
	f.monitors[q] = struct{}{}
	return q
}

// unmonitor ends the subscription q.
func (f *Fake) unmonitor(q *eventQueue) {
	f.mu.Lock()
	delete(f.monitors, q)
	f.mu.Unlock()
	q.Close()
}

func (f *Fake) generation(context.Context) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, nil
}

func (f *Fake) readTable(_ context.Context, family uint8, name string) (*kernelTable, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	kt := &kernelTable{chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}}
	ft := f.tables[fakeKey{familyOf(family), name}]
	if ft == nil {
		return kt, nil
	}
	kt.exists = true
	for cname, c := range ft.chains {
		d := newDigester()
		for _, r := range c.rules {
			if r.foreign {
				d.add("")
			} else {
				d.add(ruleHash(r.r))
			}
		}
		kc := &kernelChain{rules: len(c.rules), digest: d.sum()}
		if c.base != nil {
			b := *c.base
			kc.base = &b
		}
		kt.chains[cname] = kc
		kt.rules += len(c.rules)
	}
	for sname, s := range ft.sets {
		ns, err := encodeSet(&nftables.Table{Name: name, Family: nftables.TableFamily(family)}, s.def)
		if err != nil {
			return nil, fmt.Errorf("set %q: %w", sname, err)
		}
		ks := &kernelSet{flags: setFlags(ns), keyType: ns.KeyType.GetNFTMagic(), keyLen: ns.KeyType.Bytes}
		if ns.IsMap {
			ks.hasData = true
			ks.dataType, ks.dataLen = ns.DataType.GetNFTMagic(), ns.DataType.Bytes
			if ks.dataType == nftables.TypeVerdict.GetNFTMagic() {
				ks.dataType = nftDataVerdictType
			}
		}
		kt.sets[sname] = ks
	}
	return kt, nil
}

func (f *Fake) readElements(ctx context.Context, family uint8, table string, sets []string) []elementsRead {
	out := make([]elementsRead, len(sets))
	for i, set := range sets {
		out[i].elements, out[i].err = f.readSetElements(ctx, family, table, set)
	}
	return out
}

// readSetElements reads the elements of one set, in the kernel's form.
func (f *Fake) readSetElements(_ context.Context, family uint8, table, set string) ([]nftables.SetElement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := f.tables[fakeKey{familyOf(family), table}]
	if ft == nil || ft.sets[set] == nil {
		return nil, syscall.ENOENT
	}
	s := ft.sets[set]
	es := make([]Element, 0, len(s.elements))
	for _, e := range s.elements {
		es = append(es, e)
	}
	return encodeElements(s.def, es)
}

// subscribe reads the Fake's events with the kernel transport's reader.
func (f *Fake) subscribe(ctx context.Context, family uint8, table string, opened func(), notify func(by *Writer)) (bool, error) {
	q := f.monitor()
	defer f.unmonitor(q)
	opened()
	var hold atomic.Pointer[func()]
	return watchEvents(ctx, q, family, table, notify, &hold)
}

// FailNext makes the next commits fail, one error each (a syscall.Errno as
// the kernel would answer); nothing of them is applied.
func (f *Fake) FailNext(errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = append(f.fail, errs...)
}

// OnCommit sets a function called after each commit of a Table (not after
// foreign changes), outside the Fake's lock.
func (f *Fake) OnCommit(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onCommit = fn
}

// Transactions returns the transactions Tables committed, in order (a
// staged apply commits several).
func (f *Fake) Transactions() []*Transaction {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commits)
}

// Generation returns the ruleset generation.
func (f *Fake) Generation() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen
}

// HasTable reports whether the table family/name exists.
func (f *Fake) HasTable(family Family, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tables[fakeKey{family, name}] != nil
}

// Dump prints every table in nft syntax (as Model.String orders it: sets,
// then chains, each by name), inet tables first; "" when there is none.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]fakeKey, 0, len(f.tables))
	for k := range f.tables {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b fakeKey) int {
		if a.family != b.family {
			return -strings.Compare(string(a.family), string(b.family)) // inet before arp
		}
		return strings.Compare(a.name, b.name)
	})
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(f.tables[k].model(k).String())
	}
	return b.String()
}

// DumpTable prints the table family/name in nft syntax; "" when it does
// not exist.
func (f *Fake) DumpTable(family Family, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := fakeKey{family, name}
	if f.tables[key] == nil {
		return ""
	}
	return f.tables[key].model(key).String()
}

// Foreign changes, as another process's `nft` commands: each is one
// transaction with the kernel's checks, moves the generation and notifies.

// AddTable creates the table family/name (someone else's, say).
func (f *Fake) AddTable(family Family, name string) error {
	return f.foreign(family, name, &Op{Kind: OpAddTable})
}

// DeleteTable deletes the table family/name.
func (f *Fake) DeleteTable(family Family, name string) error {
	return f.foreign(family, name, &Op{Kind: OpDeleteTable})
}

// FlushChain removes every rule of a chain.
func (f *Fake) FlushChain(family Family, table, chain string) error {
	return f.foreign(family, table, &Op{Kind: OpFlushChain, Name: chain})
}

// DeleteChain deletes a chain (EBUSY while something refers to it).
func (f *Fake) DeleteChain(family Family, table, chain string) error {
	return f.foreign(family, table, &Op{Kind: OpDeleteChain, Name: chain})
}

// DeleteElement deletes one element of a set or map.
func (f *Fake) DeleteElement(family Family, table, set, key string) error {
	f.mu.Lock()
	ft := f.tables[fakeKey{family, table}]
	var s *Set
	if ft != nil && ft.sets[set] != nil {
		s = ft.sets[set].def
	}
	f.mu.Unlock()
	if s == nil {
		return syscall.ENOENT
	}
	return f.foreign(family, table, &Op{Kind: OpDeleteElements, Name: set, Set: s, Elements: []Element{{Key: key}}})
}

// InsertRule adds r at the head of a chain, without nftep's hash: what
// `nft insert rule` by hand leaves.
func (f *Fake) InsertRule(family Family, table, chain string, r *Rule) error {
	if err := validateRule(nil, r); err != nil {
		return err
	}
	key := fakeKey{family, table}
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.tables[key].clone()
	if next == nil {
		return syscall.ENOENT
	}
	c := next.chains[chain]
	if c == nil {
		return syscall.ENOENT
	}
	if err := next.checkRefs(r); err != nil {
		return err
	}
	c.rules = append([]fakeRule{{r: r, foreign: true}}, c.rules...)
	next.refs.rule(chain, r, 1)
	ops := []Op{{Kind: OpAddRules, Name: chain, Chain: &Chain{Name: chain, Rules: []*Rule{r}}}}
	if err := next.loops(ops); err != nil {
		return err
	}
	f.set(key, next, ops, foreignWriter)
	return nil
}

func (f *Fake) foreign(family Family, table string, op *Op) error {
	key := fakeKey{family, table}
	f.mu.Lock()
	defer f.mu.Unlock()
	next, _, err := f.tables[key].clone().apply(op)
	if err != nil {
		return err
	}
	f.set(key, next, []Op{*op}, foreignWriter)
	return nil
}

// foreignWriter is the process the Fake names for foreign changes.
var foreignWriter = Writer{PID: fakeForeignPID, Name: "nft"}
