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

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
	"github.com/nftep/nftep/sysctl"
)

// fakeTable is a Table that keeps what was "programmed" as text and can be
// told to fail. Like nft.Table it validates the model before anything else.
type fakeTable struct {
	k      *fakeKernel
	family nft.Family
	model  *nft.Model

	// Guarded by k.mu.
	applies, resyncs, failures int
	fail                       int // the next fail calls fail
	programmed                 string
	deleted                    bool
	// history is every programmed text that differed from the previous
	// one: what the kernel held, transaction by transaction.
	history []string
	// block, when set, holds every apply until it is closed (a stuck
	// kernel); read without the lock.
	block chan struct{}
}

func (t *fakeTable) Desired() *nft.Model { return t.model }

func (t *fakeTable) Apply(ctx context.Context) (nft.ApplyStats, error) {
	return t.program(false)
}

func (t *fakeTable) Resync(ctx context.Context) (nft.ResyncStats, error) {
	st, err := t.program(true)
	return nft.ResyncStats{Apply: st}, err
}

func (t *fakeTable) program(resync bool) (nft.ApplyStats, error) {
	if err := t.model.Validate(); err != nil {
		return nft.ApplyStats{}, err
	}
	text := t.model.String()
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
	if t.fail > 0 {
		t.fail--
		t.failures++
		return nft.ApplyStats{}, &nft.Error{Table: string(t.family) + " " + t.model.Name, Summary: "test", Err: syscall.EINVAL}
	}
	t.applies++
	ops := 0
	if text != t.programmed {
		ops = 1
		t.history = append(t.history, text)
	}
	t.programmed = text
	t.deleted = false
	return nft.ApplyStats{Operations: ops, Resynced: resync}, nil
}

func (t *fakeTable) Delete(context.Context) error {
	t.k.mu.Lock()
	defer t.k.mu.Unlock()
	t.deleted = true
	t.programmed = ""
	return nil
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
func (r *fakeRoutes) NextDeadline() time.Time { return time.Time{} }
func (r *fakeRoutes) Adopt(map[string]int)    {}
func (r *fakeRoutes) Owned() map[string]int   { return nil }
func (r *fakeRoutes) QueueResync()            {}
func (r *fakeRoutes) Close()                  {}

// fakeKernel is a Kernel of fakes. Interfaces lists ifaces; watch, if set,
// delivers interface updates as the monitor would.
type fakeKernel struct {
	mu     sync.Mutex
	tables map[string]*fakeTable // "inet nftep"
	routes *fakeRoutes
	// exists says which tables "exist" before the first apply.
	exists map[string]bool
	ifaces []any
	watch  chan any
	sys    *sysctl.Fake
	// failNew makes the next tables created fail that many times.
	failNew int
	// watchErr makes WatchInterfaces fail at once.
	watchErr error
}

func newFakeKernel() *fakeKernel {
	k := &fakeKernel{tables: map[string]*fakeTable{}, exists: map[string]bool{}, sys: sysctl.NewFake()}
	k.routes = &fakeRoutes{k: k, targets: map[string][]routes.Target{}}
	return k
}

func (k *fakeKernel) NewTable(family nft.Family, name string) (Table, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := &fakeTable{k: k, family: family, model: nft.NewModel(family, name), fail: k.failNew}
	if prev := k.tables[string(family)+" "+name]; prev != nil {
		t.programmed = prev.programmed
	}
	k.tables[string(family)+" "+name] = t
	return t, nil
}

func (k *fakeKernel) NewRoutes(routes.Config) (RouteTable, error) { return k.routes, nil }
func (k *fakeKernel) Sysctls() sysctl.Writer                      { return k.sys }
func (k *fakeKernel) TableExists(_ context.Context, family nft.Family, name string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if t := k.tables[string(family)+" "+name]; t != nil && t.programmed != "" {
		return true, nil
	}
	return k.exists[string(family)+" "+name], nil
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

// table returns a snapshot of the fake table family/name.
func (k *fakeKernel) table(name string) fakeTable {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := k.tables[name]
	if t == nil {
		return fakeTable{}
	}
	return fakeTable{applies: t.applies, resyncs: t.resyncs, failures: t.failures, programmed: t.programmed, deleted: t.deleted,
		history: slices.Clone(t.history)}
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

// syncBuffer is a bytes.Buffer safe for one writer and polling readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// frames decodes what was written so far as FromDataplane frames.
func (s *syncBuffer) frames(t testing.TB) []*proto.FromDataplane {
	t.Helper()
	s.mu.Lock()
	data := bytes.Clone(s.b.Bytes())
	s.mu.Unlock()
	r := proto.NewReader(bytes.NewReader(data))
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

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
