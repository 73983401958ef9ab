package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/metrics"
)

// environ is the process environment (a variable for tests).
var environ = os.Environ

// loadSettings reads the config file (--config) and the FELIX_ variables
// for command cmd. In driver mode Felix has resolved its settings into the
// ConfigUpdate already: only nftep's process settings (metrics) are used,
// and the many FELIX_ variables of a calico-node container are not warned
// about.
func (e *env) loadSettings(cmd string) error {
	if cmd == "demo" || cmd == "version" {
		return nil
	}
	s, err := dataplane.LoadSettings(e.g.config, environ())
	if err != nil {
		return err
	}
	e.settings = s
	e.felixResolved = cmd == "driver"
	if len(s.Unknown) > 0 && !e.felixResolved {
		e.log.Warn("settings nftep does not know are ignored", "settings", strings.Join(s.Unknown, ", "))
	}
	return nil
}

// obsFlags are the metrics and health flags of run and driver.
type obsFlags struct {
	addr   string
	health time.Duration
}

func registerObsFlags(fs *flag.FlagSet) *obsFlags {
	o := &obsFlags{}
	fs.StringVar(&o.addr, "metrics-addr", "", "serve /metrics, /livez and /readyz on PORT (loopback) or HOST:PORT (default: setting "+dataplane.KeyMetricsAddr+", else off)")
	fs.DurationVar(&o.health, "health-timeout", 0, fmt.Sprintf("/livez fails when the event loop has been stuck this long (default: setting %s, else %s)", dataplane.KeyHealthTimeout, dataplane.DefaultHealthLimit))
	return o
}

// start serves metrics and health when configured (flags first, then the
// settings) and returns the Observer for the loop; felix adds Felix's
// metric names (driver mode).
func (o *obsFlags) start(ctx context.Context, e *env, felix bool) (dataplane.Observer, error) {
	cfg := metrics.Config{Addr: o.addr, HealthLimit: o.health, Felix: felix, Logger: e.log}
	if e.settings != nil {
		if cfg.Addr == "" {
			cfg.Addr = e.settings.Config[dataplane.KeyMetricsAddr]
		}
		if s, ok := e.settings.Config[dataplane.KeyHealthTimeout]; ok && cfg.HealthLimit == 0 {
			d, err := dataplane.ParseSeconds(dataplane.KeyHealthTimeout, s)
			if err != nil {
				return nil, err
			}
			cfg.HealthLimit = d
		}
	}
	return metrics.Start(ctx, cfg)
}

// printJSON writes v as indented JSON.
func printJSON(e *env, v any) error {
	if r, ok := v.(*dataplane.Result); ok {
		// Every endpoint's status: streamed, not built in memory.
		return r.WriteJSON(e.stdout)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", data)
	return err
}
