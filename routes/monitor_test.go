package routes

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// recorder collects the monitor's updates as text lines.
type recorder struct{ lines []string }

func (r *recorder) add(u any) { r.lines = append(r.lines, updateText(u)) }

func (r *recorder) take() string {
	s := strings.Join(r.lines, "\n")
	r.lines = nil
	return s
}

// updateText renders an update as one line: "state cali1 up 5" or
// "addrs cali1 [10.0.0.1]" ("addrs cali1 nil" when gone).
func updateText(u any) string {
	switch u := u.(type) {
	case InterfaceStateUpdate:
		return fmt.Sprintf("state %s %s %d", u.Name, u.State, u.Index)
	case InterfaceAddrsUpdate:
		if u.Addrs == nil {
			return "addrs " + u.Name + " nil"
		}
		return fmt.Sprintf("addrs %s %v", u.Name, u.Addrs)
	}
	return fmt.Sprintf("unexpected %T", u)
}

func dedent(s string) string { return strings.TrimSpace(strings.ReplaceAll(s, "\t", "")) }

func checkUpdates(t *testing.T, rec *recorder, want string) {
	t.Helper()
	if diff := cmp.Diff(dedent(want), rec.take()); diff != "" {
		t.Errorf("updates (-want +got):\n%s", diff)
	}
}

func addrUpdate(m *Monitor, index int, cidr string, add bool) {
	m.onAddrUpdate(index, *prefixToIPNet(netip.MustParsePrefix(cidr)), add)
}

func TestMonitorOrder(t *testing.T) {
	rec := &recorder{}
	m := NewMonitor(MonitorConfig{}, rec.add)

	// 1. An address arrives (on its own socket) before its link: it is
	// held and reported with the link.
	addrUpdate(m, 5, "10.0.0.1/24", true)
	checkUpdates(t, rec, "")
	m.setLink(5, "eth0", true, false)
	checkUpdates(t, rec, `
		state eth0 down 5
		addrs eth0 [10.0.0.1]`)

	// 2. Up, then the same again: one update.
	m.setLink(5, "eth0", true, true)
	m.setLink(5, "eth0", true, true)
	checkUpdates(t, rec, "state eth0 up 5")

	// 3. Addresses come and go; a duplicate changes nothing.
	addrUpdate(m, 5, "2001:db8::1/64", true)
	addrUpdate(m, 5, "2001:db8::1/64", true)
	addrUpdate(m, 5, "10.0.0.1/24", false)
	checkUpdates(t, rec, `
		addrs eth0 [10.0.0.1 2001:db8::1]
		addrs eth0 [2001:db8::1]`)

	// 4. A link with no addresses reports an empty, non-nil set.
	m.setLink(6, "cali1", true, true)
	checkUpdates(t, rec, `
		state cali1 up 6
		addrs cali1 []`)

	// 5. Rename: the old name is gone, the new one appears with the addresses.
	m.setLink(5, "uplink", true, true)
	checkUpdates(t, rec, `
		state eth0 gone 5
		addrs eth0 nil
		state uplink up 5
		addrs uplink [2001:db8::1]`)

	// 6. Deletion.
	m.setLink(5, "uplink", false, false)
	checkUpdates(t, rec, `
		state uplink gone 5
		addrs uplink nil`)

	// 7. The name reappears with a new index while the old link's
	// deletion was missed: the old one is reported gone first.
	m.setLink(7, "cali1", true, false)
	checkUpdates(t, rec, `
		state cali1 gone 6
		addrs cali1 nil
		state cali1 down 7
		addrs cali1 []`)
}

// fakeLister serves a relist.
type fakeLister struct {
	links []netlink.Link
	addrs []netlink.Addr
}

func (f *fakeLister) LinkList() ([]netlink.Link, error) { return f.links, nil }
func (f *fakeLister) AddrList(netlink.Link, int) ([]netlink.Addr, error) {
	return f.addrs, nil
}

func fakeLink(index int, name string, up bool) netlink.Link {
	d := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index, Name: name}}
	if up {
		d.RawFlags = unix.IFF_UP | unix.IFF_RUNNING
	}
	return d
}

func fakeAddr(index int, cidr string) netlink.Addr {
	ip, n, _ := net.ParseCIDR(cidr)
	n.IP = ip
	return netlink.Addr{IPNet: n, LinkIndex: index}
}

// TestMonitorRelistRecovers: events were lost (a deletion, a rename, an
// address, a state change); a relist reports exactly the difference.
func TestMonitorRelistRecovers(t *testing.T) {
	rec := &recorder{}
	m := NewMonitor(MonitorConfig{}, rec.add)
	m.setLink(1, "lo", true, true)
	m.setLink(5, "cali1", true, true)
	m.setLink(6, "cali2", true, true)
	m.setLink(7, "tmp7", true, false)
	addrUpdate(m, 5, "10.0.0.1/32", true)
	rec.take()

	m.relist(&fakeLister{
		links: []netlink.Link{
			fakeLink(1, "lo", true),
			fakeLink(5, "cali1", false),
			fakeLink(7, "cali7", true),
			fakeLink(9, "cali9", true),
		},
		addrs: []netlink.Addr{
			fakeAddr(5, "10.0.0.1/32"),
			fakeAddr(5, "10.0.0.2/32"),
			fakeAddr(9, "10.0.0.9/32"),
		},
	})
	checkUpdates(t, rec, `
		state cali2 gone 6
		addrs cali2 nil
		state cali1 down 5
		addrs cali1 [10.0.0.1 10.0.0.2]
		state tmp7 gone 7
		addrs tmp7 nil
		state cali7 up 7
		addrs cali7 []
		state cali9 up 9
		addrs cali9 [10.0.0.9]`)

	// Relisting the same state again reports nothing.
	m.relist(&fakeLister{
		links: []netlink.Link{fakeLink(1, "lo", true), fakeLink(5, "cali1", false), fakeLink(7, "cali7", true), fakeLink(9, "cali9", true)},
		addrs: []netlink.Addr{fakeAddr(5, "10.0.0.1/32"), fakeAddr(5, "10.0.0.2/32"), fakeAddr(9, "10.0.0.9/32")},
	})
	checkUpdates(t, rec, "")
}

func TestMonitorIgnoresBridgePortEvents(t *testing.T) {
	rec := &recorder{}
	m := NewMonitor(MonitorConfig{}, rec.add)
	m.setLink(5, "eth0", true, true)
	rec.take()
	u := netlink.LinkUpdate{Link: fakeLink(5, "eth0", true)}
	u.Header.Type = unix.RTM_DELLINK
	u.IfInfomsg.Family = unix.AF_BRIDGE
	m.onLinkUpdate(u)
	checkUpdates(t, rec, "")
}

// interruptedLister fails its first dumps of each kind with
// ErrDumpInterrupted, as the kernel does when the table changes mid-dump.
type interruptedLister struct {
	fakeLister
	linkFails, addrFails int
}

func (f *interruptedLister) LinkList() ([]netlink.Link, error) {
	if f.linkFails > 0 {
		f.linkFails--
		return f.links[:1], netlink.ErrDumpInterrupted
	}
	return f.links, nil
}

func (f *interruptedLister) AddrList(l netlink.Link, fam int) ([]netlink.Addr, error) {
	if f.addrFails > 0 {
		f.addrFails--
		return nil, netlink.ErrDumpInterrupted
	}
	return f.addrs, nil
}

// TestListInterfaces: the listing is what a Monitor first reports, by
// index, and an interrupted dump is read again rather than trusted.
func TestListInterfaces(t *testing.T) {
	h := &interruptedLister{
		fakeLister: fakeLister{
			links: []netlink.Link{fakeLink(5, "cali1", false), fakeLink(1, "lo", true)},
			addrs: []netlink.Addr{fakeAddr(1, "::1/128"), fakeAddr(1, "127.0.0.1/8"), fakeAddr(1, "127.0.0.1/32")},
		},
		linkFails: 2, addrFails: 1,
	}
	got, err := ListInterfaces(h)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	for _, u := range got {
		rec.add(u)
	}
	checkUpdates(t, rec, `
		state lo up 1
		addrs lo [127.0.0.1 ::1]
		state cali1 down 5
		addrs cali1 []`)

	h.linkFails = dumpRetries
	if _, err := ListInterfaces(h); !errors.Is(err, netlink.ErrDumpInterrupted) {
		t.Errorf("after %d interrupted dumps: %v, want ErrDumpInterrupted", dumpRetries, err)
	}
}
