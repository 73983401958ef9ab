package nft

// nf_tables events through the Fake: the commit watcher (WatchCommits'
// reader) and Table.Watch read the events the Fake sends for each
// transaction it takes, as they read the kernel's.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/testutil"
)

// commitLog collects what watchCommits reports.
type commitLog struct {
	mu      sync.Mutex
	commits []Commit
}

func (l *commitLog) add(c Commit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.commits = append(l.commits, c)
}

func (l *commitLog) get() []Commit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Commit(nil), l.commits...)
}

// watchFake runs watchCommits on a subscription to f until the test ends.
func watchFake(t *testing.T, f *Fake) *commitLog {
	t.Helper()
	q := f.monitor()
	ctx, cancel := context.WithCancel(context.Background())
	log := &commitLog{}
	done := make(chan error, 1)
	go func() { done <- watchCommits(ctx, q, log.add) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "watchCommits after its context ended")
		f.unmonitor(q)
	})
	return log
}

// TestWatchCommitsThroughFake: every transaction the Fake takes is one
// Commit with the generation it produced, the tables its operations
// touched, and who committed it: this process for a Table's commits (a
// staged apply is several), another for a foreign `nft` command.
func TestWatchCommitsThroughFake(t *testing.T) {
	f := NewFake()
	log := watchFake(t, f)
	inet := newFakeTable(t, f, FamilyINet)
	arp := newFakeTable(t, f, FamilyARP)
	baseModel(inet.Desired())
	arp.Desired().SetChain(&Chain{Name: "arp-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept}})

	var gens []uint32
	mustApply(t, inet)
	gens = append(gens, f.Generation())
	mustApply(t, arp)
	gens = append(gens, f.Generation())
	mustForeign(t, f.FlushChain(FamilyINet, testTable, "filter-fw-v2"))
	gens = append(gens, f.Generation())
	inet.Desired().SetElement("allowed", Element{Key: "10.0.0.9"})
	mustApply(t, inet)
	gens = append(gens, f.Generation())

	require.Eventually(t, func() bool { return len(log.get()) == len(gens) }, 5*time.Second, time.Millisecond, "a Commit per transaction")
	commits := log.get()
	self := fakeSelf()
	for i, want := range []struct {
		tables []string
		by     Writer
	}{
		{[]string{"inet " + testTable}, self},
		{[]string{"arp " + testTable}, self},
		{[]string{"inet " + testTable}, foreignWriter},
		{[]string{"inet " + testTable}, self},
	} {
		c := commits[i]
		assert.Equal(t, gens[i], c.Generation, "commit %d: generation", i)
		assert.Equal(t, want.tables, c.Tables, "commit %d: tables", i)
		if assert.NotNil(t, c.Writer, "commit %d: writer", i) {
			assert.Equal(t, want.by, *c.Writer, "commit %d: writer", i)
			assert.Equal(t, want.by == self, c.Writer.Self(), "commit %d: Self", i)
		}
		assert.False(t, c.At.IsZero(), "commit %d: time", i)
	}
	assert.True(t, commits[0].Touches(FamilyINet, testTable))
	assert.False(t, commits[0].Touches(FamilyARP, testTable), "the inet commit touches no arp table")
	assert.True(t, commits[1].Touches(FamilyARP, testTable))
	assert.Equal(t, "nft (pid 4194305)", commits[2].Writer.String())
	// The last one is the element's transaction, and only that.
	txs := f.Transactions()
	assert.Equal(t, "1 element added to set allowed", txs[len(txs)-1].Summary())
}

// TestWatchCommitsStaged: a staged cold start is several commits of the
// same table, each its own Commit, one generation apart.
func TestWatchCommitsStaged(t *testing.T) {
	f := NewFake()
	log := watchFake(t, f)
	tbl := newFakeTable(t, f, FamilyINet)
	tbl.tune.stageMinRules, tbl.tune.stageRules = 10, 4
	stagedModel(tbl.Desired(), 6)
	st := mustApply(t, tbl)
	require.GreaterOrEqual(t, st.Batches, 3)
	require.Eventually(t, func() bool { return len(log.get()) == st.Batches }, 5*time.Second, time.Millisecond)
	commits := log.get()
	for i, c := range commits {
		assert.Equal(t, []string{"inet " + testTable}, c.Tables, "batch %d", i+1)
		if i > 0 {
			assert.Equal(t, commits[i-1].Generation+1, c.Generation, "batch %d", i+1)
		}
	}
	assert.Equal(t, f.Generation(), commits[len(commits)-1].Generation)
}

// TestWatchCommitsLostEvents: a reader that falls behind loses events and
// says so instead of reporting wrong commits.
func TestWatchCommitsLostEvents(t *testing.T) {
	f := NewFake()
	f.eventQueue = 1
	q := f.monitor()
	defer f.unmonitor(q)
	mustForeign(t, f.AddTable(FamilyINet, "other"))
	mustForeign(t, f.DeleteTable(FamilyINet, "other")) // no room: lost
	var got []Commit
	err := watchCommits(context.Background(), q, func(c Commit) { got = append(got, c) })
	require.ErrorIs(t, err, unix.ENOBUFS)
	assert.ErrorContains(t, err, "nf_tables events lost")
	assert.Empty(t, got, "as the kernel's socket, the overflow is reported before what is still queued")
}

// TestWatchCommitsOtherErrors: a socket that fails ends the watch with its
// error; a cancelled context ends it without one.
func TestWatchCommitsOtherErrors(t *testing.T) {
	broken := &scriptedConn{errs: []error{syscall.EBADF}}
	assert.ErrorIs(t, watchCommits(context.Background(), broken, func(Commit) {}), syscall.EBADF)

	ctx, cancel := context.WithCancel(context.Background())
	q := newEventQueue(4)
	done := make(chan error)
	go func() { done <- watchCommits(ctx, q, func(Commit) {}) }()
	cancel()
	assert.NoError(t, <-done)
}

// TestEventTableAndGeneration: the table an event names ("family name",
// families by nft's names, unknown ones by number) and the generation of a
// NEWGEN; malformed messages give nothing.
func TestEventTableAndGeneration(t *testing.T) {
	evs := commitEvents(fakeKey{FamilyARP, "t"}, []Op{{Kind: OpAddTable}}, 42, Writer{PID: 7, Name: "x"})
	require.Len(t, evs, 2)
	assert.Equal(t, "arp t", eventTable(evs[0]))
	assert.Equal(t, "", eventTable(evs[1]), "NEWGEN names no table")
	assert.True(t, isNewGen(evs[1]))
	assert.Equal(t, uint32(42), parseGenID(evs[1].Data))
	assert.Equal(t, &Writer{PID: 7, Name: "x"}, parseWriter(evs[1].Data))

	bridge := evs[0]
	bridge.Data = append([]byte{unix.NFPROTO_BRIDGE}, bridge.Data[1:]...)
	assert.Equal(t, "bridge t", eventTable(bridge))
	odd := evs[0]
	odd.Data = append([]byte{99}, odd.Data[1:]...)
	assert.Equal(t, "family99 t", eventTable(odd))

	for _, data := range [][]byte{nil, {1, 0}, {1, 0, 0, 0, 0xff}} {
		m := netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(msgType(unix.NFT_MSG_NEWGEN))}, Data: data}
		assert.Equal(t, uint32(0), parseGenID(data), "%x", data)
		assert.Nil(t, parseWriter(data), "%x", data)
		m.Header.Type = netlink.HeaderType(msgType(unix.NFT_MSG_NEWRULE))
		assert.Equal(t, "", eventTable(m), "%x", data)
	}
	// A NEWGEN without a process (a kernel before 5.x, say) names none.
	var e enc
	e.reset(msgType(unix.NFT_MSG_NEWGEN), 0, 0, unix.AF_UNSPEC)
	e.be32(unix.NFTA_GEN_ID, 3)
	assert.Nil(t, parseWriter(eventMessage(e.finish()).Data))
}

// TestWriterSelf: a thread of this process is Self; the Fake's foreign
// writer is not.
func TestWriterSelf(t *testing.T) {
	assert.True(t, Writer{PID: uint32(os.Getpid())}.Self())
	assert.False(t, foreignWriter.Self())
	assert.Equal(t, "nft (pid 4194305)", foreignWriter.String())
}

// TestWatchNamesTheForeignWriter: Watch, over the Fake's events, notifies
// for changes to its table only, remembers who made a foreign change (not
// our own commits), and the next Resync names them as it repairs.
func TestWatchNamesTheForeignWriter(t *testing.T) {
	f := NewFake()
	logs := &testutil.SyncBuffer{}
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, Transport: f,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	baseModel(tbl.Desired())
	mustApply(t, tbl)

	var notes atomic.Int32
	subscribed := make(chan struct{}, 1)
	tbl.tune.watchSubscribed = func() { subscribed <- struct{}{} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tbl.Watch(ctx, func() { notes.Add(1) }) }()
	defer func() { cancel(); <-done }()
	<-subscribed
	wantNotes := func(n int32, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return notes.Load() == n }, 5*time.Second, time.Millisecond, what)
	}
	wantNotes(1, "the notification on subscribing")

	// Our own commit: a notification, no foreign writer.
	tbl.Desired().SetElement("allowed", Element{Key: "10.0.0.2"})
	mustApply(t, tbl)
	wantNotes(2, "our own commit")
	assert.Nil(t, tbl.writer.Load(), "our own commit recorded as foreign")

	// Someone else's table: nothing.
	mustForeign(t, f.AddTable(FamilyINet, "theirs"))
	mustForeign(t, f.AddTable(FamilyARP, testTable))
	// Someone else flushes our chain: a notification naming them.
	mustForeign(t, f.FlushChain(FamilyINet, testTable, "filter-fw-v1"))
	wantNotes(3, "the foreign flush of our chain")
	if w := tbl.writer.Load(); assert.NotNil(t, w) {
		assert.Equal(t, foreignWriter, *w)
	}

	rs, err := tbl.Resync(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Drift{ChainsDiffer: 1}, rs.Drift)
	assert.Contains(t, logs.String(), `msg="nftables table drifted from the desired state; repairing" table="inet nftep" drift="1 chains differ" by="nft (pid 4194305)"`)
	assert.Nil(t, tbl.writer.Load(), "the writer is reported once")
	wantFakeHolds(t, f, tbl.Desired())
	wantNotes(4, "the repair's own commit")
}

// flakySubscriptions is a Fake whose first event subscriptions fail.
type flakySubscriptions struct {
	*Fake
	failures atomic.Int32
}

func (f *flakySubscriptions) subscribe(ctx context.Context, family uint8, table string, opened func(), notify func(by *Writer)) (bool, error) {
	if f.failures.Add(-1) >= 0 {
		return false, errors.New("subscription refused")
	}
	return f.Fake.subscribe(ctx, family, table, opened, notify)
}

// TestWatchResubscribes: a subscription that fails is opened again after a
// backoff that doubles up to its maximum, and every failure notifies (a
// change may have gone unseen); once open, changes notify as usual.
func TestWatchResubscribes(t *testing.T) {
	f := &flakySubscriptions{Fake: NewFake()}
	f.failures.Store(3)
	logs := &testutil.SyncBuffer{}
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, Transport: f, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	baseModel(tbl.Desired())
	mustApply(t, tbl)
	tbl.tune.watchBackoffMin, tbl.tune.watchBackoffMax = time.Millisecond, 2*time.Millisecond
	subscribed := make(chan struct{}, 1)
	tbl.tune.watchSubscribed = func() { subscribed <- struct{}{} }

	var notes atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tbl.Watch(ctx, func() { notes.Add(1) }) }()
	select {
	case <-subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch never subscribed after the failures")
	}
	// Three failures, then the notification on subscribing.
	require.Eventually(t, func() bool { return notes.Load() == 4 }, 5*time.Second, time.Millisecond)
	mustForeign(t, f.FlushChain(FamilyINet, testTable, "filter-fw-v2"))
	require.Eventually(t, func() bool { return notes.Load() == 5 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done

	out := logs.String()
	assert.Contains(t, out, `msg="nftables event subscription failed; resubscribing" table="inet nftep" in=1ms error="subscription refused"`)
	assert.Contains(t, out, `in=2ms error="subscription refused"`, "the backoff doubles")
	assert.NotContains(t, out, "in=4ms", "the backoff stays at its maximum")
}

// TestWatchStopsWhileBackingOff: cancelling during the backoff ends Watch
// at once.
func TestWatchStopsWhileBackingOff(t *testing.T) {
	f := &flakySubscriptions{Fake: NewFake()}
	f.failures.Store(1 << 20)
	tbl := newFakeTable(t, f.Fake, FamilyINet)
	tbl.tr = f
	tbl.tune.watchBackoffMin, tbl.tune.watchBackoffMax = time.Hour, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	notified := make(chan struct{}, 1)
	go func() { defer close(done); tbl.Watch(ctx, func() { notified <- struct{}{} }) }()
	<-notified // the first failure
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not stop during its backoff")
	}
}

// TestWatchEventsOverflow: events lost to a full queue notify without a
// writer, and reading goes on: the next commit is reported with its writer.
func TestWatchEventsOverflow(t *testing.T) {
	f := NewFake()
	f.eventQueue = 1
	q := f.monitor()
	defer f.unmonitor(q)
	mustForeign(t, f.AddTable(FamilyINet, testTable))
	mustForeign(t, f.AddTable(FamilyINet, "lost")) // past the queue: lost

	var got []*Writer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() {
		ok, err := watchEvents(ctx, q, unix.NFPROTO_INET, testTable, func(by *Writer) {
			got = append(got, by)
			if len(got) == 3 {
				cancel()
			}
		}, new(atomic.Pointer[func()]))
		assert.NoError(t, err)
		done <- ok
	}()
	require.Eventually(t, func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.batches) == 0
	}, 5*time.Second, time.Millisecond, "the reader to drain the queue")
	assert.ErrorIs(t, f.FlushChain(FamilyINet, testTable, "none"), syscall.ENOENT, "refused: no commit, no event")
	mustForeign(t, f.DeleteTable(FamilyINet, testTable))
	assert.True(t, <-done, "the reader got events")
	require.Len(t, got, 3)
	assert.Nil(t, got[0], "the overflow, reported first")
	assert.Equal(t, &foreignWriter, got[1], "the commit still queued")
	assert.Equal(t, &foreignWriter, got[2], "the table deleted")
}

// scriptedConn is an eventConn that returns its batches, then its errors,
// then io.EOF.
type scriptedConn struct {
	batches [][]netlink.Message
	errs    []error
}

func (c *scriptedConn) Receive() ([]netlink.Message, error) {
	if len(c.batches) > 0 {
		b := c.batches[0]
		c.batches = c.batches[1:]
		return b, nil
	}
	if len(c.errs) > 0 {
		err := c.errs[0]
		c.errs = c.errs[1:]
		return nil, err
	}
	return nil, io.EOF
}

func (c *scriptedConn) SetReadDeadline(time.Time) error { return nil }
func (c *scriptedConn) Close() error                    { return nil }
