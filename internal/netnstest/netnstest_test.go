package netnstest_test

import (
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/internal/netnstest"
)

// TestVethUDPAndCleanup joins two namespaces with a veth pair, sends a UDP
// datagram across, and then checks that cleanup left no namespace, mount or
// link behind.
func TestVethUDPAndCleanup(t *testing.T) {
	netnstest.RequireRoot(t)
	var names []string
	t.Run("exchange", func(t *testing.T) {
		a, b := netnstest.New(t), netnstest.New(t)
		names = []string{a.Name, b.Name}
		netnstest.Veth(t, a, "kit-a", b, "kit-b")
		a.AddAddr(t, "kit-a", "10.99.0.1/24")
		b.AddAddr(t, "kit-b", "10.99.0.2/24")

		var server net.PacketConn
		if err := b.Do(func() (err error) {
			server, err = net.ListenPacket("udp4", "10.99.0.2:0")
			return err
		}); err != nil {
			t.Fatalf("listen in %s: %v", b.Name, err)
		}
		defer server.Close()

		var client net.Conn
		if err := a.Do(func() (err error) {
			client, err = net.Dial("udp4", server.LocalAddr().String())
			return err
		}); err != nil {
			t.Fatalf("dial from %s: %v", a.Name, err)
		}
		defer client.Close()

		if _, err := client.Write([]byte("hello")); err != nil {
			t.Fatalf("send: %v", err)
		}
		_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, from, err := server.ReadFrom(buf)
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		if got := string(buf[:n]); got != "hello" {
			t.Errorf("received %q, want %q", got, "hello")
		}
		if ip := from.(*net.UDPAddr).IP.String(); ip != "10.99.0.1" {
			t.Errorf("datagram from %s, want 10.99.0.1", ip)
		}
		// The test's own thread must still be in the original namespace:
		// the veth is not visible here.
		if _, err := netlink.LinkByName("kit-a"); err == nil {
			t.Errorf("veth kit-a is visible from the test's own namespace")
		}
	})
	if len(names) != 2 {
		t.Fatal("subtest did not create its namespaces")
	}
	for _, name := range names {
		left, err := netnstest.Leftovers(name)
		if err != nil {
			t.Fatalf("look for leftovers of %s: %v", name, err)
		}
		if len(left) > 0 {
			t.Errorf("namespace %s left behind: %v", name, left)
		}
	}
	for _, link := range []string{"kit-a", "kit-b"} {
		if _, err := netlink.LinkByName(link); err == nil {
			t.Errorf("veth %s left behind in the test's namespace", link)
		}
	}
}

func TestDoRunsInsideNamespace(t *testing.T) {
	ns := netnstest.New(t)
	netnstest.Veth(t, ns, "kit-c", ns, "kit-d")
	if err := ns.Do(func() error {
		_, err := netlink.LinkByName("kit-c")
		return err
	}); err != nil {
		t.Fatalf("inside %s, kit-c is not visible: %v", ns.Name, err)
	}
	if out := ns.Run(t, "ip", "-o", "link", "show", "kit-d"); out == "" {
		t.Errorf("ip netns exec shows no kit-d")
	}
}

// TestIPv6AddressUsableAtOnce checks that AddAddr skips duplicate address
// detection: a datagram to a just-added IPv6 address is delivered without
// waiting for DAD.
func TestIPv6AddressUsableAtOnce(t *testing.T) {
	a, b := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, a, "kit6-a", b, "kit6-b")
	a.AddAddr(t, "kit6-a", "fd00:99::1/64")
	b.AddAddr(t, "kit6-b", "fd00:99::2/64")
	var server net.PacketConn
	if err := b.Do(func() (err error) {
		server, err = net.ListenPacket("udp6", "[fd00:99::2]:0")
		return err
	}); err != nil {
		t.Fatalf("listen on a fresh IPv6 address (still tentative?): %v", err)
	}
	defer server.Close()
	var client net.Conn
	if err := a.Do(func() (err error) {
		client, err = net.Dial("udp6", server.LocalAddr().String())
		return err
	}); err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer client.Close()
	if _, err := client.Write([]byte("v6")); err != nil {
		t.Fatalf("send: %v", err)
	}
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8)
	if _, _, err := server.ReadFrom(buf); err != nil {
		t.Fatalf("receive: %v", err)
	}
}
