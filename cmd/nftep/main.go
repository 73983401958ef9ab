// Command nftep is a node firewall dataplane: Calico Felix's endpoint
// manager on nftables. See `nftep help` and docs/cli.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/dataplane/demo"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
)

// version is set at build time with -ldflags "-X main.version=…"; without
// it the module version (or the VCS revision) is used.
var version = ""

const usage = `nftep: Calico Felix's endpoint manager on nftables (one inet table, verdict-map
dispatch, one atomic netlink batch per apply).

Usage: nftep [global flags] <command> [flags]

Commands:
  apply --state FILE [--json]  reconcile the node once with a state file and exit
  run --state FILE     keep the node reconciled with a state file until SIGTERM
                       (file changes, interface events, periodic resync);
                       --metrics-addr serves /metrics, /livez and /readyz
  driver               be Felix's external dataplane driver (fd 3 in, fd 4 out)
  show [--diff|--record|--state FILE] [--json]  print the ruleset in nft syntax or JSON (no nft binary needed)
  status [--state FILE] [--json]  print each endpoint's status
  explain --from A --to B [--proto P] [--dport N] [--json]
                       which rule decides a packet from A to B, read from the
                       kernel's table, and what would change the verdict
  cleanup              delete nftep's tables and routes
  demo                 run a demo in throwaway network namespaces (root)
  version              print the version

Global flags (also accepted after the command):
  --table NAME     table name (default nftep; overrides NftepTableName)
  --netns NAME     work inside the named network namespace (ip netns)
  --run-dir DIR    where status.json and ruleset.nft live
                   (default /run/nftep, /run/nftep/netns/NAME with --netns)
  --log-level L    debug, info, warn or error
  --mtu-file FILE  where the pod MTU goes for the Calico CNI plugin (default
                   /var/lib/calico/mtu; none with --netns unless given)
  --config FILE    Felix settings, felix.cfg format ("Key = value" lines); they
                   and FELIX_<KEY> environment variables (which win) override
                   a state file's config (driver mode: Felix resolves them)

Run "nftep <command> -h" for a command's flags.
`

func main() {
	stopProfile := startProfile()
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	stopProfile()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "nftep: %v\n", err)
		os.Exit(1)
	}
}

// startProfile writes a CPU profile of the whole command to the file
// NFTEP_CPUPROFILE names (for performance reports: `go tool pprof`), and
// returns what stops it. An environment variable rather than a flag: it is
// for the people measuring nftep, not an operation of the node.
//
// NFTEP_MEMPROFILE likewise names a file for a heap profile written at the
// end, with every 4 KiB allocated sampled (`go tool pprof
// -sample_index=alloc_space`): a one-shot process on this kind of machine
// is bound by the fresh memory it touches. In both names, "{pid}" becomes
// the process's ID.
func startProfile() (stop func()) {
	stopMem := startMemProfile()
	path := os.Getenv("NFTEP_CPUPROFILE")
	if path == "" {
		return stopMem
	}
	path = strings.ReplaceAll(path, "{pid}", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nftep: NFTEP_CPUPROFILE: %v\n", err)
		return stopMem
	}
	// 1 ms samples, not 10: a one-workload apply is a few hundred
	// milliseconds. (StartCPUProfile then warns that the rate is set.)
	runtime.SetCPUProfileRate(1000)
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "nftep: NFTEP_CPUPROFILE: %v\n", err)
		f.Close()
		return stopMem
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		stopMem()
	}
}

// startMemProfile starts sampling allocations when NFTEP_MEMPROFILE is set
// (see startProfile), and returns what writes the profile.
func startMemProfile() (stop func()) {
	path := os.Getenv("NFTEP_MEMPROFILE")
	if path == "" {
		return func() {}
	}
	path = strings.ReplaceAll(path, "{pid}", strconv.Itoa(os.Getpid()))
	runtime.MemProfileRate = 4096
	return func() {
		// The profile counts what the last collection saw; this one
		// counts everything (the daemon may have turned collections off,
		// internal/gcidle).
		runtime.GC()
		f, err := os.Create(path)
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "nftep: NFTEP_MEMPROFILE: %v\n", err)
		}
	}
}

// privilegeHint says what is missing when the kernel refused an operation
// for want of privilege: nf_tables, routes, neighbours and net sysctls all
// answer EPERM without CAP_NET_ADMIN (and entering a namespace without
// CAP_SYS_ADMIN).
func privilegeHint(err error) error {
	if err == nil || !(errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)) {
		return err
	}
	return fmt.Errorf("%w\n(nftep needs CAP_NET_ADMIN in the network namespace it programs, and CAP_SYS_ADMIN for --netns: run it as root or grant those; see docs/operations.md#privileges)", err)
}

// globals are the flags every command accepts.
type globals struct {
	table    string
	netns    string
	runDir   string
	logLevel string
	config   string
	mtuFile  string
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.table, "table", g.table, "table name (default nftep)")
	fs.StringVar(&g.netns, "netns", g.netns, "work inside the named network namespace")
	fs.StringVar(&g.runDir, "run-dir", g.runDir, "directory of status.json and ruleset.nft")
	fs.StringVar(&g.logLevel, "log-level", g.logLevel, "debug, info, warn or error")
	fs.StringVar(&g.config, "config", g.config, "Felix settings file (Key = value lines); FELIX_<KEY> variables override it")
	fs.StringVar(&g.mtuFile, "mtu-file", g.mtuFile, "where the pod MTU goes for the Calico CNI plugin (default /var/lib/calico/mtu; none with --netns)")
}

// env is what a command gets: parsed flags and the opened namespace.
type env struct {
	g      globals
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
	ns     *netnsutil.NS
	// settings are the config file's and the environment's (see
	// dataplane.LoadSettings); felixResolved means Felix resolved them
	// already (driver mode), so they do not override its ConfigUpdate.
	settings      *dataplane.Settings
	felixResolved bool
}

// options returns the dataplane options for the global flags.
func (e *env) options() dataplane.Options {
	o := dataplane.Options{Table: e.g.table, Namespace: e.ns, RunDir: e.runDir(), Logger: e.log, MTUFile: e.mtuFile()}
	if e.settings != nil && !e.felixResolved {
		o.Config = e.settings.Config
	}
	return o
}

// mtuFile is --mtu-file, or Felix's /var/lib/calico/mtu on the host's
// network namespace: a namespace given with --netns is a test or demo node,
// whose MTU is not the host's.
func (e *env) mtuFile() string {
	if e.g.mtuFile != "" || e.g.netns != "" {
		return e.g.mtuFile
	}
	return DefaultMTUFile
}

// DefaultMTUFile is where Felix writes the pod MTU for the Calico CNI
// plugin (cluster-networking: /var/lib/calico/mtu).
const DefaultMTUFile = "/var/lib/calico/mtu"

// runDir is --run-dir, or /run/nftep with a namespace and a non-default
// table each getting their own subdirectory, so that several nftep
// instances never share a status file.
func (e *env) runDir() string {
	if e.g.runDir != "" {
		return e.g.runDir
	}
	dir := "/run/nftep"
	if e.g.netns != "" {
		dir = filepath.Join(dir, "netns", e.g.netns)
	}
	if e.g.table != "" && e.g.table != render.DefaultTableName {
		dir = filepath.Join(dir, "table", e.g.table)
	}
	return dir
}

// command is one subcommand: its flags and what it does with them.
type command struct {
	name     string
	summary  string
	defLevel slog.Level
	flags    func(fs *flag.FlagSet) func(ctx context.Context, e *env) error
}

func commands() []command {
	return []command{
		{"apply", "reconcile the node once with a state file", slog.LevelWarn, applyCmd},
		{"run", "keep the node reconciled with a state file", slog.LevelInfo, runCmd},
		{"driver", "Felix's external dataplane driver on fd 3/4", slog.LevelInfo, driverCmd},
		{"show", "print the ruleset in nft syntax", slog.LevelWarn, showCmd},
		{"status", "print each endpoint's status", slog.LevelWarn, statusCmd},
		{"explain", "say which rule decides a packet, and why", slog.LevelWarn, explainCmd},
		{"cleanup", "delete nftep's tables and routes", slog.LevelWarn, cleanupCmd},
		{"demo", "run the demo in throwaway network namespaces", slog.LevelWarn, demoCmd},
		{"version", "print the version", slog.LevelWarn, versionCmd},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var g globals
	top := flag.NewFlagSet("nftep", flag.ContinueOnError)
	top.SetOutput(stderr)
	top.Usage = func() { fmt.Fprint(stderr, usage) }
	g.register(top)
	if err := top.Parse(args); err != nil {
		return err
	}
	if top.NArg() == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	name, rest := top.Arg(0), top.Args()[1:]
	if name == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		fs := flag.NewFlagSet("nftep "+c.name, flag.ContinueOnError)
		fs.SetOutput(stderr)
		g.register(fs)
		do := c.flags(fs)
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%s: unexpected arguments %q", c.name, fs.Args())
		}
		e := &env{g: g, stdout: stdout, stderr: stderr}
		level := c.defLevel
		if g.logLevel != "" {
			if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
			}
		}
		e.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
		if err := e.loadSettings(c.name); err != nil {
			return err
		}
		if g.netns != "" && c.name != "demo" && c.name != "version" {
			ns, err := netnsutil.Open(g.netns)
			if err != nil {
				return privilegeHint(err)
			}
			defer ns.Close()
			e.ns = ns
		}
		ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		return privilegeHint(do(ctx, e))
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", name)
}

func applyCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	state := fs.String("state", "", "state file (YAML or JSON): Felix config and messages (required)")
	quiet := fs.Bool("quiet", false, "print nothing on success")
	asJSON := fs.Bool("json", false, "print the result as JSON (table, contents, operations, statuses, incremental)")
	full := fs.Bool("full", false, "compute the whole node and repair everything nftep programs, ignoring the record of the last apply")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nftep apply --state FILE\n\nValidates FILE completely (a bad file changes nothing), then programs the\ntables, routes and interface sysctls once and prints the endpoint statuses.\n\nWith a run directory, the next apply programs only what changed since this\none, as long as nothing else committed to nftables since (RUN-DIR/applied.rec;\n--full ignores it).\n\n")
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		if *state == "" {
			return errors.New("apply: --state FILE is required")
		}
		opts := e.options()
		opts.Full = *full
		res, err := dataplane.Apply(ctx, opts, *state)
		if err != nil {
			return err
		}
		if *quiet {
			return nil
		}
		if *asJSON {
			return printJSON(e, res)
		}
		changes := "no change needed"
		if res.Operations > 0 {
			changes = fmt.Sprintf("%d objects added or removed", res.Operations)
		}
		fmt.Fprintf(e.stdout, "applied %s to table inet %s (%s): %s\n\n", *state, res.Table, changes, res.Contents)
		dataplane.FormatStatuses(e.stdout, res.Statuses)
		return nil
	}
}

func runCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	state := fs.String("state", "", "state file (YAML or JSON) to keep the node reconciled with (required)")
	poll := fs.Duration("poll", 0, "how often to check the state file for changes besides inotify's events; 0: not at all while inotify watches its directory on a local file system, every minute on a network or FUSE file system, every second when inotify cannot watch it (SIGHUP: now)")
	obs := registerObsFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nftep run --state FILE\n\nKeeps the node reconciled with FILE until SIGTERM: file changes, interface\nevents, periodic resyncs (NftablesRefreshInterval, RouteRefreshInterval). A bad\nversion of the file is logged and leaves the running ruleset as it was.\nThe ruleset stays in place when nftep stops; `nftep cleanup` removes it.\n\n")
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		if *state == "" {
			return errors.New("run: --state FILE is required")
		}
		reload := make(chan struct{}, 1)
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for range hup {
				select {
				case reload <- struct{}{}:
				default:
				}
			}
		}()
		opts := e.options()
		opts.PollInterval = *poll
		var err error
		if opts.Observer, err = obs.start(ctx, e, false); err != nil {
			return err
		}
		return dataplane.Run(ctx, opts, *state, reload)
	}
}

func driverCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	obs := registerObsFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nftep driver\n\nFelix's external dataplane driver: reads ToDataplane frames on fd 3 and writes\nFromDataplane frames on fd 4. Felix starts it (use nftep-felix-driver, which\ntakes no arguments) with FELIX_USEINTERNALDATAPLANEDRIVER=false and\nFELIX_DATAPLANEDRIVER=/usr/local/bin/nftep-felix-driver.\n\n")
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		in, out, err := dataplane.FelixPipes()
		if err != nil {
			return err
		}
		defer in.Close()
		defer out.Close()
		opts := e.options()
		if opts.Observer, err = obs.start(ctx, e, true); err != nil {
			return err
		}
		return dataplane.RunDriver(ctx, opts, in, out)
	}
}

func showCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	state := fs.String("state", "", "print the ruleset this state file would program (a dry run)")
	record := fs.Bool("record", false, "print the tables as nftep last programmed them (the running daemon's model, or RUN-DIR/ruleset.nft)")
	diff := fs.Bool("diff", false, "print the differences between the kernel's tables and nftep's record of them")
	asJSON := fs.Bool("json", false, "print the tables as JSON (chains, rules, sets, elements; see docs/json.md)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: nftep show [--diff | --record | --state FILE] [--json]

Prints nftep's tables in nft syntax without the nft binary.

Without flags: the tables as the kernel holds them (inet, and arp when it
exists), read over netlink and decoded rule by rule; the text is what `+"`nft list\ntable`"+` prints. Expressions nftep never emits print as `+"`# unknown expression <name>`"+`.
Then, when the tables exist and the node has any, its cluster networking as the kernel holds it:
tunnel devices, remote VTEPs (permanent neighbours, FDB entries) and cluster
routes, as the `+"`ip`"+` and `+"`bridge`"+` commands that make them, each behind "# ".

With --diff: what differs between the kernel and nftep's record (the running
daemon's model, or RUN-DIR/ruleset.nft): one line per rule, chain, set or
element, "+" in the kernel only (foreign: not programmed by nftep), "-" in the
record only (missing), "~" changed.

With --record: the record itself, as nftep last programmed the tables.

With --state FILE: the ruleset FILE would program, computed by a dry run
through the same managers (nothing is programmed).

With --json: the same, as JSON (docs/json.md).

`)
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		if n := btoi(*state != "") + btoi(*record) + btoi(*diff); n > 1 {
			return errors.New("show: --state, --record and --diff exclude each other")
		}
		if *asJSON {
			return showJSON(ctx, e, *state, *record, *diff)
		}
		switch {
		case *state != "":
			res, err := dataplane.DryRun(e.options(), *state)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "# ruleset of %s (dry run: nothing programmed)\n", *state)
			fmt.Fprint(e.stdout, res.Ruleset)
			return nil
		case *record:
			return showRecord(e)
		}
		k, err := dataplane.ReadKernel(ctx, e.options())
		if err != nil {
			return fmt.Errorf("show: %w", err)
		}
		if !*diff {
			if !k.INet.Exists && !k.ARP.Exists {
				return fmt.Errorf("show: the kernel holds no table inet %s (nor arp %s)", k.Table, k.Table)
			}
			cn, err := dataplane.ReadClusterNetworking(e.options())
			if err != nil {
				return fmt.Errorf("show: %w", err)
			}
			fmt.Fprint(e.stdout, k.String())
			if !cn.Empty() {
				fmt.Fprintln(e.stdout)
				fmt.Fprint(e.stdout, cn.Format())
			}
			for _, t := range []*nft.KernelTable{k.INet, k.ARP} {
				for _, p := range t.Problems {
					fmt.Fprintf(e.stderr, "nftep: show: table %s %s: %s\n", t.Model.Family, t.Model.Name, p)
				}
			}
			return nil
		}
		p, err := dataplane.ReadProgrammed(e.options())
		if err != nil {
			return err
		}
		if p.Ruleset == "" {
			if p.DaemonErr != nil {
				return fmt.Errorf("show: %w", p.DaemonErr)
			}
			return fmt.Errorf("show: no record of a programmed ruleset in %s to compare the kernel with", e.runDir())
		}
		if p.Live {
			fmt.Fprintf(e.stdout, "# kernel vs. the running nftep's model (%s)\n", filepath.Join(e.runDir(), dataplane.ControlSocketName))
		} else {
			if p.DaemonErr != nil {
				fmt.Fprintf(e.stdout, "# WARNING: %v\n", p.DaemonErr)
			}
			fmt.Fprintf(e.stdout, "# kernel vs. nftep's record (%s, %s)\n",
				filepath.Join(e.runDir(), dataplane.RulesetFileName), p.Recorded.Local().Format(time.DateTime))
		}
		lines := k.Diff(p.Ruleset)
		if len(lines) == 0 {
			fmt.Fprintln(e.stdout, "# no differences")
		}
		for _, l := range lines {
			fmt.Fprintln(e.stdout, l)
		}
		return nil
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// showRecord prints the tables as nftep last programmed them.
func showRecord(e *env) error {
	p, err := dataplane.ReadProgrammed(e.options())
	if err != nil {
		return err
	}
	if p.Ruleset == "" && p.DaemonErr != nil {
		return fmt.Errorf("show: %w", p.DaemonErr)
	}
	if p.Ruleset == "" {
		return fmt.Errorf("show: no record of a programmed ruleset in %s (table inet %s exists in the kernel: %s); run `nftep show` for the kernel's tables, or `nftep show --state FILE` for a dry run",
			e.runDir(), p.Table, yesNo(p.InetExists))
	}
	if p.Live {
		fmt.Fprintf(e.stdout, "# table inet %s as the running nftep programmed it (%s)\n", p.Table,
			filepath.Join(e.runDir(), dataplane.ControlSocketName))
	} else {
		if p.DaemonErr != nil {
			fmt.Fprintf(e.stdout, "# WARNING: %v\n", p.DaemonErr)
		}
		fmt.Fprintf(e.stdout, "# table inet %s as nftep last recorded it (%s, %s)\n", p.Table,
			filepath.Join(e.runDir(), dataplane.RulesetFileName), p.Recorded.Local().Format(time.DateTime))
	}
	if !p.InetExists {
		fmt.Fprintf(e.stdout, "# WARNING: the kernel holds no table inet %s now: it was deleted after this record\n", p.Table)
	}
	fmt.Fprint(e.stdout, p.Ruleset)
	return nil
}

// showJSON is `nftep show --json`: the same sources as show, as data.
func showJSON(ctx context.Context, e *env, state string, record, diff bool) error {
	switch {
	case state != "":
		res, err := dataplane.DryRun(e.options(), state)
		if err != nil {
			return err
		}
		return printJSON(e, &dataplane.ShowJSON{Source: "dry-run", File: state, Tables: res.Tables})
	case record:
		return showRecordJSON(e)
	}
	k, err := dataplane.ReadKernel(ctx, e.options())
	if err != nil {
		return fmt.Errorf("show: %w", err)
	}
	if diff {
		return showDiffJSON(e, k)
	}
	exists := k.INet.Exists
	out := &dataplane.ShowJSON{Source: "kernel", TableExists: &exists, Tables: k.JSON()}
	for _, t := range []*nft.KernelTable{k.INet, k.ARP} {
		for _, p := range t.Problems {
			out.Warnings = append(out.Warnings, fmt.Sprintf("table %s %s: %s", t.Model.Family, t.Model.Name, p))
		}
	}
	if !k.INet.Exists && !k.ARP.Exists {
		return fmt.Errorf("show: the kernel holds no table inet %s (nor arp %s)", k.Table, k.Table)
	}
	cn, err := dataplane.ReadClusterNetworking(e.options())
	if err != nil {
		return fmt.Errorf("show: %w", err)
	}
	if !cn.Empty() {
		out.ClusterNetworking = cn
	}
	return printJSON(e, out)
}

// showDiffJSON is `nftep show --diff --json`.
func showDiffJSON(e *env, k *dataplane.KernelTables) error {
	p, err := dataplane.ReadProgrammed(e.options())
	if err != nil {
		return err
	}
	if p.Ruleset == "" {
		if p.DaemonErr != nil {
			return fmt.Errorf("show: %w", p.DaemonErr)
		}
		return fmt.Errorf("show: no record of a programmed ruleset in %s to compare the kernel with", e.runDir())
	}
	out := &dataplane.DiffJSON{Source: "daemon", Differences: k.Diff(p.Ruleset)}
	if out.Differences == nil {
		out.Differences = []string{}
	}
	if !p.Live {
		out.Source = "record"
		out.File = filepath.Join(e.runDir(), dataplane.RulesetFileName)
		out.Recorded = p.Recorded.UTC().Format(time.RFC3339)
		if p.DaemonErr != nil {
			out.Warnings = append(out.Warnings, p.DaemonErr.Error())
		}
	}
	return printJSON(e, out)
}

// showRecordJSON is `nftep show --record --json`.
func showRecordJSON(e *env) error {
	p, err := dataplane.ReadProgrammedJSON(e.options())
	if err != nil {
		return err
	}
	if p.Ruleset == "" && p.DaemonErr != nil {
		return fmt.Errorf("show: %w", p.DaemonErr)
	}
	if p.Ruleset == "" {
		return fmt.Errorf("show: no JSON record of a programmed ruleset in %s (table inet %s exists in the kernel: %s); run `nftep show --json` for the kernel's tables, or `nftep show --json --state FILE` for a dry run",
			e.runDir(), p.Table, yesNo(p.InetExists))
	}
	out := &dataplane.ShowJSON{Source: "daemon", TableExists: &p.InetExists}
	if err := json.Unmarshal([]byte(p.Ruleset), &out.Tables); err != nil {
		return fmt.Errorf("show: the programmed tables: %w", err)
	}
	if !p.Live {
		out.Source = "record"
		out.File = filepath.Join(e.runDir(), dataplane.RulesetJSONFileName)
		out.Recorded = p.Recorded.UTC().Format(time.RFC3339)
		if p.DaemonErr != nil {
			out.Warnings = append(out.Warnings, p.DaemonErr.Error())
		}
	}
	if !p.InetExists {
		out.Warnings = append(out.Warnings, fmt.Sprintf("the kernel holds no table inet %s now: it was deleted after this record", p.Table))
	}
	return printJSON(e, out)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func statusCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	state := fs.String("state", "", "compute statuses from this state file (a dry run against the current interfaces)")
	asJSON := fs.Bool("json", false, "print the status as JSON (the run directory's status.json format)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nftep status [--state FILE]\n\nPrints each endpoint's status (up, down, error with the reason): asked of the\nrunning daemon (RUN-DIR/control.sock), else from the status file nftep writes\n(RUN-DIR/status.json), or with --state from a dry run of FILE against the\ninterfaces that exist now.\n\n")
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		if *state != "" {
			res, err := dataplane.DryRun(e.options(), *state)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(e, &dataplane.Status{Mode: "dry-run", Source: *state, Table: res.Table,
					Namespace: e.g.netns, PID: os.Getpid(), Updated: time.Now().UTC(), InSync: true, Endpoints: res.Statuses})
			}
			fmt.Fprintf(e.stdout, "statuses %s would give (dry run), table inet %s\n\n", *state, res.Table)
			dataplane.FormatStatuses(e.stdout, res.Statuses)
			return nil
		}
		if s, err := dataplane.LiveStatus(e.runDir()); err == nil {
			if *asJSON {
				return printJSON(e, s)
			}
			s.Format(e.stdout)
			return nil
		}
		path := filepath.Join(e.runDir(), dataplane.StatusFileName)
		s, err := dataplane.ReadStatus(path)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("status: no status file %s: nftep has not applied anything here (try `nftep status --state FILE` for a dry run)", path)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e, s)
		}
		s.Format(e.stdout)
		return nil
	}
}

func cleanupCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	state := fs.String("state", "", "read the configuration (table name, interface prefixes, route protocol) from this state file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nftep cleanup [--state FILE]\n\nDeletes nftep's inet and arp tables, the routes it owns (routes on workload\ninterfaces, cluster routes), the VXLAN devices with their FDB entries and\nneighbours, tunl0's addresses, and its status files. Workload traffic is then no longer policed.\nInterface sysctls are left alone.\n\n")
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		var config map[string]string
		if *state != "" {
			sf, err := dataplane.LoadStateFile(*state)
			if err != nil {
				return err
			}
			config = sf.Config
		}
		res, err := dataplane.Cleanup(ctx, e.options(), config)
		if err != nil {
			return err
		}
		tables := "no tables found"
		if len(res.Tables) > 0 {
			tables = "deleted table " + strings.Join(res.Tables, ", table ")
		}
		fmt.Fprintf(e.stdout, "%s; removed the routes nftep owns\n", tables)
		for _, owner := range slices.Sorted(maps.Keys(res.Removed)) {
			fmt.Fprintf(e.stdout, "%s: removed %s\n", owner, strings.Join(res.Removed[owner], ", "))
		}
		return nil
	}
}

func demoCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	keep := fs.Bool("keep", false, "leave the namespaces in place to explore (prints how to remove them)")
	full := fs.Bool("full-ruleset", false, "print the whole ruleset, not only the chains that decide the demo's connections")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nftep demo [--keep]\n\nBuilds throwaway network namespaces (a node and four pods), applies an example\nstate, shows allowed and denied connections with real packets, prints the\nruleset and endpoint statuses; then two nodes over VXLAN, with a pod reaching\na pod of the other node and one denied by policy; and removes everything\n(also on Ctrl-C).\nNever touches the host's own ruleset, routes or sysctls. Needs root.\n\n")
		fs.PrintDefaults()
	}
	return func(ctx context.Context, e *env) error {
		if e.g.netns != "" {
			return errors.New("demo: --netns does not apply: the demo makes its own namespaces")
		}
		// A closed stdout (`nftep demo | head`) must not kill the process
		// before it removes its namespaces: get EPIPE errors instead.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
		res, err := demo.Run(ctx, demo.Options{Out: e.stdout, Keep: *keep, Table: e.g.table, Logger: e.log, FullRuleset: *full})
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if n := res.Unexpected(); n > 0 {
			return fmt.Errorf("demo: %d connection(s) did not behave as expected", n)
		}
		return nil
	}
}

func versionCmd(fs *flag.FlagSet) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		fmt.Fprintf(e.stdout, "nftep %s\n", versionString())
		return nil
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		return fmt.Sprintf("%s (%s%s, %s)", v, rev, dirty, bi.GoVersion)
	}
	return fmt.Sprintf("%s (%s)", v, bi.GoVersion)
}
