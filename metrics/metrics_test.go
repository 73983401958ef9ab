package metrics

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/routes"
)

// scraped is a prometheus.Gatherer of what a scraper reads from a
// Registry: its text, parsed by Prometheus's own parser, so that the tests
// compare and lint the exposition itself.
type scraped struct{ r *Registry }

func (s scraped) Gather() ([]*dto.MetricFamily, error) {
	var b bytes.Buffer
	if err := s.r.WriteText(&b); err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	byName, err := p.TextToMetricFamilies(&b)
	if err != nil {
		return nil, err
	}
	fams := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		fams = append(fams, f)
	}
	// Sorted, as a Prometheus registry gathers them.
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return fams, nil
}

// feed tells m a short history: a static apply, a full one with a resync
// that repaired drift, a refused transaction, route writes, a sysctl
// failure, an nftables event and the state.
func feed(m *Metrics) {
	at := time.Unix(1700000000, 500000000)
	m.Message("ConfigUpdate")
	m.Message("WorkloadEndpointUpdate")
	m.Message("WorkloadEndpointUpdate")
	m.Applied(&dataplane.ApplyReport{Time: at.Add(-time.Second), Duration: 3 * time.Millisecond, Tables: []dataplane.TableReport{
		{Family: "inet", Duration: 2 * time.Millisecond, Messages: 40, Operations: 30},
		{Family: "arp", Duration: time.Millisecond, Messages: 4, Operations: 3},
	}})
	m.Applied(&dataplane.ApplyReport{Time: at, Duration: 5 * time.Millisecond, InSync: true, Updates: 2, Tables: []dataplane.TableReport{
		{Family: "inet", Duration: 4 * time.Millisecond, Messages: 12, Operations: 9, Resync: true, Read: true,
			Drift: nft.Drift{ChainsMissing: 1, ElementsExtra: 2}},
		{Family: "arp", Duration: time.Millisecond, Resync: true},
	}})
	err := &nft.Error{Table: "inet nftep", Summary: "test", Err: syscall.EINVAL}
	m.Applied(&dataplane.ApplyReport{Time: at.Add(time.Second), InSync: true, Updates: 1, Err: err, Failure: dataplane.ClassifyFailure(err),
		Tables: []dataplane.TableReport{{Family: "inet", Duration: time.Millisecond, Messages: 3}}})
	m.RoutesWritten(routes.Stats{Programmed: 3, Removed: 1, Repaired: 1})
	m.SysctlsFailed(2)
	m.Unhandled("field 31")
	m.Unhandled("field 31")
	m.TableEvent()
	m.State(&dataplane.StateReport{
		Endpoints: map[dataplane.EndpointClass]int{{Kind: "workload", Status: "up"}: 2, {Kind: "host", Status: "error"}: 1},
		IPSets:    3, IPSetMembers: 12,
	})
}

func TestMetrics(t *testing.T) {
	m := New(Options{Felix: true, NoRuntime: true})
	feed(m)
	want := `
# HELP nftep_endpoints Endpoints by kind (workload, host) and status (up, down, error).
# TYPE nftep_endpoints gauge
nftep_endpoints{kind="host",status="down"} 0
nftep_endpoints{kind="host",status="error"} 1
nftep_endpoints{kind="host",status="up"} 0
nftep_endpoints{kind="workload",status="down"} 0
nftep_endpoints{kind="workload",status="error"} 0
nftep_endpoints{kind="workload",status="up"} 2
# HELP nftep_felix_messages_unhandled_total Felix messages that no manager of nftep takes, by type ("field N" for a payload nftep's schema does not declare); each type is also logged once.
# TYPE nftep_felix_messages_unhandled_total counter
nftep_felix_messages_unhandled_total{type="field 31"} 2
# HELP nftep_ipset_members Members of the Felix IP sets in the table (both families).
# TYPE nftep_ipset_members gauge
nftep_ipset_members 12
# HELP nftep_ipsets Felix IP sets in the table.
# TYPE nftep_ipsets gauge
nftep_ipsets 3
# HELP nftep_last_apply_success_timestamp_seconds When an apply last succeeded, in seconds since the Unix epoch.
# TYPE nftep_last_apply_success_timestamp_seconds gauge
nftep_last_apply_success_timestamp_seconds 1.7000000005e+09
# HELP nftep_nftables_events_total Notifications of nftables events on nftep's tables (events arriving together count once).
# TYPE nftep_nftables_events_total counter
nftep_nftables_events_total 1
# HELP nftep_resync_reads_total Resyncs that read the table back from the kernel, by table (a resync skips the read when nobody committed since our last commit).
# TYPE nftep_resync_reads_total counter
nftep_resync_reads_total{table="arp"} 0
nftep_resync_reads_total{table="inet"} 1
# HELP nftep_resync_repairs_total Differences a resync found and repaired, by object (table, chain, set, element) and drift (missing, differ, extra).
# TYPE nftep_resync_repairs_total counter
nftep_resync_repairs_total{drift="extra",object="element"} 2
nftep_resync_repairs_total{drift="missing",object="chain"} 1
# HELP nftep_resyncs_total Resyncs of a table (periodic, after nftables events, after a failure), by table.
# TYPE nftep_resyncs_total counter
nftep_resyncs_total{table="arp"} 1
nftep_resyncs_total{table="inet"} 1
# HELP nftep_routes_programmed_total Routes added or replaced.
# TYPE nftep_routes_programmed_total counter
nftep_routes_programmed_total 3
# HELP nftep_routes_removed_total Routes deleted.
# TYPE nftep_routes_removed_total counter
nftep_routes_removed_total 1
# HELP nftep_routes_repaired_total Route writes (of routes_programmed_total and routes_removed_total) that repaired drift a route resync found.
# TYPE nftep_routes_repaired_total counter
nftep_routes_repaired_total 1
# HELP nftep_sysctl_write_failures_total Failed attempts to write an interface's sysctls (one per interface per attempt; retried).
# TYPE nftep_sysctl_write_failures_total counter
nftep_sysctl_write_failures_total 2
# HELP nftep_transactions_failed_total Applies that failed, by reason: refused (the kernel refused the transaction, nothing changed), state_unknown (the outcome is unknown; the retry resyncs), invalid (the desired state failed validation, nothing was sent).
# TYPE nftep_transactions_failed_total counter
nftep_transactions_failed_total{reason="invalid"} 0
nftep_transactions_failed_total{reason="refused"} 1
nftep_transactions_failed_total{reason="state_unknown"} 0
# HELP felix_int_dataplane_failures Number of times dataplane updates failed and will be retried.
# TYPE felix_int_dataplane_failures counter
felix_int_dataplane_failures 1
# HELP felix_int_dataplane_messages Number dataplane messages by type.
# TYPE felix_int_dataplane_messages counter
felix_int_dataplane_messages{type="ConfigUpdate"} 1
felix_int_dataplane_messages{type="WorkloadEndpointUpdate"} 2
`
	names := []string{"nftep_endpoints", "nftep_felix_messages_unhandled_total", "nftep_ipset_members", "nftep_ipsets", "nftep_last_apply_success_timestamp_seconds",
		"nftep_nftables_events_total", "nftep_resync_reads_total", "nftep_resync_repairs_total", "nftep_resyncs_total",
		"nftep_routes_programmed_total", "nftep_routes_removed_total", "nftep_routes_repaired_total",
		"nftep_sysctl_write_failures_total", "nftep_transactions_failed_total",
		"felix_int_dataplane_failures", "felix_int_dataplane_messages"}
	if err := testutil.GatherAndCompare(scraped{m.Registry()}, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// Histograms and summaries: how many observations, and their sums.
	for _, c := range []struct {
		name  string
		count int
	}{
		{"nftep_apply_duration_seconds", 2}, // one series a table
		{"nftep_transaction_messages", 2},
		{"nftep_apply_updates", 1},
		{"felix_int_dataplane_apply_time_seconds", 1},
		{"felix_int_dataplane_msg_batch_size", 1},
	} {
		if n, err := testutil.GatherAndCount(scraped{m.Registry()}, c.name); err != nil || n != c.count {
			t.Errorf("%s: %d series (%v), want %d", c.name, n, err, c.count)
		}
	}
	text := gatherText(t, m)
	for _, line := range []string{
		`nftep_apply_duration_seconds_count{table="inet"} 3`,
		`nftep_apply_duration_seconds_count{table="arp"} 2`,
		`nftep_apply_duration_seconds_sum{table="inet"} 0.007`,
		`nftep_transaction_messages_sum{table="inet"} 55`,
		`nftep_transaction_messages_count{table="arp"} 1`, // an empty transaction is not observed
		`nftep_apply_updates_sum 3`,
		`felix_int_dataplane_apply_time_seconds_count 3`,
		`felix_int_dataplane_msg_batch_size_sum 3`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, text)
		}
	}
}

// TestMetricsWithoutFelix: the felix_ names only in Felix mode, and the Go
// runtime collectors by default.
func TestMetricsWithoutFelix(t *testing.T) {
	m := New(Options{})
	feed(m)
	text := gatherText(t, m)
	if regexp.MustCompile(`(?m)^(# (HELP|TYPE) )?felix_`).MatchString(text) {
		t.Error("felix_ metrics without Options.Felix")
	}
	for _, name := range []string{"go_goroutines", "go_threads", `go_info{version="` + runtime.Version() + `"}`,
		`go_gc_duration_seconds{quantile="0.5"}`, "go_gc_duration_seconds_count", "go_gc_gogc_percent", "go_gc_gomemlimit_bytes",
		"go_sched_gomaxprocs_threads", "go_memstats_alloc_bytes", "go_memstats_alloc_bytes_total", "go_memstats_heap_inuse_bytes",
		"go_memstats_stack_inuse_bytes", "go_memstats_gc_sys_bytes", "go_memstats_next_gc_bytes", "go_memstats_last_gc_time_seconds",
		"process_cpu_seconds_total", "process_open_fds", "process_max_fds", "process_resident_memory_bytes",
		"process_virtual_memory_bytes", "process_virtual_memory_max_bytes", "process_start_time_seconds"} {
		if !strings.Contains(text, "\n"+name+" ") {
			t.Errorf("no %s", name)
		}
	}
}

// TestMetricsLint runs Prometheus's own linter (promlint) over every
// metric: nftep's follow the naming conventions; Felix's names are kept as
// Felix has them (counters without _total), the linter's only complaints.
func TestMetricsLint(t *testing.T) {
	m := New(Options{Felix: true})
	feed(m)
	problems, err := testutil.GatherAndLint(scraped{m.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "felix_int_dataplane_") && strings.Contains(p.Text, "_total") {
			continue
		}
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// serve serves reg and health on a loopback port until the test ends and
// returns its base URL.
func serve(t *testing.T, reg *Registry, health *dataplane.Health) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	at, err := Serve(ctx, "127.0.0.1:0", reg, health, nil)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + at
}

func gatherText(t *testing.T, m *Metrics) string {
	t.Helper()
	code, body := get(t, serve(t, m.Registry(), nil)+PathMetrics)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	return body
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestHealthEndpoints: /readyz is 503 until a full apply, and again while
// transactions fail; /livez is 503 once the heartbeat is older than the
// limit.
func TestHealthEndpoints(t *testing.T) {
	h := dataplane.NewHealth(200 * time.Millisecond)
	url := serve(t, nil, h)

	if code, body := get(t, url+PathReady); code != http.StatusServiceUnavailable || !strings.Contains(body, "no full apply yet") {
		t.Errorf("readyz at start: %d %q", code, body)
	}
	h.Applied(&dataplane.ApplyReport{InSync: true})
	if code, body := get(t, url+PathReady); code != http.StatusOK || body != "ok\n" {
		t.Errorf("readyz after a full apply: %d %q", code, body)
	}
	h.Applied(&dataplane.ApplyReport{InSync: true, Err: syscall.ENOBUFS, Failure: dataplane.ClassifyFailure(syscall.ENOBUFS)})
	if code, body := get(t, url+PathReady); code != http.StatusServiceUnavailable || !strings.Contains(body, "state_unknown") {
		t.Errorf("readyz after a failed transaction: %d %q", code, body)
	}

	h.Heartbeat(time.Now())
	if code, _ := get(t, url+PathLive); code != http.StatusOK {
		t.Errorf("livez after a heartbeat: %d", code)
	}
	h.Heartbeat(time.Now().Add(-time.Second))
	if code, body := get(t, url+PathLive); code != http.StatusServiceUnavailable || !strings.Contains(body, "stuck") {
		t.Errorf("livez 1 s after the last heartbeat (limit 200 ms): %d %q", code, body)
	}
	if code, _ := get(t, url+PathMetrics); code != http.StatusNotFound {
		t.Errorf("metrics served without a registry: %d", code)
	}
}

func TestListenAddress(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{"", "", ""},
		{"9095", "127.0.0.1:9095", ""},
		{":9095", "127.0.0.1:9095", ""},
		{"0.0.0.0:9095", "0.0.0.0:9095", ""},
		{"[::]:9095", "[::]:9095", ""},
		{"10.0.0.5:9095", "10.0.0.5:9095", ""},
		{"localhost:x", "", "bad port"},
		{"1.2.3.4", "", "bad port"},
		{"0", "", "bad port"},
	} {
		got, err := ListenAddress(c.in)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("ListenAddress(%q) = %q, %v; want %q, error containing %q", c.in, got, err, c.want, c.err)
		}
	}
}
