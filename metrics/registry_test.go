package metrics

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestRegistryText: label order and escaping, histogram buckets
// (cumulative, +Inf), summary quantiles over the window and NaN when
// empty, series order, families without series left out.
func TestRegistryText(t *testing.T) {
	reg := NewRegistry()
	c := reg.counter("a_total", "Help with \\ and\nnewline.", "zone", "app")
	c.with("z1", `quote " back \ nl `+"\n").add(2)
	c.with("a0", "x").inc()
	h := reg.histogram("b_seconds", "B.", []float64{0.1, 1})
	for _, v := range []float64{0.05, 0.1, 0.5, 7} {
		h.with().observe(v)
	}
	now := time.Unix(1000, 0)
	s := reg.summary("c_seconds", "C.", []float64{0.5, 0.9}, time.Minute)
	cs := s.with()
	cnow := now
	cs.now = func() time.Time { return cnow }
	for i := range 10 {
		cs.observe(float64(i + 1))
	}
	reg.gauge("d", "D.", "k") // no series
	e := reg.summary("e", "E.", []float64{0.5}, time.Minute)
	es := e.with()
	es.now = func() time.Time { return now }
	es.observe(3)
	now = now.Add(2 * time.Minute) // the observation leaves the window

	var b strings.Builder
	if err := reg.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP a_total Help with \\ and\nnewline.
# TYPE a_total counter
a_total{app="quote \" back \\ nl \n",zone="z1"} 2
a_total{app="x",zone="a0"} 1
# HELP b_seconds B.
# TYPE b_seconds histogram
b_seconds_bucket{le="0.1"} 2
b_seconds_bucket{le="1"} 3
b_seconds_bucket{le="+Inf"} 4
b_seconds_sum 7.65
b_seconds_count 4
# HELP c_seconds C.
# TYPE c_seconds summary
c_seconds{quantile="0.5"} 5
c_seconds{quantile="0.9"} 9
c_seconds_sum 55
c_seconds_count 10
# HELP e E.
# TYPE e summary
e{quantile="0.5"} NaN
e_sum 3
e_count 1
`
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	if q := quantile([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9); q != 9 {
		t.Errorf("0.9-quantile of 1..10 = %v, want 9", q)
	}
	if q := quantile(nil, 0.5); !math.IsNaN(q) {
		t.Errorf("quantile of nothing = %v, want NaN", q)
	}
}

// TestSummaryRing: a summary keeps the last maxRecent observations of its
// window, oldest dropped first, and drops those that leave the window.
func TestSummaryRing(t *testing.T) {
	var r ring
	for i := range maxRecent + 10 {
		r.push(int64(i), float64(i))
	}
	vs := r.sorted()
	if len(vs) != maxRecent || vs[0] != 10 || vs[len(vs)-1] != maxRecent+9 {
		t.Fatalf("after %d pushes: %d values from %v to %v, want %d from 10 to %d", maxRecent+10, len(vs), vs[0], vs[len(vs)-1], maxRecent, maxRecent+9)
	}
	r.expire(maxRecent + 5)
	if vs := r.sorted(); len(vs) != 5 || vs[0] != maxRecent+5 {
		t.Fatalf("after expiring up to %d: %v", maxRecent+5, vs)
	}
	r.push(maxRecent+10, 1)
	if vs := r.sorted(); len(vs) != 6 || vs[0] != 1 {
		t.Fatalf("a push after expiry: %v", vs)
	}
	r.expire(1 << 62)
	if vs := r.sorted(); len(vs) != 0 {
		t.Fatalf("all expired: %v", vs)
	}
}
