package metrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nftep/nftep/dataplane"
)

// Paths served.
const (
	PathMetrics = "/metrics"
	PathLive    = "/livez"
	PathReady   = "/readyz"
)

// server answers GET and HEAD of /metrics (nil registry: not served) and
// of /livez and /readyz (nil health: not served): 200 "ok", or 503 with
// the reason.
//
// It is a deliberately small HTTP/1.1 responder rather than net/http:
// three fixed paths, one request per connection, no request body, a
// bounded request head, deadlines, a cap on connections. Scrapers and
// kubelet's probes need no more, and net/http (with crypto/tls and x509,
// which a metrics listener never uses) would be linked into every nftep
// process, `nftep apply` included (see Registry for what that cost).
type server struct {
	reg    *Registry
	health *dataplane.Health
}

// Limits of a connection: the whole request head, the time to read it,
// the time to write the answer, and how many connections are served at
// once. A connection beyond that is closed at once rather than queued, so
// that a few idle connections cannot hold kubelet's probes back; each
// served one costs a goroutine and a 4 KiB buffer.
const (
	maxRequestHead = 8 << 10
	readDeadline   = 3 * time.Second
	writeDeadline  = 10 * time.Second
	maxConns       = 256
)

// response is what a request gets.
type response struct {
	status      int
	contentType string
	body        []byte
	allow       bool // 405: say which methods are allowed
	unread      bool // the request was not read to its end
}

// textFormat is the content type of Prometheus's text exposition format,
// which every scraper accepts.
const textFormat = "text/plain; version=0.0.4; charset=utf-8"

// answer returns the response to method and target (the request line's
// second field).
func (s *server) answer(method, target string) response {
	path, _, _ := strings.Cut(target, "?")
	var get func() response
	switch {
	case path == PathMetrics && s.reg != nil:
		get = func() response {
			var b bytes.Buffer
			s.reg.WriteText(&b)
			return response{status: 200, contentType: textFormat, body: b.Bytes()}
		}
	case path == PathLive && s.health != nil:
		get = func() response { return healthResponse(s.health.Live(time.Now())) }
	case path == PathReady && s.health != nil:
		get = func() response { return healthResponse(s.health.Ready()) }
	default:
		return plain(404, "404 page not found")
	}
	if method != "GET" && method != "HEAD" {
		r := plain(405, "405 method not allowed")
		r.allow = true
		return r
	}
	return get()
}

func healthResponse(err error) response {
	if err != nil {
		return plain(503, err.Error())
	}
	return plain(200, "ok")
}

func plain(status int, text string) response {
	return response{status: status, contentType: "text/plain; charset=utf-8", body: []byte(text + "\n")}
}

var statusText = map[int]string{200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}

// serveConn reads one request from c, answers it and closes c.
func (s *server) serveConn(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(readDeadline))
	method, target, r := readRequestHead(c)
	if r.status == 0 {
		unread := r.unread
		r = s.answer(method, target)
		r.unread = unread
	}
	c.SetWriteDeadline(time.Now().Add(writeDeadline))
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", r.status, statusText[r.status])
	fmt.Fprintf(&b, "Content-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n", r.contentType, len(r.body))
	if r.allow {
		b.WriteString("Allow: GET, HEAD\r\n")
	}
	b.WriteString("\r\n")
	if method != "HEAD" {
		b.Write(r.body)
	}
	c.Write(b.Bytes())
	if r.unread {
		// The request was not read to its end (a bad head, a body):
		// closing now, with its rest unread, would reset the connection
		// and could lose the answer. Half-close, and discard what still
		// comes for a moment.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.CloseWrite()
			c.SetReadDeadline(time.Now().Add(lingerTime))
			io.Copy(io.Discard, io.LimitReader(c, maxRequestHead))
		}
	}
}

// lingerTime is how long a connection whose request was not read to its
// end is drained before it is closed.
const lingerTime = 500 * time.Millisecond

// readRequestHead reads the request line and the header lines up to the
// empty line, at most maxRequestHead bytes, and returns the method and
// target; a request it cannot take gets a response (r.status set).
func readRequestHead(c io.Reader) (method, target string, r response) {
	lr := &io.LimitedReader{R: c, N: maxRequestHead}
	br := bufio.NewReader(lr)
	bad := func() response {
		r := plain(400, "400 bad request")
		if lr.N == 0 {
			r = plain(431, "431 request header fields too large")
		}
		r.unread = true
		return r
	}
	first, err := br.ReadString('\n')
	if err != nil {
		return "", "", bad()
	}
	f := strings.Fields(first)
	if len(f) != 3 || !strings.HasPrefix(f[2], "HTTP/1.") || !strings.HasPrefix(f[1], "/") {
		return "", "", bad()
	}
	// A request with a body (none of ours takes one) leaves it unread.
	r.unread = f[0] != "GET" && f[0] != "HEAD"
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return "", "", bad()
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			return f[0], f[1], r
		}
		name, _, _ := strings.Cut(h, ":")
		if strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Transfer-Encoding") {
			r.unread = true
		}
	}
}

// ListenAddress returns the address to listen on for a configured value:
// empty means off (""); a bare port ("9095") or an address without a host
// (":9095") means loopback (127.0.0.1), so that nothing is exposed beyond
// the node unless a host is named ("0.0.0.0:9095", "[::]:9095",
// "10.0.0.5:9095").
func ListenAddress(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	in := s
	if !strings.Contains(s, ":") {
		s = ":" + s
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: want PORT or HOST:PORT: %w", in, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("metrics address %q: want PORT or HOST:PORT: bad port %q", in, port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Serve listens on addr (see ListenAddress) and serves reg's metrics (nil:
// none) and health (nil: none) until ctx is done. It returns once
// listening, with the address it listens on; a listener that cannot open
// is an error (an operator who asked for metrics wants to know).
func Serve(ctx context.Context, addr string, reg *Registry, health *dataplane.Health, log *slog.Logger) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics and health listener: %w", err)
	}
	srv := &server{reg: reg, health: health}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		var wg sync.WaitGroup
		defer wg.Wait()
		slots := make(chan struct{}, maxConns)
		var backoff time.Duration
		for {
			c, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
					return
				}
				// Out of file descriptors, say: the listener stays and
				// tries again, backing off as net/http does; logged
				// once per run of failures.
				if backoff == 0 {
					backoff = 5 * time.Millisecond
					if log != nil {
						log.Warn("metrics and health listener cannot accept; retrying", "error", err)
					}
				} else {
					backoff = min(2*backoff, time.Second)
				}
				time.Sleep(backoff)
				continue
			}
			backoff = 0
			select {
			case slots <- struct{}{}:
			default:
				c.Close() // at the cap: refused at once, not queued
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				srv.serveConn(c)
			})
		}
	}()
	return ln.Addr().String(), nil
}

// Config says what Start serves.
type Config struct {
	// Addr is the listen address as configured (see ListenAddress);
	// empty serves nothing.
	Addr string
	// HealthLimit is how long the loop may stay busy without a heartbeat
	// before /livez fails (dataplane.DefaultHealthLimit when not
	// positive); an idle loop waiting for work stays live.
	HealthLimit time.Duration
	// Felix adds Felix's dataplane metric names (driver mode).
	Felix bool
	// Logger receives the listener's log; nil discards.
	Logger *slog.Logger
}

// Start serves metrics and health as cfg says until ctx is done and
// returns the Observer to give the loop (dataplane.Options.Observer), or
// nil when cfg.Addr is empty.
func Start(ctx context.Context, cfg Config) (dataplane.Observer, error) {
	addr, err := ListenAddress(cfg.Addr)
	if err != nil || addr == "" {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	health := dataplane.NewHealth(cfg.HealthLimit)
	m := New(Options{Felix: cfg.Felix})
	at, err := Serve(ctx, addr, m.Registry(), health, log)
	if err != nil {
		return nil, err
	}
	log.Info("serving metrics and health", "address", at, "paths", PathMetrics+" "+PathLive+" "+PathReady,
		"liveness limit", health.Limit())
	return dataplane.Observers(health, m), nil
}
