package metrics

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Registry holds metric families and writes them in Prometheus's text
// exposition format (version 0.0.4), which every Prometheus-compatible
// scraper reads.
//
// It is nftep's own rather than client_golang's: linking client_golang
// (with its default collectors, expfmt, procfs and protobuf types) costs
// every nftep process, `nftep apply` included, about 3 MB of resident
// memory it touches at start, and a one-shot apply's peak memory is one of
// nftep's targets (docs/performance.md). What nftep needs is small:
// counters, gauges, histograms and summaries with labels, and the Go
// runtime's and the process's standard metrics under their usual names
// (runtime.go). The tests check the output with Prometheus's own parser and
// linter.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
	// runtime adds the go_* and process_* families at each scrape.
	runtime bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{families: map[string]*family{}} }

type kind uint8

const (
	kindCounter kind = iota
	kindGauge
	kindHistogram
	kindSummary
)

func (k kind) String() string {
	return [...]string{"counter", "gauge", "histogram", "summary"}[k]
}

// family is one metric name with its help, type and label names, and a
// series for each combination of label values seen.
type family struct {
	name, help string
	kind       kind
	labels     []string
	buckets    []float64 // histogram: upper bounds, ascending
	quantiles  []float64 // summary
	maxAge     time.Duration

	mu     sync.Mutex
	series map[string]*series // by labelKey of the values
}

// series is one labelled time series of a family. Only the fields of its
// family's kind are used.
type series struct {
	f      *family
	values []string

	value  float64  // counter, gauge
	counts []uint64 // histogram: per bucket, not cumulative
	sum    float64  // histogram, summary
	count  uint64   // histogram, summary
	recent []sample // summary: observations within maxAge, oldest first
	now    func() time.Time
	// fixedQuantiles, when set, are a summary's quantiles as computed
	// elsewhere (the runtime's GC pauses), in the family's order.
	fixedQuantiles []float64
}

type sample struct {
	at time.Time
	v  float64
}

// maxRecent bounds a summary's window: at nftep's rates (an apply at most
// every few milliseconds under churn) ten minutes can hold more
// observations than a quantile needs.
const maxRecent = 4096

func (r *Registry) add(f *family) *family {
	f.series = map[string]*series{}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.families[f.name]; dup {
		panic("metrics: " + f.name + " registered twice")
	}
	r.families[f.name] = f
	return f
}

// counter, gauge, histogram and summary register a family. A family
// without label names has one series, with().
func (r *Registry) counter(name, help string, labels ...string) *family {
	return r.add(&family{name: name, help: help, kind: kindCounter, labels: labels})
}

func (r *Registry) gauge(name, help string, labels ...string) *family {
	return r.add(&family{name: name, help: help, kind: kindGauge, labels: labels})
}

func (r *Registry) histogram(name, help string, buckets []float64, labels ...string) *family {
	return r.add(&family{name: name, help: help, kind: kindHistogram, labels: labels, buckets: buckets})
}

// summary's quantiles cover the observations of the last maxAge.
func (r *Registry) summary(name, help string, quantiles []float64, maxAge time.Duration, labels ...string) *family {
	return r.add(&family{name: name, help: help, kind: kindSummary, labels: labels, quantiles: quantiles, maxAge: maxAge})
}

// with returns the series of these label values (one per label name),
// creating it at zero.
func (f *family) with(values ...string) *series {
	if len(values) != len(f.labels) {
		panic("metrics: " + f.name + ": " + strconv.Itoa(len(values)) + " label values for " + strconv.Itoa(len(f.labels)) + " labels")
	}
	key := strings.Join(values, "\xff")
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series[key]
	if s == nil {
		s = &series{f: f, values: slices.Clone(values), now: time.Now}
		if f.kind == kindHistogram {
			s.counts = make([]uint64, len(f.buckets))
		}
		f.series[key] = s
	}
	return s
}

// reset drops every series.
func (f *family) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.series)
}

// inc adds 1 to a counter or gauge.
func (s *series) inc() { s.add(1) }

// add adds v to a counter (v ≥ 0) or gauge.
func (s *series) add(v float64) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.value += v
}

// set sets a gauge.
func (s *series) set(v float64) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.value = v
}

// observe adds an observation to a histogram or summary.
func (s *series) observe(v float64) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.sum += v
	s.count++
	switch s.f.kind {
	case kindHistogram:
		if i, _ := slices.BinarySearch(s.f.buckets, v); i < len(s.counts) {
			s.counts[i]++
		}
	case kindSummary:
		now := s.now()
		s.expire(now)
		if len(s.recent) == maxRecent {
			s.recent = slices.Delete(s.recent, 0, 1)
		}
		s.recent = append(s.recent, sample{now, v})
	}
}

// expire drops a summary's observations older than its window.
func (s *series) expire(now time.Time) {
	i := 0
	for i < len(s.recent) && now.Sub(s.recent[i].at) > s.f.maxAge {
		i++
	}
	s.recent = slices.Delete(s.recent, 0, i)
}

// WriteText writes every family, sorted by name, each series sorted by
// its label values, in the text exposition format.
func (r *Registry) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	r.mu.Lock()
	fams := make([]*family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.Unlock()
	if r.runtime {
		fams = append(fams, runtimeFamilies()...)
	}
	slices.SortFunc(fams, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	for _, f := range fams {
		f.write(bw)
	}
	return bw.Flush()
}

func (f *family) write(w *bufio.Writer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.series) == 0 {
		return
	}
	w.WriteString("# HELP " + f.name + " " + escapeHelp(f.help) + "\n")
	w.WriteString("# TYPE " + f.name + " " + f.kind.String() + "\n")
	all := make([]*series, 0, len(f.series))
	for _, s := range f.series {
		all = append(all, s)
	}
	// Label pairs are written sorted by name, as Prometheus's own clients
	// do; series are sorted by their values in that order.
	order := make([]int, len(f.labels))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(f.labels[a], f.labels[b]) })
	slices.SortFunc(all, func(a, b *series) int {
		for _, i := range order {
			if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	for _, s := range all {
		labels := s.labelPairs(order)
		switch f.kind {
		case kindCounter, kindGauge:
			writeSample(w, f.name, labels, "", "", s.value)
		case kindHistogram:
			var cum uint64
			for i, le := range f.buckets {
				cum += s.counts[i]
				writeSample(w, f.name+"_bucket", labels, "le", formatFloat(le), float64(cum))
			}
			writeSample(w, f.name+"_bucket", labels, "le", "+Inf", float64(s.count))
			writeSample(w, f.name+"_sum", labels, "", "", s.sum)
			writeSample(w, f.name+"_count", labels, "", "", float64(s.count))
		case kindSummary:
			qs := s.fixedQuantiles
			if qs == nil {
				s.expire(s.now())
				vs := make([]float64, len(s.recent))
				for i, o := range s.recent {
					vs[i] = o.v
				}
				slices.Sort(vs)
				for _, q := range f.quantiles {
					qs = append(qs, quantile(vs, q))
				}
			}
			for i, q := range f.quantiles {
				writeSample(w, f.name, labels, "quantile", formatFloat(q), qs[i])
			}
			writeSample(w, f.name+"_sum", labels, "", "", s.sum)
			writeSample(w, f.name+"_count", labels, "", "", float64(s.count))
		}
	}
}

// quantile returns the q-quantile of sorted values (the nearest rank), NaN
// for none, as Prometheus's clients report an empty summary.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// labelPairs renders the series' labels, name order, without braces:
// `a="1",b="2"`.
func (s *series) labelPairs(order []int) string {
	var b strings.Builder
	for n, i := range order {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s.f.labels[i])
		b.WriteString(`="`)
		b.WriteString(escapeLabel(s.values[i]))
		b.WriteByte('"')
	}
	return b.String()
}

// writeSample writes `name{labels,extra="value"} v`.
func writeSample(w *bufio.Writer, name, labels, extra, extraValue string, v float64) {
	w.WriteString(name)
	if labels != "" || extra != "" {
		w.WriteByte('{')
		w.WriteString(labels)
		if extra != "" {
			if labels != "" {
				w.WriteByte(',')
			}
			w.WriteString(extra + `="` + extraValue + `"`)
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

// formatFloat writes a sample value as the exposition format spells it.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

func escapeHelp(s string) string  { return helpEscaper.Replace(s) }
func escapeLabel(s string) string { return labelEscaper.Replace(s) }
