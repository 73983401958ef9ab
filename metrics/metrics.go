// Package metrics exposes what nftep's event loop does as Prometheus
// metrics, and its health, over HTTP: /metrics, /livez and /readyz on one
// listener. The loop knows nothing of Prometheus: it tells a
// dataplane.Observer, which Metrics implements (and dataplane.Health, which
// the health endpoints ask). See docs/operations.md for every metric.
package metrics

import (
	"sync"
	"time"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/routes"
)

// Namespace prefixes nftep's own metrics.
const Namespace = "nftep"

// Options says which metrics to register.
type Options struct {
	// Felix adds the counterparts of the metrics Felix's internal
	// dataplane exposes (felix/dataplane/linux/int_dataplane.go), under
	// Felix's names, for dashboards built on them: driver mode, where
	// nftep replaces that dataplane.
	Felix bool
	// NoRuntime leaves out the Go runtime and process collectors (tests
	// that compare every metric).
	NoRuntime bool
}

// Metrics is a dataplane.Observer that keeps Prometheus metrics in its own
// registry. It is safe for concurrent use.
type Metrics struct {
	dataplane.BaseObserver
	reg *Registry

	// Families with labels; the series of those without.
	applyDuration   *family
	txMessages      *family
	txFailed        *family
	endpoints       *family
	resyncs         *family
	resyncReads     *family
	resyncRepairs   *family
	tableEvents     *series
	routesProg      *series
	routesRemoved   *series
	routesRepaired  *series
	sysctlFailures  *series
	lastApply       *series
	ipsets          *series
	ipsetMembers    *series
	batchUpdates    *series
	felixApplyTime  *series
	felixFailures   *series
	felixMessages   *family
	unhandled       *family
	featureMissing  *family
	pools           *family
	felixBatchSize  *series
	felixCompatible bool

	legacyRules   *family
	leftovers     *family
	ipsetsKept    *series
	mu            sync.Mutex
	leftoversSeen map[string]int // guarded by mu
}

// Buckets of the histograms: apply durations from 100 µs (a small change
// on a small node) to 30 s (a cold start of a very large one); netlink
// messages per transaction from 1 to 100,000.
var (
	durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	messageBuckets  = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000}
	batchBuckets    = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000}
)

// Label values set up front, so that their series exist (at 0) from the
// start: a rate over a series that appears with its first increment misses
// that increment.
var (
	tables   = []string{"inet", "arp"}
	failures = []dataplane.Failure{dataplane.FailureRefused, dataplane.FailureStateUnknown, dataplane.FailureInvalid}
)

// New returns Metrics registered in a new registry.
func New(opts Options) *Metrics {
	m := &Metrics{reg: NewRegistry(), felixCompatible: opts.Felix}
	f := factory{m.reg}
	m.applyDuration = f.histogramVec("apply_duration_seconds",
		"Time one table's transaction took, read-back (resync) included, by table (inet or arp).", durationBuckets, "table")
	m.txMessages = f.histogramVec("transaction_messages",
		"Netlink messages in one table's transaction, by table.", messageBuckets, "table")
	m.txFailed = f.counterVec("transactions_failed_total",
		"Applies that failed, by reason: refused (the kernel refused the transaction, nothing changed), state_unknown (the outcome is unknown; the retry resyncs), invalid (the desired state failed validation, nothing was sent).", "reason")
	m.endpoints = f.gaugeVec("endpoints",
		"Endpoints by kind (workload, host) and status (up, down, error).", "kind", "status")
	m.resyncs = f.counterVec("resyncs_total",
		"Resyncs of a table (periodic, after nftables events, after a failure), by table.", "table")
	m.resyncReads = f.counterVec("resync_reads_total",
		"Resyncs that read the table back from the kernel, by table (a resync skips the read when nobody committed since our last commit).", "table")
	m.resyncRepairs = f.counterVec("resync_repairs_total",
		"Differences a resync found and repaired, by object (table, chain, set, element) and drift (missing, differ, extra).", "object", "drift")
	m.tableEvents = f.counter("nftables_events_total",
		"Notifications of nftables events on nftep's tables (events arriving together count once).")
	m.routesProg = f.counter("routes_programmed_total", "Routes added or replaced.")
	m.routesRemoved = f.counter("routes_removed_total", "Routes deleted.")
	m.routesRepaired = f.counter("routes_repaired_total",
		"Route writes (of routes_programmed_total and routes_removed_total) that repaired drift a route resync found.")
	m.sysctlFailures = f.counter("sysctl_write_failures_total",
		"Failed attempts to write an interface's sysctls (one per interface per attempt; retried).")
	m.lastApply = f.gauge("last_apply_success_timestamp_seconds",
		"When an apply last succeeded, in seconds since the Unix epoch.")
	m.ipsets = f.gauge("ipsets", "Felix IP sets in the table.")
	m.ipsetMembers = f.gauge("ipset_members", "Members of the Felix IP sets in the table (both families).")
	m.unhandled = f.counterVec("felix_messages_unhandled_total",
		"Felix messages that no manager of nftep takes, by type (\"field N\" for a payload nftep's schema does not declare); each type is also logged once.", "type")
	m.legacyRules = f.gaugeVec("iptables_legacy_rules",
		"Rules in an iptables-legacy (x_tables) table, which nftep cannot remove and whose drops still decide, by family (ipv4, ipv6) and table; -1 when they could not be counted. `nftep status` names the commands that inspect and clean them.", "family", "table")
	m.leftovers = f.counterVec("calico_leftovers_removed_total",
		"Objects of Calico's own dataplane nftep removed, by kind (table, chain, rule, ipset).", "kind")
	m.ipsetsKept = f.gauge("calico_ipsets_kept",
		"Calico ipsets nftep could not remove because something (an iptables-legacy rule, say) still refers to them.")
	m.leftoversSeen = map[string]int{}
	for _, k := range leftoverKinds {
		m.leftovers.with(k)
	}
	m.featureMissing = f.gaugeVec("kernel_feature_missing",
		"1 for each kernel feature an encapsulation in use needs and the kernel lacks (\"ipip\": no CONFIG_NET_IPIP); also in nftep status and logged once.", "feature")
	m.pools = f.gaugeVec("ip_pools",
		"IP pools Felix sent (IPAMPoolUpdate), by natOutgoing (\"true\", \"false\").", "nat_outgoing")
	m.batchUpdates = f.histogram("apply_updates",
		"Updates (Felix messages, state file changes, interface events) that one apply programmed.", batchBuckets)

	for _, t := range tables {
		m.applyDuration.with(t)
		m.txMessages.with(t)
		m.resyncs.with(t)
		m.resyncReads.with(t)
	}
	for _, r := range failures {
		m.txFailed.with(string(r))
	}
	m.resetEndpoints()

	if opts.Felix {
		// Felix's summaries: the quantiles of the last ten minutes (its
		// client's default window), or of the last maxRecent
		// observations when there were more.
		m.felixApplyTime = m.reg.summary("felix_int_dataplane_apply_time_seconds",
			"Time in seconds that it took to apply a dataplane update (nftep: one apply, all tables and routes).",
			felixQuantiles, felixWindow).with()
		m.felixFailures = m.reg.counter("felix_int_dataplane_failures",
			"Number of times dataplane updates failed and will be retried.").with()
		m.felixMessages = m.reg.counter("felix_int_dataplane_messages",
			"Number dataplane messages by type.", "type")
		m.felixBatchSize = m.reg.summary("felix_int_dataplane_msg_batch_size",
			"Number of messages processed in each batch.", felixQuantiles, felixWindow).with()
	}
	m.reg.runtime = !opts.NoRuntime
	return m
}

var felixQuantiles = []float64{0.5, 0.9, 0.99}

const felixWindow = 10 * time.Minute

// Registry returns the registry holding the metrics.
func (m *Metrics) Registry() *Registry { return m.reg }

// Message is part of dataplane.Observer.
func (m *Metrics) Message(kind string) {
	if m.felixCompatible {
		m.felixMessages.with(kind).inc()
	}
}

// KernelFeatureMissing is part of dataplane.Observer.
func (m *Metrics) KernelFeatureMissing(feature string) {
	m.featureMissing.with(feature).set(1)
}

// Unhandled is part of dataplane.Observer.
func (m *Metrics) Unhandled(kind string) { m.unhandled.with(kind).inc() }

// TableEvent is part of dataplane.Observer.
func (m *Metrics) TableEvent() { m.tableEvents.inc() }

// Applied is part of dataplane.Observer.
func (m *Metrics) Applied(r *dataplane.ApplyReport) {
	for _, t := range r.Tables {
		m.applyDuration.with(t.Family).observe(t.Duration.Seconds())
		if t.Messages > 0 {
			m.txMessages.with(t.Family).observe(float64(t.Messages))
		}
		if t.Resync {
			m.resyncs.with(t.Family).inc()
		}
		if t.Read {
			m.resyncReads.with(t.Family).inc()
		}
		m.addDrift(t)
	}
	if m.felixCompatible {
		m.felixApplyTime.observe(r.Duration.Seconds())
		if r.Updates > 0 {
			m.felixBatchSize.observe(float64(r.Updates))
		}
	}
	if r.Updates > 0 {
		m.batchUpdates.observe(float64(r.Updates))
	}
	if r.Err != nil {
		m.txFailed.with(string(r.Failure)).inc()
		if m.felixCompatible {
			m.felixFailures.inc()
		}
		return
	}
	m.lastApply.set(float64(r.Time.UnixNano()) / 1e9)
}

func (m *Metrics) addDrift(t dataplane.TableReport) {
	d := t.Drift
	add := func(object, drift string, n int) {
		if n > 0 {
			m.resyncRepairs.with(object, drift).add(float64(n))
		}
	}
	if d.TableMissing {
		add("table", "missing", 1)
	}
	add("chain", "missing", d.ChainsMissing)
	add("chain", "differ", d.ChainsDiffer)
	add("chain", "extra", d.ChainsExtra)
	add("set", "missing", d.SetsMissing)
	add("set", "differ", d.SetsDiffer)
	add("set", "extra", d.SetsExtra)
	add("element", "missing", d.ElementsMissing)
	add("element", "differ", d.ElementsDiffer)
	add("element", "extra", d.ElementsExtra)
}

// RoutesWritten is part of dataplane.Observer.
func (m *Metrics) RoutesWritten(s routes.Stats) {
	m.routesProg.add(float64(s.Programmed))
	m.routesRemoved.add(float64(s.Removed))
	m.routesRepaired.add(float64(s.Repaired))
}

// SysctlsFailed is part of dataplane.Observer.
func (m *Metrics) SysctlsFailed(n int) { m.sysctlFailures.add(float64(n)) }

// State is part of dataplane.Observer.
func (m *Metrics) State(s *dataplane.StateReport) {
	m.resetEndpoints()
	for c, n := range s.Endpoints {
		m.endpoints.with(c.Kind, c.Status).set(float64(n))
	}
	m.ipsets.set(float64(s.IPSets))
	m.ipsetMembers.set(float64(s.IPSetMembers))
	m.pools.with("true").set(float64(s.NATOutgoingPools))
	m.pools.with("false").set(float64(s.Pools - s.NATOutgoingPools))
	if r := s.Takeover; r != nil {
		m.legacyRules.reset()
		for _, t := range r.Legacy {
			m.legacyRules.with(t.Family, t.Table).set(float64(t.Rules))
		}
		m.ipsetsKept.set(float64(len(r.IPSetsKept)))
		m.mu.Lock()
		defer m.mu.Unlock()
		for k, n := range map[string]int{"table": r.RemovedTables, "chain": r.RemovedChains, "rule": r.RemovedRules, "ipset": r.RemovedIPSets} {
			if d := n - m.leftoversSeen[k]; d > 0 {
				m.leftovers.with(k).add(float64(d))
			}
			m.leftoversSeen[k] = n
		}
	}
}

// leftoverKinds are the kinds of nftep_calico_leftovers_removed_total.
var leftoverKinds = []string{"table", "chain", "rule", "ipset"}

// resetEndpoints sets every kind and status an endpoint can have to 0, so
// that a query for "error" endpoints returns 0, not nothing.
func (m *Metrics) resetEndpoints() {
	m.endpoints.reset()
	for _, kind := range []string{"workload", "host"} {
		for _, st := range []string{"up", "down", "error"} {
			m.endpoints.with(kind, st)
		}
	}
}

// factory makes nftep_ metrics in a registry.
type factory struct{ reg *Registry }

func (f factory) counter(name, help string) *series {
	return f.reg.counter(Namespace+"_"+name, help).with()
}

func (f factory) counterVec(name, help string, labels ...string) *family {
	return f.reg.counter(Namespace+"_"+name, help, labels...)
}

func (f factory) gauge(name, help string) *series {
	return f.reg.gauge(Namespace+"_"+name, help).with()
}

func (f factory) gaugeVec(name, help string, labels ...string) *family {
	return f.reg.gauge(Namespace+"_"+name, help, labels...)
}

func (f factory) histogram(name, help string, buckets []float64) *series {
	return f.reg.histogram(Namespace+"_"+name, help, buckets).with()
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *family {
	return f.reg.histogram(Namespace+"_"+name, help, buckets, labels...)
}
