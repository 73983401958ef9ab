package dataplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/render"
)

// nftep's process settings: read once at start, from the environment and
// the config file (never from a state file, which can change while the
// process runs), by the nftep commands that serve metrics.
const (
	// KeyMetricsAddr is where `run` and `driver` serve /metrics, /livez
	// and /readyz: a port (on loopback) or HOST:PORT; empty is off.
	KeyMetricsAddr = "NftepMetricsAddr"
	// KeyHealthTimeout is how long the event loop may stay busy without a
	// heartbeat before /livez fails (seconds, or a Go duration); waiting
	// for work does not count.
	KeyHealthTimeout = "NftepHealthTimeout"
)

// EnvPrefix starts the environment variables that carry Felix settings, as
// Felix reads them (FELIX_<KEY>, the key in any case).
const EnvPrefix = "FELIX_"

// KnownConfigKeys lists every key nftep reads, as spelled in Felix's
// configuration reference: the keys of render.ParseConfig and ParseConfig
// and the process settings. Keys are matched case-insensitively.
func KnownConfigKeys() []string {
	return []string{
		render.KeyInterfacePrefix, render.KeyDefaultEndpointToHostAction,
		render.KeyFailsafeInboundHostPorts, render.KeyFailsafeOutboundHostPorts,
		render.KeyNftablesMarkMask, render.KeyIptablesMarkMask,
		render.KeyNftablesFilterAllowAction, render.KeyNftablesMangleAllowAction, render.KeyNftablesFilterDenyAction,
		render.KeyDisableConntrackInvalidCheck, render.KeyAllowVXLANPacketsFromWorkloads,
		render.KeyAllowIPIPPacketsFromWorkloads, render.KeyVXLANPort, render.KeyIpv6Support,
		render.KeyTableName, render.KeyEndpointMarks, render.KeyARPSuppression,
		render.KeySharedEndpointChains, render.KeyFlowLogs, render.KeyKubeNodePortRanges,
		render.KeyNATOutgoingAddress, render.KeyNATPortRange, render.KeyNATOutgoingExclusions,
		render.KeyNATOutgoingInterfaceFilter, render.KeyNATFullyRandom, render.KeyExternalNodesCIDRList,
		render.KeyIpInIpTunnelAddr, render.KeyIPv4VXLANTunnelAddr, render.KeyIPv6VXLANTunnelAddr,
		KeyFloatingIPs, KeyDeviceRouteProtocol, KeyRemoveExternalRoutes,
		KeyRouteRefreshInterval, KeyNftablesRefreshInterval,
		KeyMetricsAddr, KeyHealthTimeout,
		KeyRemoveCalicoLeftovers,
		overlay.KeyFelixHostname, overlay.KeyVXLANVNI, overlay.KeyVXLANMTU, overlay.KeyVXLANMTUV6,
		overlay.KeyIPIPMTU, overlay.KeyIPIPTunnelAddr, overlay.KeyIPIPEnabled,
		overlay.KeyProgramClusterRoutes, overlay.KeyRouteSource, overlay.KeyMTUIfacePattern,
	}
}

// canonicalKey returns the known key that k names (case-insensitively).
func canonicalKey(k string) (string, bool) {
	for _, known := range KnownConfigKeys() {
		if strings.EqualFold(k, known) {
			return known, true
		}
	}
	return "", false
}

// Settings are the Felix settings of the config file and the environment.
type Settings struct {
	// Config maps each known key (canonical spelling) to its value: the
	// environment's where set, else the config file's.
	Config map[string]string
	// Unknown names the settings nftep does not know, where they came
	// from: "FELIX_LOGSEVERITYSCREEN", "/etc/nftep/felix.cfg:3 LogFilePath".
	// They are ignored.
	Unknown []string
}

// LoadSettings reads the config file at path (none when empty) and the
// FELIX_ variables of environ (os.Environ's form). Precedence is Felix's:
// the environment overrides the config file (felix/config/config_params.go
// ranks its sources: datastore < config file < environment). The values of
// each source are checked with ParseConfig, so a malformed value is an
// error naming its key and its source.
//
// The config file has Felix's format (felix.cfg): "Key = value" lines, an
// optional [global] section header, comments starting with # or ;.
func LoadSettings(path string, environ []string) (*Settings, error) {
	s := &Settings{Config: map[string]string{}}
	if path != "" {
		file, unknown, err := readConfigFile(path)
		if err != nil {
			return nil, err
		}
		if err := checkSettings(file); err != nil {
			return nil, fmt.Errorf("config file %q: %w", path, err)
		}
		maps.Copy(s.Config, file)
		s.Unknown = append(s.Unknown, unknown...)
	}
	env := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || len(name) <= len(EnvPrefix) || !strings.EqualFold(name[:len(EnvPrefix)], EnvPrefix) {
			continue
		}
		key, known := canonicalKey(name[len(EnvPrefix):])
		if !known {
			s.Unknown = append(s.Unknown, name)
			continue
		}
		env[key] = value
	}
	if err := checkSettings(env); err != nil {
		return nil, fmt.Errorf("environment (%s<KEY>): %w", EnvPrefix, err)
	}
	maps.Copy(s.Config, env)
	slices.Sort(s.Unknown)
	return s, nil
}

// readConfigFile parses a felix.cfg-style file into known keys.
func readConfigFile(path string) (map[string]string, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config file: %w", err)
	}
	kv := map[string]string{}
	var unknown []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			if !strings.EqualFold(line, "[global]") {
				return nil, nil, fmt.Errorf("config file %q: line %d: section %s: only [global] is read", path, n, line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, nil, fmt.Errorf("config file %q: line %d: want Key = value, got %q", path, n, line)
		}
		key, known := canonicalKey(k)
		if !known {
			unknown = append(unknown, fmt.Sprintf("%s:%d %s", path, n, k))
			continue
		}
		kv[key] = v
	}
	return kv, unknown, nil
}

// checkSettings validates one source's values: the dataplane keys through
// ParseConfig, the process keys here.
func checkSettings(kv map[string]string) error {
	_, err := ParseConfig(kv, "")
	errs := []error{err}
	if s, ok := kv[KeyHealthTimeout]; ok {
		_, herr := ParseSeconds(KeyHealthTimeout, s)
		errs = append(errs, herr)
	}
	return errors.Join(errs...)
}

// ParseSeconds reads a duration as Felix writes intervals (seconds,
// fractions allowed) or as a Go duration ("90s"); key names it in errors.
func ParseSeconds(key, s string) (time.Duration, error) {
	c := felix.NewConfig(map[string]string{key: s})
	d := c.Seconds(key, 0)
	return d, c.Err()
}

// overlay returns o.Config's settings (the config file's and the
// environment's) with kv, the state file's, on top: the state file is the
// node's whole desired state, and its settings take precedence
// (case-insensitively: a key of o.Config that kv sets is replaced).
func (o *Options) overlay(kv map[string]string) map[string]string {
	if len(o.Config) == 0 {
		return kv
	}
	out := make(map[string]string, len(kv)+len(o.Config))
	for k, v := range o.Config {
		if !hasKey(kv, k) {
			out[k] = v
		}
	}
	maps.Copy(out, kv)
	return out
}

// hasKey reports whether kv sets key k, matched case-insensitively.
func hasKey(kv map[string]string, k string) bool {
	for ck := range kv {
		if strings.EqualFold(ck, k) {
			return true
		}
	}
	return false
}

// setting returns o.Config's value for key k, matched case-insensitively.
func (o *Options) setting(k string) (string, bool) {
	for ck, v := range o.Config {
		if strings.EqualFold(ck, k) {
			return v, true
		}
	}
	return "", false
}

// parseConfig is ParseConfig of a state file's configuration under the
// settings of Options.Config, with Options.Table.
func (o *Options) parseConfig(kv map[string]string) (Config, error) {
	return ParseConfig(o.overlay(kv), o.Table)
}

// warnConfigKeys logs, once per key and process, a state file's setting
// that nftep does not know (ignored) and one that overrides the config
// file's or the environment's.
func (l *loop) warnConfigKeys(kv map[string]string) {
	if l.warnedKeys == nil {
		l.warnedKeys = map[string]bool{}
	}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		lk := strings.ToLower(k)
		if l.warnedKeys[lk] {
			continue
		}
		if _, known := canonicalKey(k); !known {
			l.warnedKeys[lk] = true
			l.log.Warn("state file: unknown setting, ignored", "key", k)
			continue
		}
		if v, set := l.opts.setting(k); set && v != kv[k] {
			l.warnedKeys[lk] = true
			l.log.Warn("state file: setting overrides the config file or the environment", "key", k, "used", kv[k], "overridden", v)
		}
	}
}
