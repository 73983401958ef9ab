package metrics

import (
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nftep/nftep/dataplane"
)

// rawRequest writes req to the server at base (its URL) and returns the
// whole response.
func rawRequest(t *testing.T, base, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestServerRequests: what the responder answers to each kind of request,
// read from the wire.
func TestServerRequests(t *testing.T) {
	h := dataplane.NewHealth(time.Minute)
	h.Applied(&dataplane.ApplyReport{InSync: true})
	reg := NewRegistry()
	reg.gauge("x_up", "Up.").with().set(1)
	base := serve(t, reg, h)
	for _, c := range []struct {
		name, req string
		wantHead  []string // lines the head must contain
		wantBody  string   // exact body
	}{
		{"metrics", "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
			[]string{"HTTP/1.1 200 OK", "Content-Type: " + textFormat, "Content-Length: 41", "Connection: close"},
			"# HELP x_up Up.\n# TYPE x_up gauge\nx_up 1\n"},
		{"query ignored", "GET /readyz?verbose=1 HTTP/1.0\r\n\r\n", []string{"HTTP/1.1 200 OK"}, "ok\n"},
		{"head", "HEAD /livez HTTP/1.1\r\n\r\n", []string{"HTTP/1.1 200 OK", "Content-Length: 3"}, ""},
		{"unknown path", "GET /debug/pprof HTTP/1.1\r\n\r\n", []string{"HTTP/1.1 404 Not Found"}, "404 page not found\n"},
		{"post", "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", []string{"HTTP/1.1 405 Method Not Allowed", "Allow: GET, HEAD"}, "405 method not allowed\n"},
		{"not http", "hello\r\n\r\n", []string{"HTTP/1.1 400 Bad Request"}, "400 bad request\n"},
		{"cut short", "GET /metrics HTTP/1.1\r\nHost: x\r\n", []string{"HTTP/1.1 400 Bad Request"}, "400 bad request\n"},
		{"head too large", "GET /metrics HTTP/1.1\r\nX: " + strings.Repeat("a", maxRequestHead) + "\r\n\r\n",
			[]string{"HTTP/1.1 431 Request Header Fields Too Large"}, "431 request header fields too large\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "cut short" {
				// The client closes its side without the empty line.
				conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				io.WriteString(conn, c.req)
				conn.(*net.TCPConn).CloseWrite()
				b, _ := io.ReadAll(conn)
				checkResponse(t, string(b), c.wantHead, c.wantBody)
				return
			}
			checkResponse(t, rawRequest(t, base, c.req), c.wantHead, c.wantBody)
		})
	}
}

func checkResponse(t *testing.T, got string, head []string, body string) {
	t.Helper()
	h, b, ok := strings.Cut(got, "\r\n\r\n")
	if !ok {
		t.Fatalf("no end of head in %q", got)
	}
	lines := strings.Split(h, "\r\n")
	for _, want := range head {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("head lacks %q:\n%s", want, h)
		}
	}
	if b != body {
		t.Errorf("body %q, want %q", b, body)
	}
}

// TestServerWithHTTPClient: Go's own HTTP client reads the answers (and
// Prometheus scrapes with it).
func TestServerWithHTTPClient(t *testing.T) {
	reg := NewRegistry()
	reg.counter("x_total", "X.").with().inc()
	base := serve(t, reg, nil)
	for range 3 { // one connection each; none left behind
		resp, err := http.Get(base + PathMetrics)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "\nx_total 1\n") || resp.Header.Get("Content-Type") != textFormat {
			t.Fatalf("GET %s: %d %q %q", PathMetrics, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	}
	if code, _ := get(t, base+PathLive); code != http.StatusNotFound {
		t.Errorf("livez served without health: %d", code)
	}
}

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
