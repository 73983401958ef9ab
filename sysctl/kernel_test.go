package sysctl_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/sysctl"
)

// TestKernelCase23 configures a veth inside a fresh namespace and reads the
// values of acceptance case 23 (docs/acceptance-cases.md) back from
// /proc/sys inside that namespace; then
// toggles spoofing and watches rp_filter follow.
func TestKernelCase23(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali12345-ab", peer, "eth0")
	w := sysctl.NewProcWriter("", sysctl.InNamespace(ns.Do))

	// The namespace's default rp_filter is whatever the kernel gave it; pin
	// it to 1 (in the namespace only) so that the values match case 23.
	if err := w.Set(sysctl.DefaultRPFilterPath, "1"); err != nil {
		t.Fatalf("set the default rp_filter in the namespace: %v", err)
	}
	s := sysctl.NewInterfaces(w, sysctl.Options{IPv4: true, IPv6: true})
	s.SetInterface("cali12345-ab", false)
	s.OnIfaceStateChanged("cali12345-ab", true)
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply: %v", errs)
	}

	read := func(path string) string {
		t.Helper()
		// Read with cat inside the namespace, independently of the writer.
		return strings.TrimSpace(ns.Run(t, "cat", path))
	}
	want := map[string]string{
		"/proc/sys/net/ipv6/conf/cali12345-ab/accept_ra":      "0",
		"/proc/sys/net/ipv4/conf/cali12345-ab/forwarding":     "1",
		"/proc/sys/net/ipv4/conf/cali12345-ab/route_localnet": "1",
		"/proc/sys/net/ipv4/conf/cali12345-ab/rp_filter":      "1",
		"/proc/sys/net/ipv4/conf/cali12345-ab/proxy_arp":      "1",
		"/proc/sys/net/ipv4/neigh/cali12345-ab/proxy_delay":   "0",
		"/proc/sys/net/ipv6/conf/cali12345-ab/proxy_ndp":      "1",
		"/proc/sys/net/ipv6/conf/cali12345-ab/forwarding":     "1",
	}
	for path, v := range want {
		if got := read(path); got != v {
			t.Errorf("%s = %q, want %q", path, got, v)
		}
	}

	const rp = "/proc/sys/net/ipv4/conf/cali12345-ab/rp_filter"
	s.SetInterface("cali12345-ab", true)
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply with spoofing: %v", errs)
	}
	if got := read(rp); got != "0" {
		t.Errorf("with spoofing allowed rp_filter = %q, want 0", got)
	}
	s.SetInterface("cali12345-ab", false)
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply without spoofing: %v", errs)
	}
	if got := read(rp); got != "1" {
		t.Errorf("with spoofing cleared rp_filter = %q, want 1", got)
	}

	// The host never saw any of it: the interface has no conf dir here.
	if _, err := os.Stat("/proc/sys/net/ipv4/conf/cali12345-ab"); err == nil {
		t.Errorf("cali12345-ab is visible in the host's /proc/sys")
	}
}

// TestKernelMissingInterface shows the existence check against the real
// /proc/sys of a namespace: writes for an interface that does not exist fail
// with ErrInterfaceGone and succeed once it is created.
func TestKernelMissingInterface(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	w := sysctl.NewProcWriter("", sysctl.InNamespace(ns.Do))
	s := sysctl.NewInterfaces(w, sysctl.Options{IPv4: true, IPv6: true, DefaultRPFilter: "1"})
	s.SetInterface("cali1", false)
	s.OnIfaceStateChanged("cali1", true)
	if err := s.Apply()["cali1"]; !errors.Is(err, sysctl.ErrInterfaceGone) {
		t.Fatalf("Apply for a missing interface: %v, want ErrInterfaceGone", err)
	}
	netnstest.Veth(t, ns, "cali1", peer, "eth0")
	if errs := s.Apply(); errs != nil {
		t.Fatalf("Apply after the interface appeared: %v", errs)
	}
	if got := strings.TrimSpace(ns.Run(t, "cat", "/proc/sys/net/ipv4/conf/cali1/proxy_arp")); got != "1" {
		t.Errorf("proxy_arp = %q, want 1", got)
	}
}
