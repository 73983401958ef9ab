// Package metrics exposes what nftep's event loop does as Prometheus
// metrics, and its health, over HTTP: /metrics, /livez and /readyz on one
// listener. The loop knows nothing of Prometheus: it tells a
// dataplane.Observer, which Metrics implements (and dataplane.Health, which
// the health endpoints ask). See docs/operations.md for every metric.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"sync"

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
	reg *prometheus.Registry

	applyDuration   *prometheus.HistogramVec
	txMessages      *prometheus.HistogramVec
	txFailed        *prometheus.CounterVec
	endpoints       *prometheus.GaugeVec
	resyncs         *prometheus.CounterVec
	resyncReads     *prometheus.CounterVec
	resyncRepairs   *prometheus.CounterVec
	tableEvents     prometheus.Counter
	routesProg      prometheus.Counter
	routesRemoved   prometheus.Counter
	routesRepaired  prometheus.Counter
	sysctlFailures  prometheus.Counter
	lastApply       prometheus.Gauge
	ipsets          prometheus.Gauge
	ipsetMembers    prometheus.Gauge
	batchUpdates    prometheus.Histogram
	felixApplyTime  prometheus.Summary
	felixFailures   prometheus.Counter
	felixMessages   *prometheus.CounterVec
	unhandled       *prometheus.CounterVec
	featureMissing  *prometheus.GaugeVec
	pools           *prometheus.GaugeVec
	felixBatchSize  prometheus.Summary
	felixCompatible bool

	legacyRules   *prometheus.GaugeVec
	leftovers     *prometheus.CounterVec
	ipsetsKept    prometheus.Gauge
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
	m := &Metrics{reg: prometheus.NewRegistry(), felixCompatible: opts.Felix}
	f := promFactory{m.reg}
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
		m.leftovers.WithLabelValues(k)
	}
	m.featureMissing = f.gaugeVec("kernel_feature_missing",
		"1 for each kernel feature an encapsulation in use needs and the kernel lacks (\"ipip\": no CONFIG_NET_IPIP); also in nftep status and logged once.", "feature")
	m.pools = f.gaugeVec("ip_pools",
		"IP pools Felix sent (IPAMPoolUpdate), by natOutgoing (\"true\", \"false\").", "nat_outgoing")
	m.batchUpdates = f.histogram("apply_updates",
		"Updates (Felix messages, state file changes, interface events) that one apply programmed.", batchBuckets)

	for _, t := range tables {
		m.applyDuration.WithLabelValues(t)
		m.txMessages.WithLabelValues(t)
		m.resyncs.WithLabelValues(t)
		m.resyncReads.WithLabelValues(t)
	}
	for _, r := range failures {
		m.txFailed.WithLabelValues(string(r))
	}
	m.resetEndpoints()

	if opts.Felix {
		m.felixApplyTime = prometheus.NewSummary(prometheus.SummaryOpts{
			Name:       "felix_int_dataplane_apply_time_seconds",
			Help:       "Time in seconds that it took to apply a dataplane update (nftep: one apply, all tables and routes).",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		})
		m.felixFailures = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_int_dataplane_failures",
			Help: "Number of times dataplane updates failed and will be retried.",
		})
		m.felixMessages = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_int_dataplane_messages",
			Help: "Number dataplane messages by type.",
		}, []string{"type"})
		m.felixBatchSize = prometheus.NewSummary(prometheus.SummaryOpts{
			Name:       "felix_int_dataplane_msg_batch_size",
			Help:       "Number of messages processed in each batch.",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		})
		m.reg.MustRegister(m.felixApplyTime, m.felixFailures, m.felixMessages, m.felixBatchSize)
	}
	if !opts.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// Registry returns the registry holding the metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Message is part of dataplane.Observer.
func (m *Metrics) Message(kind string) {
	if m.felixCompatible {
		m.felixMessages.WithLabelValues(kind).Inc()
	}
}

// KernelFeatureMissing is part of dataplane.Observer.
func (m *Metrics) KernelFeatureMissing(feature string) {
	m.featureMissing.WithLabelValues(feature).Set(1)
}

// Unhandled is part of dataplane.Observer.
func (m *Metrics) Unhandled(kind string) { m.unhandled.WithLabelValues(kind).Inc() }

// TableEvent is part of dataplane.Observer.
func (m *Metrics) TableEvent() { m.tableEvents.Inc() }

// Applied is part of dataplane.Observer.
func (m *Metrics) Applied(r *dataplane.ApplyReport) {
	for _, t := range r.Tables {
		m.applyDuration.WithLabelValues(t.Family).Observe(t.Duration.Seconds())
		if t.Messages > 0 {
			m.txMessages.WithLabelValues(t.Family).Observe(float64(t.Messages))
		}
		if t.Resync {
			m.resyncs.WithLabelValues(t.Family).Inc()
		}
		if t.Read {
			m.resyncReads.WithLabelValues(t.Family).Inc()
		}
		m.addDrift(t)
	}
	if m.felixCompatible {
		m.felixApplyTime.Observe(r.Duration.Seconds())
		if r.Updates > 0 {
			m.felixBatchSize.Observe(float64(r.Updates))
		}
	}
	if r.Updates > 0 {
		m.batchUpdates.Observe(float64(r.Updates))
	}
	if r.Err != nil {
		m.txFailed.WithLabelValues(string(r.Failure)).Inc()
		if m.felixCompatible {
			m.felixFailures.Inc()
		}
		return
	}
	m.lastApply.Set(float64(r.Time.UnixNano()) / 1e9)
}

func (m *Metrics) addDrift(t dataplane.TableReport) {
	d := t.Drift
	add := func(object, drift string, n int) {
		if n > 0 {
			m.resyncRepairs.WithLabelValues(object, drift).Add(float64(n))
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
	m.routesProg.Add(float64(s.Programmed))
	m.routesRemoved.Add(float64(s.Removed))
	m.routesRepaired.Add(float64(s.Repaired))
}

// SysctlsFailed is part of dataplane.Observer.
func (m *Metrics) SysctlsFailed(n int) { m.sysctlFailures.Add(float64(n)) }

// State is part of dataplane.Observer.
func (m *Metrics) State(s *dataplane.StateReport) {
	m.resetEndpoints()
	for c, n := range s.Endpoints {
		m.endpoints.WithLabelValues(c.Kind, c.Status).Set(float64(n))
	}
	m.ipsets.Set(float64(s.IPSets))
	m.ipsetMembers.Set(float64(s.IPSetMembers))
	m.pools.WithLabelValues("true").Set(float64(s.NATOutgoingPools))
	m.pools.WithLabelValues("false").Set(float64(s.Pools - s.NATOutgoingPools))
	if r := s.Takeover; r != nil {
		m.legacyRules.Reset()
		for _, t := range r.Legacy {
			m.legacyRules.WithLabelValues(t.Family, t.Table).Set(float64(t.Rules))
		}
		m.ipsetsKept.Set(float64(len(r.IPSetsKept)))
		m.mu.Lock()
		defer m.mu.Unlock()
		for k, n := range map[string]int{"table": r.RemovedTables, "chain": r.RemovedChains, "rule": r.RemovedRules, "ipset": r.RemovedIPSets} {
			if d := n - m.leftoversSeen[k]; d > 0 {
				m.leftovers.WithLabelValues(k).Add(float64(d))
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
	m.endpoints.Reset()
	for _, kind := range []string{"workload", "host"} {
		for _, st := range []string{"up", "down", "error"} {
			m.endpoints.WithLabelValues(kind, st)
		}
	}
}

// promFactory makes nftep_ metrics and registers them.
type promFactory struct{ reg prometheus.Registerer }

func (f promFactory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f promFactory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f promFactory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f promFactory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f promFactory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}
