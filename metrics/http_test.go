package metrics

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
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
		{"post with a body", "POST /metrics HTTP/1.1\r\nContent-Length: 65536\r\n\r\n" + strings.Repeat("b", 65536),
			[]string{"HTTP/1.1 405 Method Not Allowed"}, "405 method not allowed\n"},
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

// TestServerConnectionCap: beyond maxConns open connections a new one is
// closed at once, not queued behind idle ones; once they go, requests are
// served again.
func TestServerConnectionCap(t *testing.T) {
	base := serve(t, nil, dataplane.NewHealth(time.Minute))
	addr := strings.TrimPrefix(base, "http://")
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range maxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	time.Sleep(100 * time.Millisecond) // all accepted
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(c, "GET /livez HTTP/1.1\r\n\r\n")
	// Closed with the request unread: an end of file or a reset, and
	// no answer.
	if b, err := io.ReadAll(c); len(b) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("a connection beyond the cap: read %q, %v; want it closed at once", b, err)
	}
	c.Close()
	for _, c := range idle {
		c.Close()
	}
	idle = nil
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := rawRequest(t, base, "GET /livez HTTP/1.1\r\n\r\n")
		if strings.HasPrefix(got, "HTTP/1.1 200 OK") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer after the idle connections closed: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
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
