package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nftep/nftep/dataplane"
)

// Paths served by Handler.
const (
	PathMetrics = "/metrics"
	PathLive    = "/livez"
	PathReady   = "/readyz"
)

// Handler serves the registry's metrics on /metrics (nil: not served) and
// health on /livez and /readyz (nil health: not served): 200 "ok", or 503
// with the reason.
func Handler(reg prometheus.Gatherer, health *dataplane.Health) http.Handler {
	mux := http.NewServeMux()
	if reg != nil {
		mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	}
	if health != nil {
		mux.HandleFunc("GET "+PathLive, func(w http.ResponseWriter, r *http.Request) {
			answer(w, health.Live(time.Now()))
		})
		mux.HandleFunc("GET "+PathReady, func(w http.ResponseWriter, r *http.Request) {
			answer(w, health.Ready())
		})
	}
	return mux
}

func answer(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err)
		return
	}
	fmt.Fprintln(w, "ok")
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

// Serve listens on addr (see ListenAddress) and serves h until ctx is
// done. It returns once listening, with the address it listens on; a
// listener that cannot open is an error (an operator who asked for metrics
// wants to know).
func Serve(ctx context.Context, addr string, h http.Handler, log *slog.Logger) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics and health listener: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error("metrics and health listener stopped", "error", err)
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
	at, err := Serve(ctx, addr, Handler(m.Registry(), health), log)
	if err != nil {
		return nil, err
	}
	log.Info("serving metrics and health", "address", at, "paths", PathMetrics+" "+PathLive+" "+PathReady,
		"liveness limit", health.Limit())
	return dataplane.Observers(health, m), nil
}
