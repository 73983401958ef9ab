package dataplane

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

// TestKnownConfigKeysCoverParsers: every Key constant of the two
// configuration parsers (render/config.go, dataplane/config.go,
// overlay/config.go) and of the
// process settings is a known key, so that no setting nftep reads is
// warned about as unknown.
func TestKnownConfigKeysCoverParsers(t *testing.T) {
	re := regexp.MustCompile(`(?m)^\s*Key\w+\s*=\s*"(\w+)"`)
	var declared []string
	for _, f := range []string{"../render/config.go", "../overlay/config.go", "config.go", "settings.go", "takeover.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			declared = append(declared, m[1])
		}
	}
	known := slices.Sorted(slices.Values(KnownConfigKeys()))
	slices.Sort(declared)
	if diff := cmp.Diff(declared, known); diff != "" {
		t.Errorf("KnownConfigKeys vs the Key constants of the parsers (-declared +known):\n%s", diff)
	}
}

func TestLoadSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "felix.cfg")
	file := `# nftep settings, Felix's format
[global]
InterfacePrefix = cali
ipv6support = false
; a Felix setting nftep does not use
LogSeverityScreen = Info
RouteRefreshInterval=30
`
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"PATH=/usr/bin",
		"FELIX_INTERFACEPREFIX=tap,cali", // the environment wins
		"felix_NftepMetricsAddr=9095",    // any case
		"FELIX_LOGFILEPATH=none",
		"FELIX_=x",
	}
	s, err := LoadSettings(path, env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"InterfacePrefix":      "tap,cali",
		"Ipv6Support":          "false",
		"RouteRefreshInterval": "30",
		"NftepMetricsAddr":     "9095",
	}
	if diff := cmp.Diff(want, s.Config); diff != "" {
		t.Errorf("Config (-want +got):\n%s", diff)
	}
	wantUnknown := []string{path + ":6 LogSeverityScreen", "FELIX_LOGFILEPATH"}
	if diff := cmp.Diff(wantUnknown, s.Unknown); diff != "" {
		t.Errorf("Unknown (-want +got):\n%s", diff)
	}

	// Neither source is required.
	if s, err := LoadSettings("", nil); err != nil || len(s.Config) != 0 {
		t.Errorf("LoadSettings with nothing = %+v, %v", s, err)
	}
}

// TestLoadSettingsRejects: a malformed value names its key and its source.
func TestLoadSettingsRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, file string
		env        []string
		want       []string
	}{
		{"env bool", "", []string{"FELIX_IPV6SUPPORT=maybe"}, []string{"environment (FELIX_<KEY>)", `Ipv6Support="maybe": not a boolean`}},
		{"env health", "", []string{"FELIX_NFTEPHEALTHTIMEOUT=soon"}, []string{`NftepHealthTimeout="soon"`}},
		{"file interval", write("a.cfg", "RouteRefreshInterval = soon\n"), nil, []string{"a.cfg", `RouteRefreshInterval="soon"`}},
		{"file syntax", write("b.cfg", "InterfacePrefix\n"), nil, []string{"b.cfg", "line 1: want Key = value"}},
		{"file section", write("c.cfg", "[other]\n"), nil, []string{"line 1: section [other]"}},
		{"file missing", filepath.Join(dir, "none.cfg"), nil, []string{"none.cfg", "no such file"}},
	} {
		_, err := LoadSettings(c.file, c.env)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}

// TestRunStateFileOverridesSettings: in `run`, the state file's config
// takes precedence over the config file's and the environment's settings
// (Options.Config), which fill in what it does not set; the state file is
// warned about once for the overriding key and for an unknown one.
func TestRunStateFileOverridesSettings(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("tap-a", 5)
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	state := strings.Replace(goodState, "InterfacePrefix: cali", "InterfacePrefix: tap\n  LogSeverityScreen: Info", 1)
	state = strings.ReplaceAll(state, "cali-a", "tap-a")
	if err := os.WriteFile(path, []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	opts := Options{
		Kernel: k, PollInterval: 5 * time.Millisecond,
		Config: map[string]string{"InterfacePrefix": "cali", "NftepTableName": "fromenv"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts, path, nil) }()
	// The state file's InterfacePrefix (tap) wins over the environment's
	// (cali); the table name, which the state file does not set, is the
	// environment's.
	require.Eventually(t, func() bool {
		return strings.Contains(k.table("inet fromenv").programmed, `"tap-a" comment "endpoint k8s/ns/a/eth0"`)
	}, waitLimit, pollTick, "tap-a programmed as a workload")
	// A second version of the file: no second warning. (The first may be
	// read more than once: the watcher can see it again before the second
	// is written; counted from here.)
	loaded := func() int { return strings.Count(logs.String(), `msg="state file loaded"`) }
	before := loaded()
	if err := os.WriteFile(path, []byte(state+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool {
		return loaded() > before
	}, waitLimit, pollTick, "the second version loaded\n%s", &logs)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	text := logs.String()
	for _, w := range []string{
		`msg="state file: setting overrides the config file or the environment" key=InterfacePrefix used=tap overridden=cali`,
		`msg="state file: unknown setting, ignored" key=LogSeverityScreen`,
	} {
		if n := strings.Count(text, w); n != 1 {
			t.Errorf("%d times in the log, want once: %s\n%s", n, w, text)
		}
	}
}
