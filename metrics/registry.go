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
// It is nftep's own rather than Prometheus's Go client: linking that
// client (its default collectors, expfmt, procfs, protobuf types) and
// net/http made every nftep process, `nftep apply` included, 5 MB larger
// and 2.4 MB heavier in resident memory at start (`nftep version`: 10.5
// against 8.1 MB), and a one-shot apply's peak memory is one of nftep's
// targets (docs/performance.md). What nftep needs is small:
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
	series map[string]*series // by the label values joined with "\xff"
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
	recent ring     // summary: the observations within maxAge
	now    func() time.Time
	// fixedQuantiles, when set, are a summary's quantiles as computed
	// elsewhere (the runtime's GC pauses), in the family's order.
	fixedQuantiles []float64
}

// ring holds a summary's recent observations, oldest first, at most
// maxRecent of them: a fixed buffer, so that an observation costs the
// same however full it is.
type ring struct {
	at    []int64 // Unix nanoseconds
	v     []float64
	start int // index of the oldest
	n     int
}

// maxRecent bounds a summary's window: its quantiles cover the
// observations of the last maxAge, or the last maxRecent of them when
// there were more (an apply every 150 ms for ten minutes fills it).
const maxRecent = 4096

func (r *ring) push(at int64, v float64) {
	if r.at == nil {
		r.at, r.v = make([]int64, maxRecent), make([]float64, maxRecent)
	}
	i := (r.start + r.n) % maxRecent
	if r.n == maxRecent {
		r.start = (r.start + 1) % maxRecent
	} else {
		r.n++
	}
	r.at[i], r.v[i] = at, v
}

// expire drops the observations made before the time oldest.
func (r *ring) expire(oldest int64) {
	for r.n > 0 && r.at[r.start] < oldest {
		r.start = (r.start + 1) % maxRecent
		r.n--
	}
}

// sorted returns the values, sorted.
func (r *ring) sorted() []float64 {
	vs := make([]float64, r.n)
	for i := range vs {
		vs[i] = r.v[(r.start+i)%maxRecent]
	}
	slices.Sort(vs)
	return vs
}

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
		s.recent.push(now.UnixNano(), v)
	}
}

// expire drops a summary's observations older than its window.
func (s *series) expire(now time.Time) {
	s.recent.expire(now.Add(-s.f.maxAge).UnixNano())
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

// write holds the family's lock while it writes: w is a buffer, never a
// connection.
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
				vs := s.recent.sorted()
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
