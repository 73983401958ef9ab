package dataplane

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"net/netip"
	"time"

	gproto "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/policy"
	"github.com/nftep/nftep/pools"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
	"github.com/nftep/nftep/sysctl"
)

// Manager is one of the engine's managers, in the shape of Felix's
// (felix/dataplane/linux/int_dataplane.go, RegisterManager): OnUpdate only
// records a message; ResolveUpdateBatch settles what needs the whole batch
// (interface state, host endpoint resolution); CompleteDeferredWork writes
// what changed into the desired-state models and the route and sysctl
// tables. A manager never talks to the kernel: the engine programs what the
// managers wrote, in one transaction per table.
type Manager interface {
	OnUpdate(msg any)
	ResolveUpdateBatch() error
	CompleteDeferredWork() error
}

// managed is a registered manager and its name in errors.
type managed struct {
	name string
	m    Manager
}

// engine is one configuration's managers and the kernel objects they
// program. It is not safe for concurrent use: the loop (or a one-shot
// command) drives it from one goroutine.
type engine struct {
	cfg    Config
	log    *slog.Logger
	inet   Table
	arp    Table // nil when ARP suppression is off
	routes RouteTable
	sys    *sysctlTracker
	eps    *endpoints.Manager
	pol    *policy.Manager
	// pools is the pools manager: cluster sets, natOutgoing, tunnel rules.
	pools *pools.Manager
	// ovl is the overlay manager (cluster routes, tunnel devices);
	// devices programs its devices, neighbours and FDB entries (nil when
	// the kernel programs none: a dry run).
	ovl     *overlay.Manager
	devices *overlay.Devices
	// missing lists the kernel features the devices found missing, until
	// the loop reports them (takeMissing).
	missing []string
	// recompute: a manager has work without a message (the host MTU
	// changed), until the loop takes it (takeRecompute).
	recompute bool

	// managers in registration order, which is the order of their
	// ResolveUpdateBatch and CompleteDeferredWork calls; takers says which
	// managers take each Felix message type. Interface updates from the
	// monitor go to every manager.
	managers []managed
	takers   map[protoreflect.FullName][]Manager

	// statuses holds the endpoint status reports of computed batches
	// until an apply succeeds: "up" should mean "programmed".
	statuses []gproto.Message

	// afterCommit, when set, is called by program once every table is
	// committed, before routes are programmed, and returns what program
	// waits for before it returns (the models must not change until
	// then): a one-shot apply writes its ruleset files there, beside the
	// route writes, which keep the kernel busy and not this process.
	afterCommit func() (wait func())
}

// newEngine builds the managers for cfg over kernel k. Nothing is written
// anywhere until compute and program. adopt lists the workload interfaces
// an earlier process wanted routes on (see routes.Table.Adopt).
func newEngine(cfg Config, k Kernel, log *slog.Logger, adopt map[string]int) (*engine, error) {
	e := &engine{cfg: cfg, log: log}
	var err error
	if e.inet, err = k.NewTable(nft.FamilyINet, cfg.Render.TableName); err != nil {
		return nil, err
	}
	var arpModel *nft.Model
	if cfg.Render.ARPSuppression {
		if e.arp, err = k.NewTable(nft.FamilyARP, cfg.Render.TableName); err != nil {
			return nil, err
		}
		arpModel = e.arp.Desired()
	}
	rcfg := routes.Config{
		Protocol:             cfg.RouteProtocol,
		InterfacePrefixes:    cfg.Render.InterfacePrefixes,
		RemoveExternalRoutes: &cfg.RemoveExternalRoutes,
		ResyncInterval:       cfg.RouteRefresh,
		Logger:               log,
	}
	if !cfg.Endpoints.IPv6 {
		rcfg.IPVersion = 4
	}
	rcfg.OwnedDevices = ownedDevices(cfg.Overlay)
	if rcfg.ResyncInterval == 0 {
		rcfg.ResyncInterval = -1 // Felix's 0: no periodic resync
	}
	if e.routes, err = k.NewRoutes(rcfg); err != nil {
		return nil, err
	}
	if e.routes != nil {
		e.routes.Adopt(adopt)
	}
	deps := endpoints.Deps{
		Render: cfg.Render,
		Table:  e.inet.Desired(),
		ARP:    arpModel,
		Logger: log,
		Status: func(msg any) {
			if m, ok := msg.(gproto.Message); ok {
				e.statuses = append(e.statuses, m)
			}
		},
	}
	if e.routes != nil {
		deps.Routes = routesAdapter{e.routes}
	}
	if w := k.Sysctls(); w != nil {
		e.sys = &sysctlTracker{Interfaces: sysctl.NewInterfaces(w, sysctl.Options{IPv4: true, IPv6: cfg.Endpoints.IPv6, Logger: log})}
		deps.Sysctls = endpointSysctls{e.sys}
	}
	e.pol = policy.New(cfg.Render, e.inet.Desired(), log)
	deps.Policies = e.pol
	e.eps = endpoints.New(cfg.Endpoints, deps)

	// The endpoint manager comes first, as in Felix. The order is not a
	// requirement: it tells the policy manager which policy chains its
	// chains jump to as it writes them (endpoints.Policies), and each is
	// written at its first use.
	e.register("endpoint manager", e.eps,
		&proto.WorkloadEndpointUpdate{}, &proto.WorkloadEndpointRemove{},
		&proto.HostEndpointUpdate{}, &proto.HostEndpointRemove{},
		&proto.ActivePolicyUpdate{}, &proto.ActivePolicyRemove{})
	e.register("policy manager", e.pol,
		&proto.IPSetUpdate{}, &proto.IPSetDeltaUpdate{}, &proto.IPSetRemove{},
		&proto.ActivePolicyUpdate{}, &proto.ActivePolicyRemove{},
		&proto.ActiveProfileUpdate{}, &proto.ActiveProfileRemove{})

	// Cluster networking: the overlay manager computes cluster routes
	// (into the route table) and tunnel devices (into overlay.Devices,
	// which program applies before the routes).
	if dk, ok := k.(devicesKernel); ok && e.routes != nil {
		if e.devices, err = dk.NewDevices(overlay.DevicesConfig{
			MTUIfacePattern: cfg.Overlay.MTUIfacePattern,
			ResyncInterval:  rcfg.ResyncInterval,
			OnLink:          e.routes.OnIfaceStateChanged,
			OnProblem:       func(feature, _ string) { e.missing = append(e.missing, feature) },
			Logger:          log,
		}); err != nil {
			return nil, err
		}
	}
	odeps := overlay.Deps{Logger: log}
	if e.routes != nil {
		odeps.Routes = e.routes
	}
	if e.devices != nil {
		odeps.Devices = e.devices
	}
	e.ovl = overlay.NewManager(cfg.Overlay, odeps)
	e.register("overlay manager", e.ovl,
		&proto.RouteUpdate{}, &proto.RouteRemove{},
		&proto.VXLANTunnelEndpointUpdate{}, &proto.VXLANTunnelEndpointRemove{},
		&proto.HostMetadataUpdate{}, &proto.HostMetadataRemove{}, &proto.Encapsulation{})

	// The nft side of cluster networking: pools and hosts into the cluster
	// sets, natOutgoing, and the encapsulation's rules.
	e.pools = pools.New(cfg.Render, pools.Config{Hostname: cfg.Overlay.Hostname}, e.inet.Desired(), log)
	e.register("pools manager", e.pools,
		&proto.IPAMPoolUpdate{}, &proto.IPAMPoolRemove{},
		&proto.HostMetadataUpdate{}, &proto.HostMetadataRemove{},
		&proto.VXLANTunnelEndpointUpdate{}, &proto.VXLANTunnelEndpointRemove{},
		&proto.Encapsulation{})
	return e, nil
}

// devicesKernel is a Kernel that programs tunnel devices (the real one).
type devicesKernel interface {
	NewDevices(cfg overlay.DevicesConfig) (*overlay.Devices, error)
}

// ownedDevices are the route table's ownership rules for the tunnel
// devices (Felix's MainTableOwnershipPolicy, cluster-networking spec §6.3):
// every route on a VXLAN device of its family, even with VXLAN off (so
// leftovers go), and BIRD's routes on tunl0 when nftep programs IPIP
// routes.
func ownedDevices(c overlay.Config) []routes.OwnedDevice {
	out := []routes.OwnedDevice{
		{Name: overlay.VXLANDevice, Family: netlink.FAMILY_V4},
		{Name: overlay.VXLANDeviceV6, Family: netlink.FAMILY_V6},
	}
	if c.ProgramIPIPRoutes() {
		out = append(out, routes.OwnedDevice{Name: overlay.IPIPDevice, Family: netlink.FAMILY_V4, Protocols: []netlink.RouteProtocol{unix.RTPROT_BIRD}})
	}
	return out
}

// applyDevices programs the tunnel devices, neighbours and FDB entries. A
// host MTU change the devices found on the way (at a resync) is handed to
// the overlay manager, and recompute tells the loop to compute and apply
// again: the tunnel MTUs follow it.
func (e *engine) applyDevices() error {
	if e.devices == nil {
		return nil
	}
	err := e.devices.Apply()
	if e.devices.HostMTUChanged() {
		e.ovl.OnUpdate(overlay.HostMTUChange{})
		e.recompute = true
	}
	return err
}

// takeRecompute reports whether the engine asked for another compute and
// apply (see applyDevices), and forgets it.
func (e *engine) takeRecompute() bool {
	r := e.recompute
	e.recompute = false
	return r
}

// kernelEvent hands a route, neighbour or watched-link event to the route
// table and the devices, and reports whether it calls for an apply (it
// disagrees with what they want: someone deleted or changed what nftep
// owns).
func (e *engine) kernelEvent(ev any) bool {
	type routeEvents interface {
		OnRouteEvent(routes.RouteEvent) bool
		OnNeighEvent(routes.NeighEvent) bool
	}
	re, _ := e.routes.(routeEvents)
	changed := false
	switch ev := ev.(type) {
	case routes.RouteEvent:
		if re != nil {
			changed = re.OnRouteEvent(ev)
		}
	case routes.NeighEvent:
		if re != nil {
			changed = re.OnNeighEvent(ev)
		}
		if e.devices != nil && e.devices.OnKernelEvent(ev) {
			changed = true
		}
	case routes.LinkEvent:
		if e.devices != nil {
			changed = e.devices.OnKernelEvent(ev)
		}
	case routes.KernelEventsSubscribed:
		if e.routes != nil {
			changed = e.routes.EventsSubscribed(ev.At)
		}
	case routes.KernelEventsLost:
		if e.routes != nil {
			e.routes.EventsLost()
		}
		if e.devices != nil {
			e.devices.QueueResync()
		}
		changed = true
	}
	return changed
}

// register adds a manager, which takes the Felix messages of the types of
// takes (and every interface update).
func (e *engine) register(name string, m Manager, takes ...gproto.Message) {
	e.managers = append(e.managers, managed{name: name, m: m})
	if e.takers == nil {
		e.takers = map[protoreflect.FullName][]Manager{}
	}
	for _, t := range takes {
		n := t.ProtoReflect().Descriptor().FullName()
		e.takers[n] = append(e.takers[n], m)
	}
}

// update hands one message to the managers that take it: proto messages
// from Felix or the state file to the managers registered for their type,
// and interface updates from the monitor to every manager (and to the route
// table). It reports whether any manager took msg: a Felix message no
// manager takes is the caller's to report.
func (e *engine) update(msg any) bool {
	if m, ok := msg.(gproto.Message); ok {
		takers := e.takers[m.ProtoReflect().Descriptor().FullName()]
		for _, t := range takers {
			t.OnUpdate(msg)
		}
		return len(takers) > 0
	}
	if m, ok := msg.(routes.InterfaceStateUpdate); ok && e.routes != nil {
		e.routes.OnIfaceStateChanged(m.Name, m.Index, m.State)
	}
	for _, r := range e.managers {
		r.m.OnUpdate(msg)
	}
	return true
}

// compute settles the recorded messages into the desired models, in Felix's
// order: every manager's ResolveUpdateBatch, then every manager's
// CompleteDeferredWork, each in registration order.
func (e *engine) compute() error {
	for _, r := range e.managers {
		if err := r.m.ResolveUpdateBatch(); err != nil {
			return fmt.Errorf("%s: resolve batch: %w", r.name, err)
		}
	}
	for _, r := range e.managers {
		if err := r.m.CompleteDeferredWork(); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	return nil
}

// applyResult says what one program did.
type applyResult struct {
	inet, arp nft.ApplyStats
	resynced  bool
	drift     nft.Drift
	routesErr error
	// tables reports each table programmed (for the Observer); a failed
	// program ends with the table that failed.
	tables []TableReport
}

// program makes the kernel match the desired state: the inet table and the
// arp table (one transaction each), the interface sysctls the endpoint
// manager asked for, then devices, routes and neighbours. With resync, the
// tables are read back first and every difference repaired (after a
// failure, or periodically). A table error stops before routes: the kernel
// keeps its previous, complete ruleset. Route errors are returned in the
// result, not as the error: they are retried by the next program and never
// open the node.
//
// Both tables' transactions are planned and checked first (plan), so that
// an invalid model writes nothing anywhere. Then the kernel's work
// overlaps where it is independent, each part on its own goroutine with
// its own socket into the namespace (nftables commits take the nf_tables
// commit lock; routes, neighbours and most sysctl writes the RTNL lock, so
// those two go one after the other):
//
//   - sysctls run beside the transactions. They were written before the
//     commit when the endpoint manager wrote them itself, so this opens
//     nothing new.
//   - routes and neighbours run beside the transactions only while the
//     inet table is live (nft.Table.Live: committed by us, nothing failed
//     since): its static part drops traffic from and to workload interfaces
//     it has no endpoint for, so a route to a workload whose chains are not
//     committed yet reaches nothing. Otherwise (a cold start, after a
//     failure, a table someone may have changed) they wait for the commit,
//     and do not happen if it fails: a route to a workload before any rule
//     for it would let its traffic through.
//
// Routes are programmed only with routes set: before Felix's state is known
// (the static table at start) nothing may be removed, and the route table
// would remove what it does not want yet.
func (e *engine) program(ctx context.Context, resync, routes bool) (applyResult, error) {
	var r applyResult
	if err := e.plan(ctx, resync, &r); err != nil {
		return r, err
	}
	sysDone := e.sys.start()
	defer func() {
		if e.sys.finish(sysDone) {
			// Some interface's sysctls failed where the endpoint
			// manager counted on success (or the reverse): it reports
			// those endpoints again, and their new statuses replace
			// the ones it gave before. Nothing in the models changes.
			from := len(e.statuses)
			if err := e.eps.CompleteDeferredWork(); err != nil {
				e.log.Warn("endpoint statuses after sysctl writes", "error", err)
			}
			e.sys.due = false
			e.statuses = supersede(e.statuses, from)
		}
	}()
	var routesDone chan error
	programRoutes := func() error {
		// Devices, neighbours and FDB first: routes on a new device need
		// its index.
		return errors.Join(e.applyDevices(), e.routes.Apply())
	}
	if e.routes != nil && routes && !resync && isLive(e.inet) {
		routesDone = make(chan error, 1)
		go func() {
			// After the sysctls: both take the RTNL lock, and a sysctl
			// write that finds it taken spins (restart_syscall).
			e.sys.wait(sysDone)
			routesDone <- programRoutes()
		}()
	}
	waitRoutes := func() {
		if routesDone != nil {
			r.routesErr = <-routesDone
			routesDone = nil
		}
	}
	defer waitRoutes()
	for _, t := range []Table{e.inet, e.arp} {
		if t == nil {
			continue
		}
		var (
			st  nft.ApplyStats
			err error
		)
		tr := TableReport{Family: string(t.Desired().Family)}
		if resync {
			var rs nft.ResyncStats
			rs, err = t.Resync(ctx)
			st = rs.Apply
			r.resynced = true
			addDrift(&r.drift, rs.Drift)
			tr.Resync, tr.Read, tr.Drift, tr.Duration = true, !rs.Skipped, rs.Drift, rs.Total
		} else {
			st, err = t.Apply(ctx)
			r.resynced = r.resynced || st.Resynced
			tr.Resync, tr.Read, tr.Duration = st.Resynced, st.Resynced, st.Total
		}
		tr.Messages, tr.Operations = st.Messages, st.Operations
		r.tables = append(r.tables, tr)
		if err != nil {
			waitRoutes()
			return r, err
		}
		if t == e.inet {
			r.inet = st
		} else {
			r.arp = st
		}
	}
	if e.afterCommit != nil {
		defer e.afterCommit()()
	}
	if e.routes != nil && routes && routesDone == nil {
		e.sys.wait(sysDone)
		r.routesErr = programRoutes()
	}
	waitRoutes()
	return r, nil
}

// plan plans every table's transaction (nft.Table.Plan) before program
// writes anything: a model that is invalid (a bug of nftep's) then changes
// nothing at all, neither table, nor sysctls, nor routes. The whole
// `apply` counts on it instead of a dry run of its own (see Apply). A
// failure is reported as the table's.
func (e *engine) plan(ctx context.Context, resync bool, r *applyResult) error {
	type planner interface {
		Plan(ctx context.Context, resync bool) error
	}
	for _, t := range []Table{e.inet, e.arp} {
		p, ok := t.(planner)
		if !ok {
			continue
		}
		if err := p.Plan(ctx, resync); err != nil {
			r.tables = append(r.tables, TableReport{Family: string(t.Desired().Family), Resync: resync})
			return err
		}
	}
	return nil
}

// supersede drops from statuses[:from] the endpoint statuses that
// statuses[from:] report again.
func supersede(statuses []gproto.Message, from int) []gproto.Message {
	key := func(m gproto.Message) string {
		switch m := m.(type) {
		case *proto.WorkloadEndpointStatusUpdate:
			id := m.GetId()
			return id.GetOrchestratorId() + "/" + id.GetWorkloadId() + "/" + id.GetEndpointId()
		case *proto.WorkloadEndpointStatusRemove:
			id := m.GetId()
			return id.GetOrchestratorId() + "/" + id.GetWorkloadId() + "/" + id.GetEndpointId()
		}
		return ""
	}
	again := map[string]bool{}
	for _, m := range statuses[from:] {
		if k := key(m); k != "" {
			again[k] = true
		}
	}
	out := statuses[:0]
	for i, m := range statuses {
		if i < from && again[key(m)] {
			continue
		}
		out = append(out, m)
	}
	return out
}

// isLive reports whether t is an nft.Table that is live (nft.Table.Live).
func isLive(t Table) bool {
	l, ok := t.(interface{ Live() bool })
	return ok && l.Live()
}

func addDrift(d *nft.Drift, o nft.Drift) {
	d.TableMissing = d.TableMissing || o.TableMissing
	d.ChainsMissing += o.ChainsMissing
	d.ChainsDiffer += o.ChainsDiffer
	d.ChainsExtra += o.ChainsExtra
	d.SetsMissing += o.SetsMissing
	d.SetsDiffer += o.SetsDiffer
	d.SetsExtra += o.SetsExtra
	d.ElementsMissing += o.ElementsMissing
	d.ElementsDiffer += o.ElementsDiffer
	d.ElementsExtra += o.ElementsExtra
}

// overlayStatus reports cluster networking for the status file; nil
// before Felix's Encapsulation.
func (e *engine) overlayStatus() *overlay.Status {
	var missing map[string]string
	if e.devices != nil {
		if m := e.devices.Problems(); len(m) > 0 {
			missing = m
		}
	}
	return e.ovl.Status(missing)
}

// takeMissing returns the kernel features found missing since the last
// call.
func (e *engine) takeMissing() []string {
	m := e.missing
	e.missing = nil
	return m
}

// takeStatuses returns the status reports waiting for delivery and forgets
// them.
func (e *engine) takeStatuses() []gproto.Message {
	s := e.statuses
	e.statuses = nil
	return s
}

// routeDeadline is when the route table next needs an Apply by itself.
func (e *engine) routeDeadline() time.Time {
	if e.routes == nil {
		return time.Time{}
	}
	dl := e.routes.NextDeadline()
	if e.devices != nil {
		if d := e.devices.NextDeadline(); !d.IsZero() && (dl.IsZero() || d.Before(dl)) {
			dl = d
		}
	}
	return dl
}

// sysctlsFailing reports whether the last sysctl writes left an interface
// unconfigured (to be retried).
func (e *engine) sysctlsFailing() bool { return e.sys != nil && e.sys.failing }

// ruleset returns the desired tables in nft syntax: what `nftep show`
// prints and what the run directory records after each apply.
func (e *engine) ruleset() string {
	s := e.inet.Desired().String()
	if e.arp != nil {
		s += e.arp.Desired().String()
	}
	return s
}

// close releases what the engine opened (the route table's conntrack
// cleanups).
func (e *engine) close() {
	if e.routes != nil {
		e.routes.Close()
	}
}

// deleteTables removes the engine's tables from the kernel.
func (e *engine) deleteTables(ctx context.Context) error {
	var errs []error
	for _, t := range []Table{e.inet, e.arp} {
		if t != nil {
			errs = append(errs, t.Delete(ctx))
		}
	}
	return errors.Join(errs...)
}

// routesAdapter hands the endpoint manager's route targets (both families
// of an interface in one call) to the route table.
type routesAdapter struct{ t RouteTable }

// SetRoutes is part of endpoints.Routes.
func (a routesAdapter) SetRoutes(iface string, targets []endpoints.RouteTarget) {
	ts := make([]routes.Target, len(targets))
	for i, t := range targets {
		ts[i] = routes.Target{CIDR: t.CIDR, DestMAC: t.DestMAC, Priority: t.Priority}
	}
	a.t.SetRoutes(iface, ts)
}

// sysctlTracker writes the interface sysctls for the endpoint manager,
// during program beside the nftables transactions rather than inside
// compute, and remembers whether the last writes failed anywhere, so the
// loop can schedule a retry: the endpoint manager retries only when it
// runs, and with no new message it would not run.
//
// The endpoint manager's Apply (in CompleteDeferredWork, through
// endpointSysctls) writes nothing: it marks the writes due and answers
// with the failures of the last writes, and Pending says that an interface
// about to be written is not pending (unless it failed last time). program then writes; when the
// outcome differs from that answer, the endpoint manager runs again and
// reports the endpoints whose status changed, before any status leaves.
type sysctlTracker struct {
	*sysctl.Interfaces
	failing bool
	// failures counts the interfaces whose writes failed, one per failed
	// Apply each, until takeFailures (for the Observer).
	failures int
	// due: the endpoint manager asked for writes that program has not
	// done yet; lastFailed holds the failures of the last writes.
	due        bool
	lastFailed map[string]error
}

// Apply writes the pending sysctls now (the loop's repair after Verify).
func (s *sysctlTracker) Apply() map[string]error {
	failed := s.Interfaces.Apply()
	s.failing = len(failed) > 0
	s.failures += len(failed)
	s.lastFailed = failed
	return failed
}

// endpointSysctls is the endpoint manager's view of the tracker
// (endpoints.Sysctls): its Apply only marks the writes due.
type endpointSysctls struct{ *sysctlTracker }

// Apply is part of endpoints.Sysctls.
func (s endpointSysctls) Apply() map[string]error {
	s.due = true
	return maps.Clone(s.lastFailed)
}

// Pending is part of endpoints.Sysctls.
func (s endpointSysctls) Pending(name string) bool {
	if s.due {
		_, failed := s.lastFailed[name]
		return failed && s.Interfaces.Pending(name)
	}
	return s.Interfaces.Pending(name)
}

// PendingUp is part of endpoints.Sysctls: while writes are due, Pending
// is true only for interfaces whose last writes failed.
func (s endpointSysctls) PendingUp() iter.Seq[string] {
	if s.due {
		return maps.Keys(s.lastFailed)
	}
	return s.Interfaces.PendingUp()
}

// start writes the due sysctls on a goroutine of their own (on a thread
// in the namespace: sysctl.ProcWriter.Batch) and returns what finish and
// wait take; nil when nothing is due.
func (s *sysctlTracker) start() chan map[string]error {
	if s == nil || !s.due {
		return nil
	}
	done := make(chan map[string]error, 1)
	go func() { done <- s.Interfaces.Apply() }()
	return done
}

// wait waits for the writes start began, if any, without taking their
// result.
func (s *sysctlTracker) wait(done chan map[string]error) {
	if done == nil {
		return
	}
	failed := <-done
	done <- failed
}

// finish takes the result of the writes start began and reports whether
// it differs from what Apply told the endpoint manager.
func (s *sysctlTracker) finish(done chan map[string]error) bool {
	if done == nil {
		return false
	}
	failed := <-done
	s.due = false
	s.failing = len(failed) > 0
	s.failures += len(failed)
	changed := len(failed) != len(s.lastFailed)
	for name := range failed {
		if _, ok := s.lastFailed[name]; !ok {
			changed = true
		}
	}
	s.lastFailed = failed
	return changed
}

// takeFailures returns the failures counted since the last call.
func (s *sysctlTracker) takeFailures() int {
	n := s.failures
	s.failures = 0
	return n
}

// ifaceCache remembers the last state and addresses of every interface the
// monitor reported, so that an engine built later (a new configuration)
// starts from the same view.
type ifaceCache struct {
	order []string
	state map[string]routes.InterfaceStateUpdate
	addrs map[string][]netip.Addr // present (maybe empty) once reported
}

func newIfaceCache() *ifaceCache {
	return &ifaceCache{state: map[string]routes.InterfaceStateUpdate{}, addrs: map[string][]netip.Addr{}}
}

// record notes an update; it reports whether msg was an interface update.
func (c *ifaceCache) record(msg any) bool {
	switch m := msg.(type) {
	case routes.InterfaceStateUpdate:
		if _, ok := c.state[m.Name]; !ok {
			c.order = append(c.order, m.Name)
		}
		if m.State == routes.IfaceGone {
			delete(c.state, m.Name)
			delete(c.addrs, m.Name)
			for i, n := range c.order {
				if n == m.Name {
					c.order = append(c.order[:i], c.order[i+1:]...)
					break
				}
			}
			return true
		}
		c.state[m.Name] = m
		return true
	case routes.InterfaceAddrsUpdate:
		if m.Addrs == nil {
			delete(c.addrs, m.Name)
		} else if _, ok := c.state[m.Name]; ok {
			c.addrs[m.Name] = m.Addrs
		}
		return true
	}
	return false
}

// replay returns the updates that tell a new engine what the cache knows.
func (c *ifaceCache) replay() []any {
	var out []any
	for _, name := range c.order {
		out = append(out, c.state[name])
		if addrs, ok := c.addrs[name]; ok {
			out = append(out, routes.InterfaceAddrsUpdate{Name: name, Addrs: addrs})
		}
	}
	return out
}
