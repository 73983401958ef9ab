package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
	"github.com/nftep/nftep/sysctl"
)

// waitLimit and pollTick are how long require.Eventually waits for a
// condition of these tests, and how often it checks.
const (
	waitLimit = 5 * time.Second
	pollTick  = 5 * time.Millisecond
)

// countedTable is a real nft.Table on the fake kernel's nft.Fake that
// counts its calls: the tests see what the loop asked for, and the Fake
// what reached "the kernel".
type countedTable struct {
	*nft.Table
	k    *fakeKernel
	name string // "inet nftep"

	// Guarded by k.mu.
	applies, resyncs, failures int
	// block, when set, holds every apply until it is closed (a stuck
	// kernel).
	block chan struct{}
}

// wait holds the caller while t.block is set and open.
func (t *countedTable) wait() {
	t.k.mu.Lock()
	block := t.block
	t.k.mu.Unlock()
	if block != nil {
		<-block
	}
}

func (t *countedTable) Apply(ctx context.Context) (nft.ApplyStats, error) {
	t.wait()
	st, err := t.Table.Apply(ctx)
	t.count(false, err)
	return st, err
}

func (t *countedTable) Resync(ctx context.Context) (nft.ResyncStats, error) {
	t.wait()
	rs, err := t.Table.Resync(ctx)
	t.count(true, err)
	return rs, err
}

func (t *countedTable) count(resync bool, err error) {
	t.k.mu.Lock()
	block := t.block
	t.k.mu.Unlock()
	if block != nil {
		<-block
	}
	t.k.mu.Lock()
	defer t.k.mu.Unlock()
	if resync {
		t.resyncs++
	}
	if err != nil {
		t.failures++
		return
	}
	t.applies++
}

// fakeRoutes records the routes the dataplane wants.
type fakeRoutes struct {
	k       *fakeKernel
	targets map[string][]routes.Target
	applies int
	// stats is what TakeStats returns next (set by tests).
	stats routes.Stats
}

func (r *fakeRoutes) TakeStats() routes.Stats {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	s := r.stats
	r.stats = routes.Stats{}
	return s
}

func (r *fakeRoutes) SetRoutes(iface string, ts []routes.Target) {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	if len(ts) == 0 {
		delete(r.targets, iface)
		return
	}
	r.targets[iface] = ts
}
func (r *fakeRoutes) OnIfaceStateChanged(string, int, routes.IfaceState) {}
func (r *fakeRoutes) Apply() error {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	r.applies++
	return nil
}
func (r *fakeRoutes) NextDeadline() time.Time         { return time.Time{} }
func (r *fakeRoutes) Adopt(map[string]int)            {}
func (r *fakeRoutes) Owned() map[string]int           { return nil }
func (r *fakeRoutes) QueueResync()                    {}
func (r *fakeRoutes) EventsSubscribed(time.Time) bool { return false }
func (r *fakeRoutes) EventsLost()                     {}
func (r *fakeRoutes) Close()                          {}

// fakeKernel is a Kernel of fakes: nft tables on one nft.Fake, routes and
// sysctls recorded. Interfaces lists ifaces; watch, if set, delivers
// interface updates as the monitor would.
type fakeKernel struct {
	nft    *nft.Fake
	mu     sync.Mutex
	tables map[string]*countedTable // "inet nftep"
	// history holds, per table, every content it had after a commit that
	// changed it: what the kernel held, transaction by transaction.
	history map[string][]string
	routes  *fakeRoutes
	ifaces  []any
	watch   chan any
	sys     *sysctl.Fake
	// watchErr makes WatchInterfaces fail at once.
	watchErr error
}

func newFakeKernel() *fakeKernel {
	k := &fakeKernel{nft: nft.NewFake(), tables: map[string]*countedTable{}, history: map[string][]string{}, sys: sysctl.NewFake()}
	k.routes = &fakeRoutes{k: k, targets: map[string][]routes.Target{}}
	k.nft.OnCommit(k.record)
	return k
}

// record notes the tables that a commit changed.
func (k *fakeKernel) record() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for name := range k.tables {
		fam, table, _ := strings.Cut(name, " ")
		text := k.nft.DumpTable(nft.Family(fam), table)
		if h := k.history[name]; len(h) == 0 || h[len(h)-1] != text {
			k.history[name] = append(h, text)
		}
	}
}

// exist makes the table family/name exist before the first apply, as a
// previous nftep would have left it.
func (k *fakeKernel) exist(family nft.Family, name string) {
	if err := k.nft.AddTable(family, name); err != nil {
		panic(err)
	}
}

// failNext makes the next n commits fail with EINVAL.
func (k *fakeKernel) failNext(n int) {
	for range n {
		k.nft.FailNext(syscall.EINVAL)
	}
}

func (k *fakeKernel) NewTable(family nft.Family, name string) (Table, error) {
	t, err := nft.NewTable(nft.TableConfig{Family: family, Name: name, Transport: k.nft})
	if err != nil {
		return nil, err
	}
	ct := &countedTable{Table: t, k: k, name: string(family) + " " + name}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tables[ct.name] = ct
	return ct, nil
}

func (k *fakeKernel) NewRoutes(routes.Config) (RouteTable, error) { return k.routes, nil }
func (k *fakeKernel) Sysctls() sysctl.Writer                      { return k.sys }
func (k *fakeKernel) TableExists(_ context.Context, family nft.Family, name string) (bool, error) {
	return k.nft.HasTable(family, name), nil
}
func (k *fakeKernel) Interfaces() ([]any, error) { return k.ifaces, nil }
func (k *fakeKernel) WatchInterfaces(ctx context.Context, emit func(any)) error {
	if k.watchErr != nil {
		return k.watchErr
	}
	if k.watch == nil {
		<-ctx.Done()
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-k.watch:
			emit(u)
		}
	}
}

// commits counts the transactions committed to the table "family name".
func (k *fakeKernel) commits(name string) int {
	n := 0
	for _, tx := range k.nft.Transactions() {
		if string(tx.Family)+" "+tx.Table == name {
			n++
		}
	}
	return n
}

// tableView is what a test sees of one table: the loop's calls, and the
// Fake's content.
type tableView struct {
	applies, resyncs, failures int
	programmed                 string // "" when the table does not exist
	deleted                    bool
	history                    []string
}

// table returns a snapshot of the table "family name".
func (k *fakeKernel) table(name string) tableView {
	fam, table, _ := strings.Cut(name, " ")
	text := k.nft.DumpTable(nft.Family(fam), table)
	k.mu.Lock()
	defer k.mu.Unlock()
	v := tableView{programmed: text, deleted: text == "", history: slices.Clone(k.history[name])}
	if t := k.tables[name]; t != nil {
		v.applies, v.resyncs, v.failures = t.applies, t.resyncs, t.failures
	}
	return v
}

func (k *fakeKernel) routeTargets(iface string) []routes.Target {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.routes.targets[iface]
}

// upIface returns the monitor's report of an interface that is up.
func upIface(name string, index int, addrs ...string) []any {
	as := []netip.Addr{}
	for _, a := range addrs {
		as = append(as, netip.MustParseAddr(a))
	}
	return []any{
		routes.InterfaceStateUpdate{Name: name, State: routes.IfaceUp, Index: index},
		routes.InterfaceAddrsUpdate{Name: name, Addrs: as},
	}
}

// syncBuffer collects what the driver writes to Felix.
type syncBuffer struct{ testutil.SyncBuffer }

// frames decodes what was written so far as FromDataplane frames.
func (s *syncBuffer) frames(t testing.TB) []*proto.FromDataplane {
	t.Helper()
	r := proto.NewReader(bytes.NewReader(s.Bytes()))
	var out []*proto.FromDataplane
	for {
		m, err := r.ReadFromDataplane()
		if err != nil {
			if !strings.Contains(err.Error(), "EOF") {
				t.Fatalf("driver output: %v", err)
			}
			return out
		}
		out = append(out, m)
	}
}

// statusLines renders the endpoint status frames as "id=status" lines.
func statusLines(ms []*proto.FromDataplane) []string {
	var out []string
	for _, m := range ms {
		switch p := m.GetPayload().(type) {
		case *proto.FromDataplane_WorkloadEndpointStatusUpdate:
			out = append(out, fmt.Sprintf("%s=%s", p.WorkloadEndpointStatusUpdate.GetId().GetWorkloadId(), p.WorkloadEndpointStatusUpdate.GetStatus().GetStatus()))
		case *proto.FromDataplane_WorkloadEndpointStatusRemove:
			out = append(out, p.WorkloadEndpointStatusRemove.GetId().GetWorkloadId()+"=removed")
		case *proto.FromDataplane_HostEndpointStatusUpdate:
			out = append(out, fmt.Sprintf("%s=%s", p.HostEndpointStatusUpdate.GetId().GetEndpointId(), p.HostEndpointStatusUpdate.GetStatus().GetStatus()))
		case *proto.FromDataplane_HostEndpointStatusRemove:
			out = append(out, p.HostEndpointStatusRemove.GetId().GetEndpointId()+"=removed")
		}
	}
	return out
}
