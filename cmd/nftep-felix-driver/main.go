// Command nftep-felix-driver is nftep's Felix external dataplane driver:
// exactly `nftep driver`, for Felix, which starts its driver with no
// arguments:
//
//	FELIX_USEINTERNALDATAPLANEDRIVER=false
//	FELIX_DATAPLANEDRIVER=/usr/local/bin/nftep-felix-driver
//
// It reads ToDataplane frames on fd 3 and writes FromDataplane frames on
// fd 4, logs to stderr (which Felix copies into its own log), writes
// /run/nftep/status.json for `nftep status`, and exits 0 when Felix closes
// fd 3 or sends SIGTERM. The ruleset stays programmed when it exits.
//
// Felix passes its environment on: FELIX_NFTEPMETRICSADDR (a port on
// loopback, or HOST:PORT) turns on /metrics, /livez and /readyz, with
// Felix's dataplane metric names besides nftep's, and
// FELIX_NFTEPHEALTHTIMEOUT sets the liveness limit (docs/operations.md).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/metrics"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "nftep-felix-driver: takes no arguments (it is `nftep driver` for Felix; see `nftep driver -h`)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts := dataplane.Options{
		RunDir: "/run/nftep",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	obs, err := observe(ctx, opts.Logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nftep-felix-driver: %v\n", err)
		os.Exit(1)
	}
	opts.Observer = obs
	if err := run(ctx, opts); err != nil {
		fmt.Fprintf(os.Stderr, "nftep-felix-driver: %v\n", err)
		os.Exit(1)
	}
}

// observe starts the metrics and health listener the environment asks
// for (nil when none).
func observe(ctx context.Context, log *slog.Logger) (dataplane.Observer, error) {
	s, err := dataplane.LoadSettings("", os.Environ())
	if err != nil {
		return nil, err
	}
	cfg := metrics.Config{Addr: s.Config[dataplane.KeyMetricsAddr], Felix: true, Logger: log}
	if v, ok := s.Config[dataplane.KeyHealthTimeout]; ok {
		if cfg.HealthLimit, err = dataplane.ParseSeconds(dataplane.KeyHealthTimeout, v); err != nil {
			return nil, err
		}
	}
	return metrics.Start(ctx, cfg)
}

func run(ctx context.Context, opts dataplane.Options) error {
	in, out, err := dataplane.FelixPipes()
	if err != nil {
		return err
	}
	defer in.Close()
	defer out.Close()
	return dataplane.RunDriver(ctx, opts, in, out)
}
