// Package demo is `nftep demo`: a node and a few pods in throwaway network
// namespaces, an example state applied to the node by the real dataplane,
// real TCP connections that the ruleset allows or denies, the ruleset and
// the endpoint statuses; then two nodes whose pods talk over VXLAN (see
// cluster.go); and everything removed at the end.
//
// Nothing outside the namespaces it creates is touched: the tables are
// programmed through a netlink socket bound to the node namespace, routes
// through a netlink handle bound to it, sysctls from a thread inside it, and
// the state and status files live in a temporary directory.
//
// The topology (each box a network namespace):
//
//	[pod-a] eth0 10.65.0.1 ── cali-a ─┐
//	[pod-b] eth0 10.65.0.2 ── cali-b ─┤
//	[pod-c] eth0 10.65.0.3 ── cali-c ─┤ [node] lo 10.64.0.1, ip_forward=1
//	[pod-x] eth0 10.65.0.99 ─ cali-x ─┘
//
// Each pod routes everything through 169.254.1.1, which a static neighbour
// entry resolves to the node's end of its veth, as Calico's CNI plugin
// arranges; the node has a route to each pod (the CNI plugin's, taken over
// by nftep's route table for the endpoints it knows).
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/examples"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
)

// NamePrefix starts the name of every namespace the demo creates.
const NamePrefix = "nftep-demo-"

// Options configures Run.
type Options struct {
	// Out receives the demo's report; nil means os.Stdout.
	Out io.Writer
	// Keep leaves the namespaces in place (Run prints how to remove them).
	Keep bool
	// Table overrides the table name (default nftep).
	Table string
	// Logger receives the dataplane's log; nil discards.
	Logger *slog.Logger
	// Timeout is how long a connection attempt may take before it counts
	// as dropped; 0 means one second.
	Timeout time.Duration
	// FullRuleset prints the whole ruleset instead of the chains that
	// decide the demo's connections.
	FullRuleset bool
}

// Check is one connection the demo tries, and what happened.
type Check struct {
	From, To string
	Port     int
	// Want is whether the ruleset should let it through; Why says which
	// part of the state decides.
	Want bool
	Why  string
	// Got is whether the TCP handshake completed; Outcome says what
	// happened ("connected", "timed out: dropped", …).
	Got     bool
	Outcome string
}

// OK reports whether the connection behaved as the ruleset says it should.
func (c Check) OK() bool { return c.Got == c.Want }

// Result is what the demo saw.
type Result struct {
	// Before are the connections tried before nftep programmed anything:
	// all must connect, or the denials after would prove nothing.
	Before []Check
	// Checks are the connections tried with the ruleset in place.
	Checks []Check
	// Statuses are the endpoint statuses nftep reported.
	Statuses []dataplane.EndpointStatus
	// Ruleset is `nftep show`'s text; KernelList is the inet table as the
	// node namespace's kernel holds it, read back and printed by nftep (as
	// `nft list table` prints it).
	Ruleset, KernelList string
	// Namespaces are the names of the namespaces the demo made.
	Namespaces []string
	// Cluster is what the second part (two nodes over VXLAN) saw.
	Cluster *ClusterResult
}

// Unexpected counts the checks that did not behave as the ruleset says.
func (r *Result) Unexpected() int {
	n := 0
	checks := r.Checks
	if r.Cluster != nil {
		checks = append(slices.Clone(checks), r.Cluster.Checks...)
	}
	for _, c := range checks {
		if !c.OK() {
			n++
		}
	}
	return n
}

// pod is one pod of the topology.
type pod struct {
	name  string // pod-a
	iface string // the node's end: cali-a
	addr  string // 10.65.0.1
	mac   string // the pod's end, as the state file says
	ports []int  // listening tcp ports
	note  string // for the topology printout
	ns    *netnsutil.NS
}

func pods() []*pod {
	return []*pod{
		{name: "pod-a", iface: "cali-a", addr: "10.65.0.1", mac: "02:00:0a:41:00:01", ports: []int{8080}, note: "may open tcp 8080 on pod-b"},
		{name: "pod-b", iface: "cali-b", addr: "10.65.0.2", mac: "02:00:0a:41:00:02", ports: []int{8080, 9090}, note: "accepts tcp 8080 from pod-a only"},
		{name: "pod-c", iface: "cali-c", addr: "10.65.0.3", mac: "02:00:0a:41:00:03", ports: []int{8080}, note: "endpoint admin down (state inactive)"},
		{name: "pod-x", iface: "cali-x", addr: "10.65.0.99", mac: "02:00:0a:41:00:63", note: "no endpoint: an unknown cali interface"},
	}
}

// checks are the connections the demo tries, with the expected verdicts.
var checks = []Check{
	{From: "pod-a", To: "pod-b", Port: 8080, Want: true, Why: "policy demo/allow-a-to-b-8080 allows it"},
	{From: "pod-a", To: "pod-b", Port: 9090, Want: false, Why: "the policy allows 8080 only; tier default ends in deny"},
	{From: "pod-b", To: "pod-a", Port: 8080, Want: false, Why: "pod-a has no inbound policy; its profile allows egress only"},
	{From: "pod-c", To: "pod-b", Port: 8080, Want: false, Why: "pod-c is admin down: its traffic is dropped"},
	{From: "pod-a", To: "pod-c", Port: 8080, Want: false, Why: "pod-c is admin down: nothing reaches it"},
	{From: "pod-x", To: "pod-b", Port: 8080, Want: false, Why: "cali-x has no endpoint: unknown interfaces are dropped"},
}

// nodeAddr gives the node an address, so that it has a source for the ARP
// requests it sends towards the pods before nftep's static neighbours exist.
const nodeAddr = "10.64.0.1/32"

// gateway is the pods' next hop, as in Calico.
const gateway = "169.254.1.1"

// Run runs the demo. The namespaces are removed when it returns (unless
// Keep), also when ctx is cancelled (Ctrl-C) or a step fails.
func Run(ctx context.Context, opts Options) (res *Result, err error) {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	table := opts.Table
	if table == "" {
		table = render.DefaultTableName
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root (it creates network namespaces and nftables tables in them); try `sudo make demo`")
	}
	p := &printer{w: out}
	res = &Result{}

	tmp, err := os.MkdirTemp("", "nftep-demo-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	defer func() {
		if !opts.Keep || err != nil {
			os.RemoveAll(tmp)
		}
	}()

	prefix := NamePrefix + randomHex(3)
	node, ps, cleanup, err := build(prefix, pods())
	defer func() {
		if opts.Keep && err == nil {
			p.section("Kept the namespaces")
			p.line("explore:  ip netns exec %s nft list ruleset", node.Name)
			p.line("          nftep --netns %s --run-dir %s status", node.Name, filepath.Join(tmp, "run"))
			p.line("remove:   for ns in %s; do ip netns del $ns; done; rm -r %s", strings.Join(res.Namespaces, " "), tmp)
			cleanup(false)
			return
		}
		if cerr := cleanup(true); cerr != nil {
			err = errors.Join(err, cerr)
		} else if node != nil {
			p.section("Cleaned up")
			p.line("removed the %d namespaces (with their veths, tables and routes)", len(res.Namespaces))
		}
	}()
	if node != nil {
		res.Namespaces = append(res.Namespaces, node.Name)
		for _, pd := range ps {
			if pd.ns != nil {
				res.Namespaces = append(res.Namespaces, pd.ns.Name)
			}
		}
	}
	if err != nil {
		return res, err
	}
	byName := map[string]*pod{}
	for _, pd := range ps {
		byName[pd.name] = pd
	}

	p.title("nftep demo: a node and four pods, then two nodes over VXLAN, in throwaway network namespaces")
	p.line("Nothing on this host changes: tables, routes and sysctls are made inside namespaces %s-*.", prefix)
	p.section("1. Topology")
	for _, pd := range ps {
		p.line("%-6s %-10s ── %-6s  %s", pd.name, pd.addr, pd.iface, pd.note)
	}
	p.line("node   %s (namespace %s): routes to the pods, forwarding on", strings.TrimSuffix(nodeAddr, "/32"), node.Name)

	listeners, err := listen(ps)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	if err != nil {
		return res, err
	}

	// Before: plain routing, no policy. Everything must connect, or the
	// denials below would prove nothing.
	p.section("2. Before nftep: plain routing")
	res.Before = tryAll(ctx, byName, allAllowed(checks), opts.Timeout)
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}
	bad := 0
	for _, c := range res.Before {
		if !c.Got {
			bad++
			p.line("✗ %s → %s tcp/%d: %s", c.From, c.To, c.Port, c.Outcome)
		}
	}
	if bad > 0 {
		return res, fmt.Errorf("%d connection(s) failed before nftep programmed anything: the demo network is broken", bad)
	}
	p.line("all %d connections below succeed without nftep", len(res.Before))

	// Apply the example state with the real dataplane, inside the node.
	p.section("3. nftep apply --state demo.yaml")
	state := filepath.Join(tmp, "demo.yaml")
	if err := os.WriteFile(state, examples.Demo, 0o644); err != nil {
		return res, fmt.Errorf("write the demo state: %w", err)
	}
	runDir := filepath.Join(tmp, "run")
	dopts := dataplane.Options{Table: opts.Table, Namespace: node, RunDir: runDir, Logger: opts.Logger}
	start := time.Now()
	ar, err := dataplane.Apply(ctx, dopts, state)
	if err != nil {
		return res, err
	}
	p.line("programmed table inet %s in %s: %d objects in one transaction", ar.Table, time.Since(start).Round(time.Millisecond), ar.Operations)
	p.line("state: %s", ar.Contents)

	p.section("4. Connections with nftep (real TCP from inside the pods, %s timeout)", opts.Timeout)
	res.Checks = tryAll(ctx, byName, checks, opts.Timeout)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, c := range res.Checks {
		mark, verdict := "✓", "as expected"
		if !c.OK() {
			mark, verdict = "✗", "UNEXPECTED: expected "+allowedWord(c.Want)
		}
		fmt.Fprintf(tw, "  %s %s → %s tcp/%d\t%s, %s\t(%s)\n", mark, c.From, c.To, c.Port, allowedWord(c.Got), verdict, c.Why)
	}
	tw.Flush()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("interrupted: %w", err)
	}

	p.section("5. Endpoint statuses (nftep status)")
	st, err := dataplane.ReadStatus(filepath.Join(runDir, dataplane.StatusFileName))
	if err != nil {
		return res, err
	}
	res.Statuses = st.Endpoints
	var sb strings.Builder
	dataplane.FormatStatuses(&sb, st.Endpoints)
	p.block(sb.String())

	p.section("6. The ruleset (nftep show)")
	prog, err := dataplane.ReadProgrammed(dopts)
	if err != nil {
		return res, err
	}
	res.Ruleset = prog.Ruleset
	if opts.FullRuleset {
		p.block(prog.Ruleset)
	} else {
		shown := blocks(prog.Ruleset, "map filter-to-wl", "chain filter-to-wl-dispatch", "chain filter-tw-cali-b",
			"chain filter-pi-default.demo/allow-a-to-b-8080", "chain filter-tw-cali-c")
		p.line("the chains that decide traffic towards the pods (the whole table: %d lines, `nftep demo --full-ruleset`):", strings.Count(prog.Ruleset, "\n"))
		p.block(shown)
	}

	p.section("7. The kernel's own table, read back by nftep (what nft list table inet %s prints)", table)
	// Read and decoded by nftep itself: nftep never runs nft or any other
	// program (TestKernelShow checks that this listing is nft's, line for
	// line).
	k, lerr := nft.ReadKernelTable(ctx, node.Fd(), nft.FamilyINet, table)
	if lerr != nil {
		return res, fmt.Errorf("read table inet %s back: %w", table, lerr)
	}
	listing := k.String()
	res.KernelList = listing
	inet := prog.Ruleset
	if i := strings.Index(inet, "table arp "); i >= 0 {
		inet = inet[:i]
	}
	if listing == inet {
		p.line("identical to nftep show's inet table, line for line (%d lines)", strings.Count(listing, "\n"))
	} else {
		p.line("differs from nftep show (an nft older or newer than the printer's reference?); first difference:")
		p.block(firstDifference(inet, listing))
	}

	clusterCleanup, err := runCluster(ctx, p, prefix, tmp, opts, res)
	first := cleanup
	cleanup = func(remove bool) error { return errors.Join(clusterCleanup(remove), first(remove)) }
	return res, err
}

// madeNS are the namespaces a part of the demo made, in order.
type madeNS []*netnsutil.NS

// cleanup removes the namespaces (remove false only closes their handles),
// the last made first.
func (m *madeNS) cleanup(remove bool) error {
	var errs []error
	for i := len(*m) - 1; i >= 0; i-- {
		if remove {
			errs = append(errs, (*m)[i].Delete())
		} else {
			errs = append(errs, (*m)[i].Close())
		}
	}
	return errors.Join(errs...)
}

// build creates the node and pod namespaces, wires them and programs the
// "CNI" part: addresses, routes, neighbours, forwarding. cleanup removes
// what was made (remove false only closes handles).
func build(prefix string, ps []*pod) (node *netnsutil.NS, _ []*pod, cleanup func(remove bool) error, err error) {
	var made madeNS
	cleanup = made.cleanup
	node, err = netnsutil.Create(prefix)
	if err != nil {
		return nil, ps, cleanup, err
	}
	made = append(made, node)
	nodeNL, err := node.Netlink()
	if err != nil {
		return node, ps, cleanup, err
	}
	if err := addAddr(nodeNL, "lo", nodeAddr); err != nil {
		return node, ps, cleanup, fmt.Errorf("node: %w", err)
	}
	if err := node.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0)
	}); err != nil {
		return node, ps, cleanup, fmt.Errorf("node: enable forwarding: %w", err)
	}
	for _, pd := range ps {
		pd.ns, err = netnsutil.Create(prefix + "-" + pd.name)
		if err != nil {
			return node, ps, cleanup, err
		}
		made = append(made, pd.ns)
		if err := wirePod(node, nodeNL, pd); err != nil {
			return node, ps, cleanup, fmt.Errorf("%s: %w", pd.name, err)
		}
	}
	return node, ps, cleanup, nil
}

// wirePod connects pd to the node as Calico's CNI plugin would.
func wirePod(node *netnsutil.NS, nodeNL *netlink.Handle, pd *pod) error {
	mac, err := net.ParseMAC(pd.mac)
	if err != nil {
		return err
	}
	if err := netnsutil.Veth(node, pd.iface, pd.ns, "eth0", mac); err != nil {
		return err
	}
	nl, err := pd.ns.Netlink()
	if err != nil {
		return err
	}
	if err := addAddr(nl, "eth0", pd.addr+"/32"); err != nil {
		return err
	}
	eth0, err := nl.LinkByName("eth0")
	if err != nil {
		return err
	}
	gw := net.ParseIP(gateway)
	if err := nl.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Dst: hostNet(gw), Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("route %s dev eth0: %w", gateway, err)
	}
	if err := nl.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route via %s: %w", gateway, err)
	}
	cali, err := nodeNL.LinkByName(pd.iface)
	if err != nil {
		return err
	}
	if err := nl.NeighSet(&netlink.Neigh{
		LinkIndex: eth0.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: gw, HardwareAddr: cali.Attrs().HardwareAddr,
	}); err != nil {
		return fmt.Errorf("neighbour %s: %w", gateway, err)
	}
	// The node's route to the pod, as the CNI plugin adds it; nftep's
	// route table programs the same route for the endpoints it knows.
	if err := nodeNL.RouteAdd(&netlink.Route{
		LinkIndex: cali.Attrs().Index, Dst: hostNet(net.ParseIP(pd.addr)), Scope: netlink.SCOPE_LINK,
		Protocol: netlink.RouteProtocol(3), Priority: 1024,
	}); err != nil {
		return fmt.Errorf("node: route %s dev %s: %w", pd.addr, pd.iface, err)
	}
	return nil
}

func addAddr(nl *netlink.Handle, ifname, cidr string) error {
	l, err := nl.LinkByName(ifname)
	if err != nil {
		return err
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := nl.AddrAdd(l, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", cidr, ifname, err)
	}
	return nil
}

func hostNet(ip net.IP) *net.IPNet {
	return &net.IPNet{IP: ip.To4(), Mask: net.CIDRMask(32, 32)}
}

// listen opens the pods' listening sockets (inside their namespaces) and
// accepts connections until they are closed.
func listen(ps []*pod) ([]net.Listener, error) {
	var ls []net.Listener
	for _, pd := range ps {
		for _, port := range pd.ports {
			var l net.Listener
			err := pd.ns.Do(func() (err error) {
				l, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", pd.addr, port))
				return err
			})
			if err != nil {
				return ls, fmt.Errorf("%s: listen on tcp/%d: %w", pd.name, port, err)
			}
			ls = append(ls, l)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}
	}
	return ls, nil
}

// tryAll runs the checks in parallel (a dropped connection costs the whole
// timeout) and returns them with their outcome, in order.
func tryAll(ctx context.Context, pods map[string]*pod, cs []Check, timeout time.Duration) []Check {
	out := make([]Check, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Got, c.Outcome = try(ctx, pods[c.From], pods[c.To], c.Port, timeout)
			out[i] = c
		}()
	}
	wg.Wait()
	return out
}

// try opens a TCP connection from inside from's namespace to to's address.
func try(ctx context.Context, from, to *pod, port int, timeout time.Duration) (bool, string) {
	var conn net.Conn
	err := from.ns.Do(func() (err error) {
		d := net.Dialer{Timeout: timeout}
		conn, err = d.DialContext(ctx, "tcp4", fmt.Sprintf("%s:%d", to.addr, port))
		return err
	})
	if err == nil {
		conn.Close()
		return true, "connected"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, "timed out: dropped"
	}
	return false, err.Error()
}

func allAllowed(cs []Check) []Check {
	out := make([]Check, len(cs))
	for i, c := range cs {
		c.Want, c.Why = true, "no firewall yet"
		out[i] = c
	}
	return out
}

func allowedWord(b bool) string {
	if b {
		return "allowed"
	}
	return "denied"
}

// blocks returns the table's objects whose header line ("chain x", "map
// y") is one of heads, in the order asked, separated by blank lines.
func blocks(ruleset string, heads ...string) string {
	lines := strings.Split(ruleset, "\n")
	var out []string
	for _, h := range heads {
		for i, l := range lines {
			if strings.TrimSpace(l) != h+" {" {
				continue
			}
			if len(out) > 0 {
				out = append(out, "")
			}
			for _, b := range lines[i:] {
				out = append(out, b)
				if b == "\t}" {
					break
				}
			}
			break
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// firstDifference shows the first line where a and b differ, with a little
// context.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  nftep show: %s\n  nft list:   %s\n", i+1, x, y)
		}
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// printer writes the demo's report: a title, numbered sections, indented
// lines and blocks.
type printer struct{ w io.Writer }

func (p *printer) title(s string) {
	fmt.Fprintf(p.w, "%s\n%s\n", s, strings.Repeat("═", len([]rune(s))))
}
func (p *printer) section(format string, args ...any) {
	fmt.Fprintf(p.w, "\n── "+format+"\n", args...)
}
func (p *printer) line(format string, args ...any) { fmt.Fprintf(p.w, "  "+format+"\n", args...) }
func (p *printer) block(s string) {
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		fmt.Fprintf(p.w, "    %s\n", l)
	}
}
