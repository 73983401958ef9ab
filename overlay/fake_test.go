package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// fakeNetlink is an in-memory kernel for Devices: links with their
// addresses, neighbours and FDB entries. Without ipip, it refuses ipip
// links as a kernel without CONFIG_NET_IPIP does (EOPNOTSUPP).
type fakeNetlink struct {
	links  map[string]netlink.Link
	addrs  map[string][]netlink.Addr
	neighs map[int][]netlink.Neigh
	next   int
	ipip   bool
	calls  []string
}

func newFakeNetlink(ipip bool) *fakeNetlink {
	f := &fakeNetlink{links: map[string]netlink.Link{}, addrs: map[string][]netlink.Addr{}, neighs: map[int][]netlink.Neigh{}, next: 1, ipip: ipip}
	f.addLink(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: "lo", MTU: 65536}})
	f.addLink(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0", MTU: 1500}})
	return f
}

func (f *fakeNetlink) addLink(l netlink.Link) {
	a := l.Attrs()
	a.Index = f.next
	f.next++
	a.Flags |= net.FlagUp
	a.RawFlags |= unix.IFF_UP | unix.IFF_RUNNING
	a.OperState = netlink.OperUp
	f.links[a.Name] = l
}

func (f *fakeNetlink) byIndex(i int) netlink.Link {
	for _, l := range f.links {
		if l.Attrs().Index == i {
			return l
		}
	}
	return nil
}

func (f *fakeNetlink) LinkList() ([]netlink.Link, error) {
	var out []netlink.Link
	for _, l := range f.links {
		out = append(out, l)
	}
	return out, nil
}

func (f *fakeNetlink) LinkByName(name string) (netlink.Link, error) {
	if l, ok := f.links[name]; ok {
		return l, nil
	}
	return nil, netlink.LinkNotFoundError{}
}

func (f *fakeNetlink) LinkAdd(l netlink.Link) error {
	f.calls = append(f.calls, "link add "+l.Attrs().Name+" type "+l.Type())
	if _, ok := f.links[l.Attrs().Name]; ok {
		return unix.EEXIST
	}
	if l.Type() == "ipip" && !f.ipip {
		return unix.EOPNOTSUPP
	}
	// Created down, with the default MTU of its kind.
	if l.Attrs().MTU == 0 {
		l.Attrs().MTU = 1480
	}
	f.addLink(l)
	l.Attrs().Flags &^= net.FlagUp
	l.Attrs().RawFlags &^= unix.IFF_UP | unix.IFF_RUNNING
	return nil
}

func (f *fakeNetlink) LinkDel(l netlink.Link) error {
	f.calls = append(f.calls, "link del "+l.Attrs().Name)
	delete(f.links, l.Attrs().Name)
	delete(f.addrs, l.Attrs().Name)
	delete(f.neighs, l.Attrs().Index)
	return nil
}

func (f *fakeNetlink) LinkSetMTU(l netlink.Link, mtu int) error {
	f.calls = append(f.calls, fmt.Sprintf("link set %s mtu %d", l.Attrs().Name, mtu))
	f.links[l.Attrs().Name].Attrs().MTU = mtu
	return nil
}

func (f *fakeNetlink) LinkSetUp(l netlink.Link) error {
	f.calls = append(f.calls, "link set "+l.Attrs().Name+" up")
	a := f.links[l.Attrs().Name].Attrs()
	a.Flags |= net.FlagUp
	a.RawFlags |= unix.IFF_UP | unix.IFF_RUNNING
	return nil
}

func (f *fakeNetlink) AddrList(l netlink.Link, family int) ([]netlink.Addr, error) {
	var out []netlink.Addr
	for _, a := range f.addrs[l.Attrs().Name] {
		if (a.IP.To4() != nil) == (family == netlink.FAMILY_V4) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (f *fakeNetlink) AddrAdd(l netlink.Link, a *netlink.Addr) error {
	f.calls = append(f.calls, "addr add "+a.IPNet.String()+" dev "+l.Attrs().Name)
	f.addrs[l.Attrs().Name] = append(f.addrs[l.Attrs().Name], *a)
	return nil
}

func (f *fakeNetlink) AddrDel(l netlink.Link, a *netlink.Addr) error {
	f.calls = append(f.calls, "addr del "+a.IPNet.String()+" dev "+l.Attrs().Name)
	f.addrs[l.Attrs().Name] = slices.DeleteFunc(f.addrs[l.Attrs().Name], func(h netlink.Addr) bool { return h.IPNet.String() == a.IPNet.String() })
	return nil
}

func (f *fakeNetlink) NeighList(index, family int) ([]netlink.Neigh, error) {
	var out []netlink.Neigh
	for _, n := range f.neighs[index] {
		if n.Family == family {
			out = append(out, n)
		}
	}
	return out, nil
}

func neighKey(n netlink.Neigh) string {
	if n.Family == unix.AF_BRIDGE {
		return "fdb " + n.HardwareAddr.String()
	}
	return "neigh " + n.IP.String()
}

func (f *fakeNetlink) NeighSet(n *netlink.Neigh) error {
	f.calls = append(f.calls, "set "+neighKey(*n))
	if f.byIndex(n.LinkIndex) == nil {
		return unix.ENODEV
	}
	f.neighs[n.LinkIndex] = slices.DeleteFunc(f.neighs[n.LinkIndex], func(h netlink.Neigh) bool { return neighKey(h) == neighKey(*n) })
	f.neighs[n.LinkIndex] = append(f.neighs[n.LinkIndex], *n)
	return nil
}

func (f *fakeNetlink) NeighDel(n *netlink.Neigh) error {
	f.calls = append(f.calls, "del "+neighKey(*n))
	before := len(f.neighs[n.LinkIndex])
	f.neighs[n.LinkIndex] = slices.DeleteFunc(f.neighs[n.LinkIndex], func(h netlink.Neigh) bool { return neighKey(h) == neighKey(*n) })
	if len(f.neighs[n.LinkIndex]) == before {
		return unix.ENOENT
	}
	return nil
}

// takeCalls returns the calls since the last take, sorted.
func (f *fakeNetlink) takeCalls() []string {
	c := f.calls
	f.calls = nil
	sort.Strings(c)
	return c
}

// fakeRoutes records what the manager sets.
type fakeRoutes struct{ by map[string][]routes.Target }

func (r *fakeRoutes) SetRoutes(iface string, ts []routes.Target) {
	if len(ts) == 0 {
		delete(r.by, iface)
		return
	}
	r.by[iface] = ts
}

// lines renders every target in `ip route` syntax, sorted.
func (r *fakeRoutes) lines() []string {
	var out []string
	for iface, ts := range r.by {
		for _, t := range ts {
			out = append(out, routeText(iface, t))
		}
	}
	sort.Strings(out)
	return out
}

// recording returns the messages of a recording of
// internal/testutil/testdata/felix/two-node.
func recording(t *testing.T, name string) []*proto.ToDataplane {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "internal", "testutil", "testdata", "felix", "two-node", name))
	require.NoError(t, err)
	r := proto.NewReader(bytes.NewReader(data))
	var out []*proto.ToDataplane
	for {
		m, err := r.ReadToDataplane()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, m)
	}
}

// payload returns a ToDataplane's message.
func payload(m *proto.ToDataplane) any {
	v := m.ProtoReflect()
	od := v.Descriptor().Oneofs().ByName("payload")
	fd := v.WhichOneof(od)
	if fd == nil {
		return nil
	}
	return v.Get(fd).Message().Interface()
}

// ifaceAddrs is what the interface monitor reports of node1's eth0.
func ifaceAddrs(addrs ...string) routes.InterfaceAddrsUpdate {
	u := routes.InterfaceAddrsUpdate{Name: "eth0"}
	for _, a := range addrs {
		u.Addrs = append(u.Addrs, netip.MustParseAddr(a))
	}
	return u
}

func configOf(msgs []*proto.ToDataplane) map[string]string {
	for _, m := range msgs {
		if c := m.GetConfigUpdate(); c != nil {
			return c.GetConfig()
		}
	}
	return nil
}

func testVXLAN(name string) *netlink.Vxlan {
	return &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: 1450}, VxlanId: 1, Port: 4789}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
