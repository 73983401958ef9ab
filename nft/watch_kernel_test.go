package nft

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
)

// watcher runs tbl.Watch in the background and counts its notifications.
type watcher struct {
	n      atomic.Int64
	subs   atomic.Int64 // subscriptions opened
	ch     chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// startWatch starts tbl.Watch and returns once its subscription is open.
func startWatch(t *testing.T, tbl *Table) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{ch: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	subscribed := make(chan struct{}, 1)
	tbl.tune.watchSubscribed = func() {
		w.subs.Add(1)
		select {
		case subscribed <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(w.done)
		tbl.Watch(ctx, func() {
			w.n.Add(1)
			select {
			case w.ch <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(w.stop)
	select {
	case <-subscribed:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not subscribe within 5 s")
	}
	if !w.wait(5 * time.Second) {
		t.Fatal("Watch did not notify on subscribing")
	}
	w.n.Store(0)
	return w
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// wait returns whether a notification came within d.
func (w *watcher) wait(d time.Duration) bool {
	select {
	case <-w.ch:
		return true
	case <-time.After(d):
		return false
	}
}

// netlinkSockets counts this process's open netlink sockets.
func netlinkSockets(t *testing.T) int {
	t.Helper()
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	nl, err := os.ReadFile("/proc/self/net/netlink")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(nl), "\n")[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			inodes[f[len(f)-1]] = true
		}
	}
	n := 0
	for _, de := range des {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", de.Name()))
		if err != nil {
			continue
		}
		var ino string
		if _, err := fmt.Sscanf(link, "socket:[%s", &ino); err == nil && inodes[strings.TrimSuffix(ino, "]")] {
			n++
		}
	}
	return n
}

// TestKernelWatch: a foreign flush of one of our chains notifies at once;
// changes to another table of the namespace do not; cancelling the context
// stops Watch and closes its socket.
func TestKernelWatch(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	var logged testutil.SyncBuffer
	tbl.log = slog.New(slog.NewTextHandler(&logged, nil))
	baseModel(tbl.Desired())
	mustApply(t, tbl)
	ns.Run(t, "nft", "add", "table", "inet", "other")
	ns.Run(t, "nft", "add", "chain", "inet", "other", "c")

	socketsBefore := netlinkSockets(t)
	w := startWatch(t, tbl)

	// Another table, and a table of our name in another family: no
	// notification. The flush of our chain that follows is delivered
	// after them, so once it has notified, any notification they caused
	// would have been counted.
	ns.Run(t, "nft", "add", "rule", "inet", "other", "c", "accept")
	ns.Run(t, "nft", "flush", "chain", "inet", "other", "c")
	ns.Run(t, "nft", "add", "table", "ip", testTable)
	ns.Run(t, "nft", "add", "chain", "ip", testTable, "c")
	ns.Run(t, "nft", "flush", "chain", "inet", testTable, "filter-fw-v1")
	if !w.wait(5 * time.Second) {
		t.Fatal("a foreign flush of our chain did not notify within 5 s")
	}
	if n := w.n.Load(); n != 1 {
		t.Errorf("%d notifications, want 1 (for the flush of our chain only)", n)
	}

	// The notified resync repairs the chain; the events of that repair
	// notify, and the resync they trigger sends nothing (no loop).
	rs, err := tbl.Resync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rs.Drift.ChainsDiffer != 1 {
		t.Errorf("resync drift %s, want 1 chain differing", rs.Drift)
	}
	// The repair names who changed the table, as the kernel's NEWGEN
	// named the committing process.
	if !regexp.MustCompile(`drifted .* by="nft \(pid [0-9]+\)"`).MatchString(logged.String()) {
		t.Errorf("the drift log does not name the nft process that flushed the chain:\n%s", logged.String())
	}
	if !w.wait(5 * time.Second) {
		t.Fatal("our own repair did not notify")
	}
	g := gen(t, ns)
	rs, err = tbl.Resync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rs.Skipped || rs.Apply.Operations != 0 || gen(t, ns) != g {
		t.Errorf("resync after our own repair: skipped %v, %d operations, generation %d → %d; want a skipped read and no commit", rs.Skipped, rs.Apply.Operations, g, gen(t, ns))
	}
	if w.wait(300 * time.Millisecond) {
		t.Error("a resync that sent nothing notified")
	}

	// Deleting the table notifies too.
	n := w.n.Load()
	ns.Run(t, "nft", "delete", "table", "inet", testTable)
	if !w.wait(5*time.Second) || w.n.Load() == n {
		t.Error("deleting our table did not notify")
	}

	stopped := make(chan struct{})
	go func() { w.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return within 2 s of its context's end")
	}
	if got := netlinkSockets(t); got != socketsBefore {
		t.Errorf("%d netlink sockets open after Watch returned, %d before", got, socketsBefore)
	}
}

// TestKernelWatchOverflow: events lost to a full receive buffer notify,
// even when the ones received concern only other tables, and the
// subscription stays open.
func TestKernelWatchOverflow(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	baseModel(tbl.Desired())
	mustApply(t, tbl)
	kt := tbl.tr.(*kernelTransport)
	kt.watchRcvBuf = 1024 // the kernel's minimum, a few events
	w := startWatch(t, tbl)
	// Hold the reader after its first read, so that the burst overflows
	// the buffer whatever the scheduling (a reader quick enough to drain
	// between the kernel's sends would otherwise see no overflow).
	gate := make(chan struct{})
	var closeGate sync.Once
	release := func() { closeGate.Do(func() { close(gate) }) }
	hold := func() { <-gate }
	kt.beforeReceive.Store(&hold)
	t.Cleanup(func() { kt.beforeReceive.Store(nil); release() })

	var b strings.Builder
	b.WriteString("table inet other {\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "\tchain c%d { accept; }\n", i)
	}
	b.WriteString("}\n")
	f := filepath.Join(t.TempDir(), "other.nft")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ns.Run(t, "nft", "-f", f)
	kt.beforeReceive.Store(nil)
	release()
	if !w.wait(5 * time.Second) {
		t.Fatal("an overflow of the event socket did not notify")
	}
	time.Sleep(3 * tbl.tune.watchBackoffMin) // a resubscription would have happened
	if n := w.subs.Load(); n != 1 {
		t.Errorf("%d subscriptions opened, want 1: an overflow is not a failure", n)
	}
}
