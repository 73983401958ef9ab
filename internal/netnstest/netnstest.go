// Package netnstest gives kernel tests a network namespace of their own.
//
// Every namespace is named (so `ip netns exec` and `nft` can be pointed at it
// while a test is paused), is created from a throwaway locked OS thread that
// is switched back before it is released, and is removed by t.Cleanup even
// when the test fails. Handles for google/nftables and vishvananda/netlink are
// bound to the namespace by file descriptor, so no test goroutine ever runs on
// a thread that sits in a foreign namespace.
//
// Kernel tests need root (CAP_SYS_ADMIN for unshare and the bind mount,
// CAP_NET_ADMIN for links and nf_tables). Without it they skip with a reason,
// unless the CI environment variable is set: then they fail, so that CI can
// never pass by skipping.
package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/netnsutil"
)

// NamePrefix starts the name of every namespace this package creates, so that
// leftovers (which Cleanup should make impossible) are easy to spot and list.
const NamePrefix = "nftep-t-"

// bindMountDir is where iproute2 and vishvananda/netns keep named namespaces.
const bindMountDir = "/run/netns"

// RequireRoot skips t in -short mode (`make test-unit`) and when the process
// cannot create namespaces; in the latter case it fails t instead when the CI
// environment variable is set.
func RequireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("kernel test: skipped in -short mode")
	}
	if os.Geteuid() == 0 {
		return
	}
	const why = "kernel test needs root (network namespaces, nf_tables); run `sudo make test`"
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: CI is set, so refusing to skip", why)
	}
	t.Skip(why)
}

// NS is a named network namespace owned by one test: a netnsutil.NS (the
// same code the binaries use) whose removal is tied to the test.
type NS struct {
	// Name is the namespace's name under /run/netns.
	Name string

	u  *netnsutil.NS
	nl *netlink.Handle
}

// New creates a fresh named network namespace with its loopback up and
// registers its removal with t.Cleanup.
func New(t testing.TB) *NS {
	t.Helper()
	RequireRoot(t)

	name := NamePrefix + randomHex(6)
	u, err := netnsutil.Create(name)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := u.Delete(); err != nil {
			t.Errorf("remove network namespace %q: %v", name, err)
		}
	})
	nl, err := u.Netlink()
	if err != nil {
		t.Fatalf("netlink handle in namespace %q: %v", name, err)
	}
	return &NS{Name: name, u: u, nl: nl}
}

// Handle returns the namespace's handle (an open file descriptor).
func (ns *NS) Handle() netns.NsHandle { return ns.u.Handle() }

// Fd returns the namespace's file descriptor, for nftables.WithNetNSFd and
// similar options.
func (ns *NS) Fd() int { return ns.u.Fd() }

// Netlink returns a rtnetlink handle bound to the namespace. It is closed by
// the namespace's cleanup.
func (ns *NS) Netlink() *netlink.Handle { return ns.nl }

// NFTConn returns a non-lasting google/nftables connection into the
// namespace, with socket buffers large enough for test-sized batches.
func (ns *NS) NFTConn(t testing.TB) *nftables.Conn {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(ns.Fd()), nftables.WithSockOptions(func(c *mdnetlink.Conn) error {
		if err := c.SetReadBuffer(8 << 20); err != nil {
			return err
		}
		return c.SetWriteBuffer(8 << 20)
	}))
	if err != nil {
		t.Fatalf("nftables connection in namespace %q: %v", ns.Name, err)
	}
	return c
}

// Do runs fn on an OS thread switched into the namespace. Sockets that fn
// opens stay in the namespace after Do returns, so tests can create a
// listener here and use it from their own goroutine.
func (ns *NS) Do(fn func() error) error { return ns.u.Do(fn) }

// Run runs a command inside the namespace (`ip netns exec <name> …`) and
// returns its combined output. It fails the test if the command fails.
func (ns *NS) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := ns.Output(name, args...)
	if err != nil {
		t.Fatalf("%s %s in namespace %q: %v\n%s", name, strings.Join(args, " "), ns.Name, err, out)
	}
	return out
}

// Output runs a command inside the namespace and returns its combined output
// and error, for tests that expect a command to fail.
func (ns *NS) Output(name string, args ...string) (string, error) {
	full := append([]string{"netns", "exec", ns.Name, name}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	return string(out), err
}

// Link returns the link called name in the namespace.
func (ns *NS) Link(t testing.TB, name string) netlink.Link {
	t.Helper()
	l, err := ns.nl.LinkByName(name)
	if err != nil {
		t.Fatalf("namespace %q: link %q: %v", ns.Name, name, err)
	}
	return l
}

// AddAddr assigns cidr (e.g. "10.0.0.1/24") to the link called ifname.
func (ns *NS) AddAddr(t testing.TB, ifname, cidr string) {
	t.Helper()
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatalf("parse address %q: %v", cidr, err)
	}
	if isIPv6(addr.IP) {
		// Skip duplicate address detection so the address is usable at once.
		addr.Flags |= unix.IFA_F_NODAD
	}
	if err := ns.nl.AddrAdd(ns.Link(t, ifname), addr); err != nil {
		t.Fatalf("namespace %q: add address %s to %q: %v", ns.Name, cidr, ifname, err)
	}
}

// AddRoute adds a route to dst (a CIDR) through the link called ifname, with
// gateway gw when it is not empty.
func (ns *NS) AddRoute(t testing.TB, dst, ifname, gw string) {
	t.Helper()
	_, ipnet, err := net.ParseCIDR(dst)
	if err != nil {
		t.Fatalf("parse route destination %q: %v", dst, err)
	}
	r := &netlink.Route{Dst: ipnet, LinkIndex: ns.Link(t, ifname).Attrs().Index}
	if gw != "" {
		r.Gw = net.ParseIP(gw)
		if r.Gw == nil {
			t.Fatalf("parse gateway %q", gw)
		}
	} else {
		r.Scope = netlink.SCOPE_LINK
	}
	if err := ns.nl.RouteAdd(r); err != nil {
		t.Fatalf("namespace %q: add route %s dev %s: %v", ns.Name, dst, ifname, err)
	}
}

// Veth creates a veth pair with end aName in namespace a and end bName in
// namespace b, and sets both ends up. The pair disappears with either
// namespace.
func Veth(t testing.TB, a *NS, aName string, b *NS, bName string) {
	t.Helper()
	if err := netnsutil.Veth(a.u, aName, b.u, bName, nil); err != nil {
		t.Fatalf("%v", err)
	}
}

// Leftovers reports what is left of the namespace called name: its bind-mount
// file under /run/netns and any line of this process's mount table that
// mentions it. Tests use it to prove that cleanup removed everything.
func Leftovers(name string) ([]string, error) {
	var left []string
	path := filepath.Join(bindMountDir, name)
	if _, err := os.Lstat(path); err == nil {
		left = append(left, path)
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, path) {
			left = append(left, "mount: "+line)
		}
	}
	return left, nil
}

func isIPv6(ip net.IP) bool { return ip.To4() == nil }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
