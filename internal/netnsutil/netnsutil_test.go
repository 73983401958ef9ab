package netnsutil_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
)

// TestCreateVethDoDelete builds two namespaces joined by a veth, talks
// across it from inside each, and checks that Delete leaves nothing.
func TestCreateVethDoDelete(t *testing.T) {
	netnstest.RequireRoot(t)
	a, err := netnsutil.Create(fmt.Sprintf("nftep-t-nsu-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Delete()
	b, err := netnsutil.Create(a.Name + "-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Delete()
	if _, err := netnsutil.Create(a.Name); err == nil {
		t.Errorf("Create of an existing name succeeded")
	}
	mac, _ := net.ParseMAC("02:00:00:00:00:02")
	if err := netnsutil.Veth(a, "va", b, "vb", mac); err != nil {
		t.Fatal(err)
	}
	nl, err := b.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	l, err := nl.LinkByName("vb")
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().HardwareAddr.String() != mac.String() {
		t.Errorf("vb MAC = %s, want %s", l.Attrs().HardwareAddr, mac)
	}
	// /proc/sys/net shows the namespace of the thread inside Do.
	var fwd []byte
	if err := a.Do(func() (err error) {
		if err := os.WriteFile("/proc/sys/net/ipv4/conf/va/forwarding", []byte("1"), 0); err != nil {
			return err
		}
		fwd, err = os.ReadFile("/proc/sys/net/ipv4/conf/va/forwarding")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(fwd)) != "1" {
		t.Errorf("forwarding of va = %q", fwd)
	}
	if _, err := os.Stat("/proc/sys/net/ipv4/conf/va"); err == nil {
		t.Errorf("va is visible from the test's own namespace")
	}
	names, err := netnsutil.List(a.Name)
	if err != nil || len(names) != 2 {
		t.Errorf("netnsutil.List(%q) = %v, %v; want both namespaces", a.Name, names, err)
	}
	if err := b.Delete(); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{a.Name, a.Name + "-b"} {
		if netnsutil.Exists(n) {
			t.Errorf("%s exists after Delete", n)
		}
	}
	if err := a.Delete(); err != nil {
		t.Errorf("a second Delete: %v", err)
	}
}

// TestClosedNamespaceIsNotTheHost: after Close, a named namespace's handle
// must not act on the caller's own namespace (the host), as a handle of -1
// would: Netlink and Do fail, and Fd is no descriptor.
func TestClosedNamespaceIsNotTheHost(t *testing.T) {
	netnstest.RequireRoot(t)
	ns, err := netnsutil.Create(fmt.Sprintf("nftep-t-nsc-%d", os.Getpid()))
	require.NoError(t, err)
	defer ns.Delete() // removes the named namespace after Close too
	require.NoError(t, ns.Close())
	require.NoError(t, ns.Close(), "a second Close is harmless")

	assert.False(t, ns.IsCurrent(), "a closed namespace is not the caller's")
	assert.NotEqual(t, -1, ns.Fd())
	_, err = ns.Netlink()
	assert.ErrorContains(t, err, "closed")
	ran := false
	assert.ErrorContains(t, ns.Do(func() error { ran = true; return nil }), "closed")
	assert.False(t, ran, "Do ran its function after Close")
}
