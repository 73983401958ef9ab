package dataplane

import (
	"strings"
	"sync"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/routes"

	"github.com/nftep/nftep/takeover"
)

// Observer is told what the loop does: the metrics package turns it into
// Prometheus metrics, Health into liveness and readiness, and tests read it
// directly. The loop calls it from its one goroutine, between events: a
// method must return quickly, and must not call back into the dataplane.
// Embed BaseObserver to implement only some methods.
type Observer interface {
	// Heartbeat says the loop is turning: it is called each time the
	// loop takes an event or a timer, and before it looks for the next.
	// A loop stuck in an apply (or anywhere) stops calling it.
	Heartbeat(now time.Time)
	// Idle says the loop waits for its next event or timer, from now
	// until its next Heartbeat: an idle loop does not wake up only to
	// say it is alive (each wake of an idle process costs context
	// switches), so a long wait is not a stuck loop.
	Idle(now time.Time)
	// Message is one Felix message handed to the managers (driver mode),
	// by its type name as Felix counts them ("WorkloadEndpointUpdate").
	Message(kind string)
	// Unhandled is one Felix message that no manager takes, by its type
	// name, or "field N" for a payload felix.proto does not declare.
	Unhandled(kind string)
	// TableEvent is one notification of nftables events on our tables
	// (several events may be coalesced into one).
	TableEvent()
	// Applied reports one apply: the tables' transactions and the outcome.
	Applied(r *ApplyReport)
	// RoutesWritten reports the route writes of an apply or of a route
	// resync the route table asked for.
	RoutesWritten(s routes.Stats)
	// SysctlsFailed reports interfaces whose sysctl writes failed (each
	// failed attempt of each interface counts one).
	SysctlsFailed(interfaces int)
	// State reports what the dataplane holds, after an apply that may
	// have changed it.
	State(s *StateReport)
	// KernelFeatureMissing reports, once per process, a kernel feature an
	// encapsulation in use needs and the kernel lacks ("ipip").
	KernelFeatureMissing(feature string)
}

// BaseObserver implements Observer with methods that do nothing.
type BaseObserver struct{}

// Heartbeat is part of Observer.
func (BaseObserver) Heartbeat(time.Time) {}

// Idle is part of Observer.
func (BaseObserver) Idle(time.Time) {}

// KernelFeatureMissing is part of Observer.
func (BaseObserver) KernelFeatureMissing(string) {}

// Message is part of Observer.
func (BaseObserver) Message(string) {}

// Unhandled is part of Observer.
func (BaseObserver) Unhandled(string) {}

// TableEvent is part of Observer.
func (BaseObserver) TableEvent() {}

// Applied is part of Observer.
func (BaseObserver) Applied(*ApplyReport) {}

// RoutesWritten is part of Observer.
func (BaseObserver) RoutesWritten(routes.Stats) {}

// SysctlsFailed is part of Observer.
func (BaseObserver) SysctlsFailed(int) {}

// State is part of Observer.
func (BaseObserver) State(*StateReport) {}

// Failure classifies a failed apply.
type Failure string

// The failures of an apply.
const (
	// FailureRefused: the kernel refused the transaction; nothing changed.
	FailureRefused Failure = "refused"
	// FailureStateUnknown: the outcome is unknown (nft.IsStateUnknown).
	FailureStateUnknown Failure = "state_unknown"
	// FailureInvalid: the desired state failed validation (a bug); nothing
	// was sent (nft.IsInvalid).
	FailureInvalid Failure = "invalid"
)

// ClassifyFailure returns the Failure of an apply error.
func ClassifyFailure(err error) Failure {
	switch {
	case err == nil:
		return ""
	case nft.IsStateUnknown(err):
		return FailureStateUnknown
	case nft.IsInvalid(err):
		return FailureInvalid
	}
	return FailureRefused
}

// ApplyReport is one apply as Observer.Applied sees it.
type ApplyReport struct {
	// Time is when the apply ended; Duration how long it took (tables
	// and routes).
	Time     time.Time
	Duration time.Duration
	// Tables are the tables the apply programmed, inet first; a failed
	// apply ends with the table that failed.
	Tables []TableReport
	// Err is why the apply failed; nil on success. Failure classifies it.
	Err     error
	Failure Failure
	// InSync is true when the apply programmed the whole state (after
	// Felix's InSync, or from a valid state file); false for the static
	// table programmed at start.
	InSync bool
	// Updates is the number of messages (Felix's, the state file's
	// changes, interface updates) recorded since the previous apply.
	Updates int
}

// TableReport is one table's part of an apply.
type TableReport struct {
	// Family is "inet" or "arp".
	Family string
	// Duration is the table's whole apply (read-back included).
	Duration time.Duration
	// Messages is the number of netlink messages of its transaction(s),
	// Operations the objects added or removed.
	Messages, Operations int
	// Resync is true when the table was resynced; Read when that resync
	// read the table back (it does not when nobody committed since our
	// last commit). A retry inside nft.Table.Apply counts as a read.
	Resync, Read bool
	// Drift is what the resync found different.
	Drift nft.Drift
}

// StateReport is what the dataplane holds after an apply.
type StateReport struct {
	// Endpoints counts endpoints by kind ("workload", "host") and status
	// ("up", "down", "error").
	Endpoints map[EndpointClass]int
	// IPSets is the number of Felix IP sets in the table, IPSetMembers
	// the number of their members (over both families).
	IPSets, IPSetMembers int
	// Pools is the number of IP pools, NATOutgoingPools those with
	// natOutgoing.
	Pools, NATOutgoingPools int
	// Takeover is what nftep removed of Calico's dataplane and could not
	// remove (iptables-legacy tables, ipsets in use); nil without a
	// take-over (a dry run).
	Takeover *takeover.Report
}

// EndpointClass is a kind and a status of endpoints.
type EndpointClass struct{ Kind, Status string }

// Observers returns an Observer that tells each of obs in turn.
func Observers(obs ...Observer) Observer { return multiObserver(obs) }

type multiObserver []Observer

func (m multiObserver) Heartbeat(now time.Time) {
	for _, o := range m {
		o.Heartbeat(now)
	}
}

func (m multiObserver) Idle(now time.Time) {
	for _, o := range m {
		o.Idle(now)
	}
}

func (m multiObserver) KernelFeatureMissing(feature string) {
	for _, o := range m {
		o.KernelFeatureMissing(feature)
	}
}

func (m multiObserver) Unhandled(kind string) {
	for _, o := range m {
		o.Unhandled(kind)
	}
}

func (m multiObserver) Message(kind string) {
	for _, o := range m {
		o.Message(kind)
	}
}
func (m multiObserver) TableEvent() {
	for _, o := range m {
		o.TableEvent()
	}
}
func (m multiObserver) Applied(r *ApplyReport) {
	for _, o := range m {
		o.Applied(r)
	}
}
func (m multiObserver) RoutesWritten(s routes.Stats) {
	for _, o := range m {
		o.RoutesWritten(s)
	}
}
func (m multiObserver) SysctlsFailed(n int) {
	for _, o := range m {
		o.SysctlsFailed(n)
	}
}
func (m multiObserver) State(s *StateReport) {
	for _, o := range m {
		o.State(s)
	}
}

// observer returns Options.Observer, or one that does nothing.
func (o *Options) observer() Observer {
	if o.Observer == nil {
		return BaseObserver{}
	}
	return o.Observer
}

// observeMessage counts a Felix message by type name, as Felix's
// felix_int_dataplane_messages does (felix/dataplane/linux/int_dataplane.go,
// recordMsgStat).
func (l *loop) observeMessage(ev any) {
	if m, ok := ev.(gproto.Message); ok {
		l.obs.Message(messageKind(m))
	}
}

// observeApply reports an apply that started at start (see apply).
func (l *loop) observeApply(start time.Time, res applyResult, err error, statusesChanged bool) {
	now := time.Now()
	r := &ApplyReport{
		Time:     now,
		Duration: now.Sub(start),
		Tables:   res.tables,
		Err:      err,
		Failure:  ClassifyFailure(err),
		InSync:   l.inSync,
		Updates:  l.updates,
	}
	l.updates = 0
	l.obs.Applied(r)
	l.observeRoutes()
	if l.eng.sys != nil {
		if n := l.eng.sys.takeFailures(); n > 0 {
			l.obs.SysctlsFailed(n)
		}
	}
	// The state report costs time in proportion to the endpoints: only for
	// an observer that listens, and the endpoint counts only when a status
	// changed (a policy or IP set change reports none).
	if err == nil && l.opts.Observer != nil && (statusesChanged || r.Updates > 0 || l.observed != l.eng) {
		counts := statusesChanged || l.observed != l.eng || l.lastState == nil
		l.observed = l.eng
		l.lastState = l.eng.state(counts, l.lastState)
		l.lastState.Takeover = l.takeoverReport()
		l.obs.State(l.lastState)
	}
}

// observeRoutes reports the route table's writes since the last report.
func (l *loop) observeRoutes() {
	type stats interface{ TakeStats() routes.Stats }
	if l.eng == nil || l.eng.routes == nil {
		return
	}
	if s, ok := l.eng.routes.(stats); ok {
		if st := s.TakeStats(); st != (routes.Stats{}) {
			l.obs.RoutesWritten(st)
		}
	}
}

// state counts the engine's endpoints by kind and status (with counts, or
// else as prev has them), and the Felix IP sets in its inet table. Counting
// endpoints costs time in proportion to them: the loop asks only after an
// apply that changed a status.
func (e *engine) state(counts bool, prev *StateReport) *StateReport {
	s := &StateReport{Endpoints: map[EndpointClass]int{}}
	if counts || prev == nil {
		for _, st := range e.eps.Statuses() {
			s.Endpoints[EndpointClass{st.Kind, st.Status}]++
		}
	} else {
		s.Endpoints = prev.Endpoints
	}
	s.Pools, s.NATOutgoingPools = e.pools.Counts()
	m := e.inet.Desired()
	for _, name := range m.SetNames() {
		if !strings.HasPrefix(name, ipSetPrefix) {
			continue
		}
		// Every Felix IP set has a -v4 set (and a -v6 one with IPv6).
		if strings.HasSuffix(name, "-v4") {
			s.IPSets++
		}
		s.IPSetMembers += len(m.Set(name).Elements)
	}
	return s
}

// ipSetPrefix starts the names of the nft sets of Felix IP sets (see
// policy.IPSetName).
const ipSetPrefix = "ipset-"

// Health decides liveness and readiness from what the loop reports (it is
// an Observer): live while the loop waits for work (Idle) or its last
// heartbeat is younger than the limit, ready once an apply programmed the
// whole state and until a transaction fails. It is safe for concurrent use
// (HTTP handlers ask it).
type Health struct {
	BaseObserver
	limit time.Duration

	mu sync.Mutex
	// beat is the last heartbeat; idle says the loop has waited for work
	// since (Idle).
	beat     time.Time
	idle     bool
	ready    bool
	notReady string
}

// DefaultHealthLimit is how long a loop may go without a heartbeat, unless
// it is waiting for work, before Health calls it stuck: longer than any
// apply should take (a cold start of 10,000 endpoints takes tens of
// seconds).
const DefaultHealthLimit = 60 * time.Second

// NewHealth returns a Health that calls the loop stuck after limit without
// a heartbeat while it is not waiting for work (DefaultHealthLimit when
// not positive). It counts as a heartbeat now, so that a loop that never
// started fails after limit.
func NewHealth(limit time.Duration) *Health {
	return &Health{
		limit:    orDefault(limit, DefaultHealthLimit),
		beat:     time.Now(),
		notReady: "no full apply yet (waiting for the state file, or for Felix's InSync)",
	}
}

// Limit returns the heartbeat age beyond which Live fails.
func (h *Health) Limit() time.Duration { return h.limit }

// Heartbeat is part of Observer.
func (h *Health) Heartbeat(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beat, h.idle = now, false
}

// Idle is part of Observer.
func (h *Health) Idle(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beat, h.idle = now, true
}

// Applied is part of Observer.
func (h *Health) Applied(r *ApplyReport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case r.Err != nil:
		h.ready = false
		h.notReady = "the last transaction failed (" + string(r.Failure) + "): " + r.Err.Error()
	case r.InSync:
		h.ready = true
		h.notReady = ""
	}
}

// Live returns nil while the loop turns: it waits for work, or its last
// heartbeat is at most the limit old at now.
func (h *Health) Live(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if age := now.Sub(h.beat); !h.idle && age > h.limit {
		return &HealthError{Reason: "the event loop is stuck: no heartbeat for " + age.Round(time.Millisecond).String() + " (limit " + h.limit.String() + ")"}
	}
	return nil
}

// Ready returns nil once an apply programmed the whole state, as long as
// the last apply succeeded.
func (h *Health) Ready() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ready {
		return &HealthError{Reason: h.notReady}
	}
	return nil
}

// HealthError says why nftep is not live or not ready.
type HealthError struct{ Reason string }

func (e *HealthError) Error() string { return e.Reason }
