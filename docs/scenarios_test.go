package docs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/internal/testutil"
)

// pod is a pod of a scenario: its namespace's alias, veth and address.
type pod struct {
	name, iface, ip, mac string
}

var demoPods = []pod{
	{"pod-a", "cali-a", "10.65.0.1", "02:00:0a:41:00:01"},
	{"pod-b", "cali-b", "10.65.0.2", "02:00:0a:41:00:02"},
	{"pod-c", "cali-c", "10.65.0.3", "02:00:0a:41:00:03"},
	{"pod-x", "cali-x", "10.65.0.99", "02:00:0a:41:00:63"},
}

// scenario describes what a scenario builds.
type scenario struct {
	// node is the alias of the node namespace.
	node string
	// inside runs the commands inside the node namespace.
	inside bool
	// pods are wired to the node.
	pods []pod
	// serve makes each pod answer HTTP on ports 8080 and 9090.
	serve bool
	// felixSession copies the recorded Felix stream (testdata/felix) into
	// the work directory.
	felixSession bool
	// eth0, when set, is the node's uplink address: an eth0 (a veth whose
	// peer, eth0p, stays in the node) with it.
	eth0 string
}

// clusterPods are node1's pods of examples/cluster-node1.yaml.
var clusterPods = []pod{
	{"pod-a", "cali-a", "10.65.1.1", "02:00:0a:41:01:01"},
	{"pod-b", "cali-b", "10.65.1.2", "02:00:0a:41:01:02"},
}

var scenarios = map[string]*scenario{
	"none":  {node: "none", inside: true},
	"node1": {node: "node1", pods: demoPods[:1]},
	"node2": {node: "node2", felixSession: true},
	"node":  {node: "node", inside: true, pods: demoPods, serve: true},
	// node1 of the example cluster over VXLAN (examples/cluster-node1.yaml).
	"cluster": {node: "node1", inside: true, pods: clusterPods, eth0: "192.168.60.11/24"},
}

// instance is a built scenario.
type instance struct {
	sc         *scenario
	bin        string
	work       string // the commands' working directory
	runDir     string // bound on /run/nftep for the commands
	aliases    map[string]string
	nodeNS     string // real name of the node namespace
	namespaces []string
	listeners  []net.Listener
}

func newInstance(t *testing.T, name, bin string) *instance {
	t.Helper()
	sc := scenarios[name]
	in := &instance{sc: sc, bin: bin, aliases: map[string]string{}}
	base := t.TempDir()
	in.work, in.runDir = filepath.Join(base, "work"), filepath.Join(base, "run")
	for _, d := range []string{in.work, in.runDir, filepath.Join(in.work, "examples")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	yamls, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	if err != nil || len(yamls) == 0 {
		t.Fatalf("examples/*.yaml: %v", err)
	}
	for _, y := range yamls {
		data, err := os.ReadFile(y)
		if err != nil {
			t.Fatal(err)
		}
		dsts := []string{filepath.Join("examples", filepath.Base(y))}
		if filepath.Base(y) == "demo.yaml" {
			dsts = append(dsts, "demo.yaml")
		}
		for _, p := range dsts {
			if err := os.WriteFile(filepath.Join(in.work, p), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The other examples the pages use (examples/calico-leftovers.nft).
	others, err := filepath.Glob(filepath.Join("..", "examples", "*.nft"))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range others {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(in.work, "examples", filepath.Base(src)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if sc.felixSession {
		data := testutil.ReadFelixRecording(t, "real-felix-session.bin")
		if err := os.WriteFile(filepath.Join(in.work, "real-felix-session.bin"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := randomHex(3)
	in.nodeNS = "nftep-dc-" + id + "-" + sc.node
	in.alias(in.nodeNS, sc.node)
	sh := []string{
		"ip netns add " + in.nodeNS,
		"ip -n " + in.nodeNS + " link set lo up",
		"ip netns exec " + in.nodeNS + " sysctl -qw net.ipv4.ip_forward=1",
	}
	if sc.eth0 != "" {
		sh = append(sh,
			"ip -n "+in.nodeNS+" link add eth0 type veth peer name eth0p",
			"ip -n "+in.nodeNS+" addr add "+sc.eth0+" dev eth0",
			"ip -n "+in.nodeNS+" link set eth0p up",
			"ip -n "+in.nodeNS+" link set eth0 up")
	}
	for _, p := range sc.pods {
		real := "nftep-dc-" + id + "-" + p.name
		in.alias(real, p.name)
		sh = append(sh,
			"ip netns add "+real,
			"ip -n "+real+" link set lo up",
			fmt.Sprintf("ip -n %s link add %s address ee:ee:ee:ee:ee:ee type veth peer name eth0 address %s netns %s", in.nodeNS, p.iface, p.mac, real),
			fmt.Sprintf("ip -n %s addr add %s/32 dev eth0", real, p.ip),
			fmt.Sprintf("ip -n %s link set eth0 up", real),
			fmt.Sprintf("ip -n %s route add 169.254.1.1 dev eth0", real),
			fmt.Sprintf("ip -n %s route add default via 169.254.1.1 dev eth0", real),
			// As Calico's CNI plugin does: the gateway is the node's end.
			fmt.Sprintf("ip -n %s neigh add 169.254.1.1 lladdr ee:ee:ee:ee:ee:ee dev eth0 nud permanent", real),
			fmt.Sprintf("ip -n %s link set %s up", in.nodeNS, p.iface),
		)
	}
	in.namespaces = append([]string{in.nodeNS}, in.realPods()...)
	for _, c := range sh {
		if out, err := exec.Command("sh", "-c", c).CombinedOutput(); err != nil {
			in.close(t)
			t.Fatalf("scenario %s: %s: %v\n%s", name, c, err, out)
		}
	}
	// A veth is up (operstate) a moment after both ends are: nftep would
	// report its endpoint down before that.
	for _, p := range sc.pods {
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, _ := exec.Command("ip", "-n", in.nodeNS, "-o", "link", "show", p.iface).CombinedOutput()
			if strings.Contains(string(out), "state UP") {
				break
			}
			if time.Now().After(deadline) {
				in.close(t)
				t.Fatalf("scenario %s: %s not up: %s", name, p.iface, out)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if sc.serve {
		for _, p := range sc.pods {
			for _, port := range []int{8080, 9090} {
				if err := in.serve(in.real(p.name), p.name, p.ip, port); err != nil {
					in.close(t)
					t.Fatalf("scenario %s: %v", name, err)
				}
			}
		}
	}
	return in
}

func (in *instance) alias(real, alias string) { in.aliases[real] = alias }

func (in *instance) real(alias string) string {
	for r, a := range in.aliases {
		if a == alias {
			return r
		}
	}
	return alias
}

func (in *instance) realPods() []string {
	var out []string
	for r := range in.aliases {
		if r != in.nodeNS {
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// serve answers HTTP on ip:port inside the namespace ns.
func (in *instance) serve(ns, name, ip string, port int) error {
	h, err := netnsutil.Open(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	var ln net.Listener
	err = h.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port))
		return err
	})
	if err != nil {
		return fmt.Errorf("listen in %s: %w", name, err)
	}
	in.listeners = append(in.listeners, ln)
	msg := fmt.Sprintf("%s: hello on port %d\n", name, port)
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, msg) }))
	return nil
}

// aliasRE matches a scenario alias as a whole word of a command.
func aliasRE(alias string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^\w-])` + regexp.QuoteMeta(alias) + `($|[^\w-])`)
}

// commandTimeout bounds one documented command.
const commandTimeout = 60 * time.Second

// run runs one documented command and returns its output (stdout and
// stderr together) with real names turned back into their aliases.
func (in *instance) run(t *testing.T, cmd string) string {
	t.Helper()
	real := cmd
	for r, a := range in.aliases {
		// Twice: adjacent matches share the separator.
		for range 2 {
			real = aliasRE(a).ReplaceAllString(real, "${1}"+r+"${2}")
		}
	}
	// A private mount namespace with the scenario's run directory on
	// /run/nftep: the documented paths, and nothing in the host's.
	script := `mount --bind "$DOCS_RUN" /run/nftep && cd "$DOCS_WORK" && exec bash -c "$DOCS_CMD"`
	args := []string{"unshare", "--mount", "--propagation", "private", "--", "bash", "-c", script}
	if in.sc.inside {
		args = append([]string{"ip", "netns", "exec", in.nodeNS}, args...)
	}
	// A command that hangs (a documented wait for a log line that never
	// comes) fails this command with what it printed, instead of the whole
	// test binary at its timeout. The command's process group is killed,
	// so a daemon it left in the background does not hold the output open.
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, args[0], args[1:]...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error {
		// SIGQUIT first: a Go program it started prints its goroutines
		// (to a *.log file, as the examples redirect them) before dying.
		syscall.Kill(-c.Process.Pid, syscall.SIGQUIT)
		time.Sleep(time.Second)
		return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	c.WaitDelay = 5 * time.Second
	c.Env = []string{
		"PATH=" + in.bin + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + in.work, "LANG=C.UTF-8", "TZ=UTC",
		"DOCS_RUN=" + in.runDir, "DOCS_WORK=" + in.work, "DOCS_CMD=" + real,
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); ctx.Err() != nil {
		var logs strings.Builder
		files, _ := filepath.Glob(filepath.Join(in.work, "*.log"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			fmt.Fprintf(&logs, "--- %s:\n%s", filepath.Base(f), data)
		}
		t.Fatalf("$ %s: no end after %v (killed); its output:\n%s%s", cmd, commandTimeout, out.String(), logs.String())
	} else if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("$ %s: %v", cmd, err)
		}
	}
	s := out.String()
	for r, a := range in.aliases {
		s = strings.ReplaceAll(s, r, a)
	}
	return strings.ReplaceAll(s, in.work, ".")
}

// close removes the scenario's namespaces (with their veths, tables and
// routes) and stops its servers.
func (in *instance) close(t *testing.T) {
	// A daemon a page started (its pid in a *.pid file of the work
	// directory) and did not stop, because a command failed.
	pids, _ := filepath.Glob(filepath.Join(in.work, "*.pid"))
	for _, f := range pids {
		data, _ := os.ReadFile(f)
		var pid int
		if _, err := fmt.Sscan(string(data), &pid); err == nil && pid > 0 {
			if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.Signal(0)) == nil {
				p.Signal(syscall.SIGTERM)
				t.Errorf("daemon %d (%s) was still running at the end of the page", pid, filepath.Base(f))
			}
		}
	}
	for _, ln := range in.listeners {
		ln.Close()
	}
	for _, ns := range in.namespaces {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("remove namespace %s: %v %s", ns, err, out)
		}
	}
	in.namespaces = nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
