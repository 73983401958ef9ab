package overlay

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/routes"
)

// Netlink is the part of *netlink.Handle that Devices uses; tests pass a
// fake.
type Netlink interface {
	LinkList() ([]netlink.Link, error)
	LinkByName(name string) (netlink.Link, error)
	LinkAdd(link netlink.Link) error
	LinkDel(link netlink.Link) error
	LinkSetMTU(link netlink.Link, mtu int) error
	LinkSetUp(link netlink.Link) error
	AddrList(link netlink.Link, family int) ([]netlink.Addr, error)
	AddrAdd(link netlink.Link, addr *netlink.Addr) error
	AddrDel(link netlink.Link, addr *netlink.Addr) error
	NeighList(linkIndex, family int) ([]netlink.Neigh, error)
	NeighSet(neigh *netlink.Neigh) error
	NeighDel(neigh *netlink.Neigh) error
}

var _ Netlink = (*netlink.Handle)(nil)

// DevicesConfig configures Devices.
type DevicesConfig struct {
	// Netlink is the handle to program through (it decides the network
	// namespace).
	Netlink Netlink
	// MTUFile is where the pod MTU is written (Felix's
	// /var/lib/calico/mtu, which the Calico CNI plugin reads); empty
	// writes none.
	MTUFile string
	// MTUIfacePattern selects the interfaces of the host MTU; empty means
	// DefaultMTUIfacePattern.
	MTUIfacePattern string
	// ResyncInterval is the period of full reads (Felix's
	// RouteRefreshInterval); 0 or negative: none.
	ResyncInterval time.Duration
	// OnLink is told about each device Apply created or found, so that
	// the route table knows its index before the routes on it are
	// programmed; nil tells nobody.
	OnLink func(name string, index int, state routes.IfaceState)
	// OnProblem is told once about each feature the kernel lacks
	// ("ipip"); nil tells nobody.
	OnProblem func(feature, detail string)
	Logger    *slog.Logger
}

// Devices programs the tunnel devices, the permanent neighbours and FDB
// entries of remote VTEPs, and the MTU file, from the State the Manager
// computed. Apply does the work: only after a change of the State, a
// kernel event that disagrees with it (see OnKernelEvent), a Check, or at
// a resync; otherwise it reads nothing. Safe for concurrent use.
type Devices struct {
	mu  sync.Mutex
	cfg DevicesConfig
	nl  Netlink
	log *slog.Logger
	pat *regexp.Regexp

	want State
	// dirty: Apply has work; lastResync: when it last read everything.
	dirty      bool
	lastResync time.Time
	hostMTU    int
	// mtuChanged: a read found another host MTU than the last one, until
	// HostMTUChanged reports it.
	mtuChanged bool
	mtuWritten string
	// index of each device as last seen (0: absent).
	index map[string]int
	// problems holds the missing kernel features, reported once.
	problems map[string]string
	// ipipDown: tunl0 cannot be created here; not retried before the next
	// resync.
	ipipDown bool
}

// NewDevices returns Devices for cfg.
func NewDevices(cfg DevicesConfig) *Devices {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pat := cfg.MTUIfacePattern
	if pat == "" {
		pat = DefaultMTUIfacePattern
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		re = regexp.MustCompile(DefaultMTUIfacePattern)
	}
	return &Devices{cfg: cfg, nl: cfg.Netlink, log: log, pat: re, index: map[string]int{}, problems: map[string]string{}}
}

// SetDesired is part of DeviceTable.
func (d *Devices) SetDesired(s State) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !reflect.DeepEqual(s, d.want) {
		d.want = s
		d.dirty = true
	}
}

// Check is part of DeviceTable.
func (d *Devices) Check(string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty = true
}

// QueueResync makes the next Apply read everything back.
func (d *Devices) QueueResync() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty = true
	d.ipipDown = false
}

// HostMTU is part of DeviceTable: the smallest MTU of the up links whose
// name matches MTUIfacePattern, DefaultHostMTU if none does (§9). The
// first call reads the links; later ones return what the last Apply read.
func (d *Devices) HostMTU() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hostMTU == 0 {
		d.readHostMTU()
	}
	return d.hostMTU
}

func (d *Devices) readHostMTU() {
	links, err := d.nl.LinkList()
	if err != nil {
		d.log.Warn("cannot list links for the host MTU", "error", err)
		return
	}
	mtu := 0
	for _, l := range links {
		a := l.Attrs()
		if a.OperState != netlink.OperUp && a.RawFlags&unix.IFF_RUNNING == 0 || !d.pat.MatchString(a.Name) {
			continue
		}
		if mtu == 0 || a.MTU < mtu {
			mtu = a.MTU
		}
	}
	if mtu == 0 {
		mtu = DefaultHostMTU
	}
	if d.hostMTU != 0 && mtu != d.hostMTU {
		// Felix restarts itself for this; behind it, its driver hears
		// nothing, so the overlay follows by itself (HostMTUChanged).
		d.log.Info("the host MTU changed: tunnel MTUs, their routes and the MTU file follow", "was", d.hostMTU, "now", mtu)
		d.mtuChanged = true
	}
	d.hostMTU = mtu
}

// HostMTUChanged reports whether a read of the host MTU (at each resync)
// found another value than the one before, and forgets it: the overlay
// manager then computes the devices' MTUs again (HostMTUChange).
func (d *Devices) HostMTUChanged() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.mtuChanged
	d.mtuChanged = false
	return c
}

// Problems returns the kernel features found missing, with what failed.
func (d *Devices) Problems() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]string{}
	for k, v := range d.problems {
		out[k] = v
	}
	return out
}

// Desired returns the state Apply works towards.
func (d *Devices) Desired() State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.want
}

// NextDeadline returns when Apply next has work no event triggers: the
// periodic resync. Zero if none.
func (d *Devices) NextDeadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.want.Known || d.cfg.ResyncInterval <= 0 {
		return time.Time{}
	}
	return d.lastResync.Add(d.cfg.ResyncInterval)
}

// OnKernelEvent reports whether a kernel event concerns a device, neighbour
// or FDB entry nftep owns and disagrees with the desired state (someone
// deleted or changed it); the next Apply then repairs it. Our own writes
// come back as events that agree, and call for nothing.
func (d *Devices) OnKernelEvent(ev any) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.want.Known {
		return false
	}
	bad := false
	switch ev := ev.(type) {
	case routes.LinkEvent:
		bad = !d.linkAgrees(ev.Link, ev.Deleted)
	case routes.NeighEvent:
		bad = !d.neighAgrees(ev.Neigh, ev.Deleted)
	case routes.KernelEventsLost:
		bad = true
	}
	if bad {
		d.dirty = true
	}
	return bad
}

func (d *Devices) linkAgrees(l netlink.Link, deleted bool) bool {
	a := l.Attrs()
	for fam, w := range d.want.VXLAN {
		if a.Name != vxlanNames[fam] {
			continue
		}
		switch w.Mode {
		case Remove:
			return deleted
		case Want:
			vx, ok := l.(*netlink.Vxlan)
			return !deleted && ok && a.MTU == w.Device.MTU && a.Flags&net.FlagUp != 0 &&
				bytes.Equal(a.HardwareAddr, w.Device.MAC) && vx.VxlanId == w.Device.VNI && vx.Port == w.Device.Port && !vx.Learning
		}
		return true
	}
	if a.Name == IPIPDevice && d.want.IPIP.Mode == Want {
		return !deleted && a.MTU == d.want.IPIP.MTU && a.Flags&net.FlagUp != 0
	}
	return true
}

func (d *Devices) neighAgrees(n netlink.Neigh, deleted bool) bool {
	for fam, w := range d.want.VXLAN {
		if w.Mode != Want || n.LinkIndex == 0 || n.LinkIndex != d.index[vxlanNames[fam]] {
			continue
		}
		for _, p := range w.Peers {
			switch {
			case n.Family == unix.AF_BRIDGE && bytes.Equal(n.HardwareAddr, p.MAC):
				return !deleted && ipToAddr(n.IP) == p.Underlay
			case n.Family != unix.AF_BRIDGE && ipToAddr(n.IP) == p.Addr:
				return !deleted && bytes.Equal(n.HardwareAddr, p.MAC) && n.State&netlink.NUD_PERMANENT != 0
			}
		}
		// Not wanted: a permanent entry of ours to remove, or not ours.
		return deleted || n.State&netlink.NUD_PERMANENT == 0 || n.HardwareAddr == nil
	}
	return true
}

// Apply programs the desired state: the VXLAN devices with their
// neighbours and FDB entries, tunl0, the MTU file. It does nothing before
// the first State with Known, and nothing when nothing changed since the
// last successful Apply and no resync is due. Errors name the device and
// are joined; the next Apply retries.
func (d *Devices) Apply() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.want.Known {
		return nil
	}
	now := time.Now()
	resync := d.cfg.ResyncInterval > 0 && !now.Before(d.lastResync.Add(d.cfg.ResyncInterval))
	if !d.dirty && !resync {
		return nil
	}
	if resync {
		d.readHostMTU()
		d.ipipDown = false
	}
	var errs []error
	for fam := range 2 {
		if err := d.applyVXLAN(fam, d.want.VXLAN[fam]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", vxlanNames[fam], err))
		}
	}
	if err := d.applyIPIP(d.want.IPIP); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", IPIPDevice, err))
	}
	if err := d.writeMTU(d.want.PodMTU); err != nil {
		errs = append(errs, err)
	}
	d.dirty = len(errs) > 0
	d.lastResync = now
	return errors.Join(errs...)
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}

func (d *Devices) tell(name string, l netlink.Link) {
	idx, state := 0, routes.IfaceGone
	if l != nil {
		idx = l.Attrs().Index
		state = routes.IfaceDown
		if l.Attrs().RawFlags&unix.IFF_RUNNING != 0 {
			state = routes.IfaceUp
		}
	}
	d.index[name] = idx
	if d.cfg.OnLink != nil && l != nil {
		d.cfg.OnLink(name, idx, state)
	}
}

// applyVXLAN is §4.3 and §4.5 for one family.
func (d *Devices) applyVXLAN(fam int, w VXLANWish) error {
	name := vxlanNames[fam]
	switch w.Mode {
	case Leave, Strip:
		return nil
	case Remove:
		l, err := d.nl.LinkByName(name)
		if isNotFound(err) {
			d.index[name] = 0
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up: %w", err)
		}
		if err := d.nl.LinkDel(l); err != nil && !isNotFound(err) {
			return fmt.Errorf("delete (its encapsulation is off): %w", err)
		}
		d.log.Info("deleted a tunnel device whose encapsulation is off", "device", name)
		d.index[name] = 0
		return nil
	}
	dev := w.Device
	parent, err := d.nl.LinkByName(dev.Parent)
	if err != nil {
		return fmt.Errorf("parent interface %s: %w", dev.Parent, err)
	}
	want := &netlink.Vxlan{
		LinkAttrs:    netlink.LinkAttrs{Name: name, MTU: dev.MTU, HardwareAddr: dev.MAC},
		VxlanId:      dev.VNI,
		VtepDevIndex: parent.Attrs().Index,
		SrcAddr:      dev.Local.AsSlice(),
		Port:         dev.Port,
		Learning:     false,
	}
	l, err := d.nl.LinkByName(name)
	switch {
	case isNotFound(err):
		l = nil
	case err != nil:
		return fmt.Errorf("look up: %w", err)
	}
	if l != nil {
		if why := vxlanDiffers(l, want); why != "" {
			d.log.Info("recreating a tunnel device whose attributes differ", "device", name, "why", why)
			if err := d.nl.LinkDel(l); err != nil && !isNotFound(err) {
				return fmt.Errorf("delete to recreate (%s): %w", why, err)
			}
			l = nil
		}
	}
	if l == nil {
		if err := d.nl.LinkAdd(want); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create (vxlan id %d dstport %d dev %s local %s): %w", dev.VNI, dev.Port, dev.Parent, dev.Local, err)
		}
		if l, err = d.nl.LinkByName(name); err != nil {
			return fmt.Errorf("look up after create: %w", err)
		}
	}
	if err := d.configure(l, dev.MTU, dev.Addr); err != nil {
		return err
	}
	if l, err = d.nl.LinkByName(name); err != nil {
		return fmt.Errorf("look up: %w", err)
	}
	d.tell(name, l)
	return d.syncPeers(l.Attrs().Index, fam, w.Peers)
}

// vxlanDiffers says why an existing link cannot become want, or "".
func vxlanDiffers(l netlink.Link, want *netlink.Vxlan) string {
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		return "not a vxlan device (" + l.Type() + ")"
	}
	switch {
	case vx.FlowBased:
		return "flow-based"
	case vx.VxlanId != want.VxlanId:
		return fmt.Sprintf("vxlan id %d, want %d", vx.VxlanId, want.VxlanId)
	case vx.VtepDevIndex != want.VtepDevIndex:
		return fmt.Sprintf("parent index %d, want %d", vx.VtepDevIndex, want.VtepDevIndex)
	case vx.SrcAddr != nil && !vx.SrcAddr.Equal(want.SrcAddr):
		return fmt.Sprintf("local %s, want %s", vx.SrcAddr, net.IP(want.SrcAddr))
	case vx.Port != 0 && vx.Port != want.Port:
		return fmt.Sprintf("dstport %d, want %d", vx.Port, want.Port)
	case vx.Learning:
		return "learning on"
	case vx.L2miss:
		return "l2miss on"
	case vx.GBP:
		return "gbp on"
	case !bytes.Equal(vx.HardwareAddr, want.HardwareAddr):
		return fmt.Sprintf("address %s, want %s", vx.HardwareAddr, want.HardwareAddr)
	}
	return ""
}

// configure sets a device's MTU, makes addr its only address of its family
// (an IPv6 link-local stays), and sets it up.
func (d *Devices) configure(l netlink.Link, mtu int, addr netip.Addr) error {
	name := l.Attrs().Name
	if l.Attrs().MTU != mtu {
		if err := d.nl.LinkSetMTU(l, mtu); err != nil {
			return fmt.Errorf("set mtu %d: %w", mtu, err)
		}
	}
	fam := netlink.FAMILY_V4
	if addr.Is6() {
		fam = netlink.FAMILY_V6
	}
	if err := d.onlyAddr(l, fam, addr); err != nil {
		return err
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := d.nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", name, err)
		}
	}
	return nil
}

// onlyAddr makes addr (invalid: none) the only address of family fam on l.
func (d *Devices) onlyAddr(l netlink.Link, fam int, addr netip.Addr) error {
	have, err := d.nl.AddrList(l, fam)
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	found := false
	for _, a := range have {
		ip := ipToAddr(a.IP)
		ones, _ := a.Mask.Size()
		if ip == addr && ones == addr.BitLen() {
			found = true
			continue
		}
		if ip.Is6() && ip.IsLinkLocalUnicast() {
			continue
		}
		if err := d.nl.AddrDel(l, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("delete address %s: %w", a.IPNet, err)
		}
	}
	if addr.IsValid() && !found {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}}
		if addr.Is6() {
			// IPAM made the address unique; duplicate address detection
			// would only keep it tentative (unusable) for a second or
			// more, and its probes cannot cross the tunnel anyway.
			a.Flags |= unix.IFA_F_NODAD
		}
		if err := d.nl.AddrAdd(l, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("add address %s: %w", a.IPNet, err)
		}
	}
	return nil
}

// syncPeers makes the permanent neighbours (by tunnel address) and FDB
// entries (by MAC) on the device those of peers (§4.5): every permanent
// entry with a MAC there is ours, and removed if no peer wants it.
//
//	ip neigh replace <addr> lladdr <mac> dev <dev> nud permanent
//	bridge fdb replace <mac> dev <dev> dst <underlay> self permanent
func (d *Devices) syncPeers(index, fam int, peers []Peer) error {
	nfam := netlink.FAMILY_V4
	if fam == 1 {
		nfam = netlink.FAMILY_V6
	}
	var errs []error
	neighs, err := d.nl.NeighList(index, nfam)
	if err != nil {
		return fmt.Errorf("list neighbours: %w", err)
	}
	wantN := map[netip.Addr]Peer{}
	wantF := map[string]Peer{}
	for _, p := range peers {
		wantN[p.Addr] = p
		wantF[p.MAC.String()] = p
	}
	haveN := map[netip.Addr]bool{}
	for _, n := range neighs {
		if n.State&netlink.NUD_PERMANENT == 0 || n.HardwareAddr == nil || n.LinkIndex != index {
			continue
		}
		ip := ipToAddr(n.IP)
		if p, ok := wantN[ip]; ok && bytes.Equal(p.MAC, n.HardwareAddr) {
			haveN[ip] = true
			continue
		}
		if _, ok := wantN[ip]; ok {
			continue // replaced below
		}
		if err := d.nl.NeighDel(&netlink.Neigh{LinkIndex: index, Family: nfam, IP: n.IP}); err != nil && !isNeighGone(err) {
			errs = append(errs, fmt.Errorf("delete neighbour %s: %w", ip, err))
		}
	}
	fdb, err := d.nl.NeighList(index, unix.AF_BRIDGE)
	if err != nil {
		return fmt.Errorf("list fdb: %w", err)
	}
	haveF := map[string]bool{}
	for _, n := range fdb {
		if n.State&netlink.NUD_PERMANENT == 0 || n.HardwareAddr == nil || n.LinkIndex != index {
			continue
		}
		mac := n.HardwareAddr.String()
		if p, ok := wantF[mac]; ok && ipToAddr(n.IP) == p.Underlay {
			haveF[mac] = true
			continue
		}
		if _, ok := wantF[mac]; ok {
			continue
		}
		err := d.nl.NeighDel(&netlink.Neigh{LinkIndex: index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF, State: netlink.NUD_PERMANENT, HardwareAddr: n.HardwareAddr, IP: n.IP})
		if err != nil && !isNeighGone(err) {
			errs = append(errs, fmt.Errorf("delete fdb entry %s: %w", mac, err))
		}
	}
	for _, p := range peers {
		if !haveF[p.MAC.String()] {
			err := d.nl.NeighSet(&netlink.Neigh{LinkIndex: index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF, State: netlink.NUD_PERMANENT,
				HardwareAddr: p.MAC, IP: p.Underlay.AsSlice()})
			if err != nil {
				errs = append(errs, fmt.Errorf("set fdb entry %s dst %s (node %s): %w", p.MAC, p.Underlay, p.Node, err))
			}
		}
		if !haveN[p.Addr] {
			err := d.nl.NeighSet(&netlink.Neigh{LinkIndex: index, Family: nfam, State: netlink.NUD_PERMANENT, Type: unix.RTN_UNICAST,
				HardwareAddr: p.MAC, IP: p.Addr.AsSlice()})
			if err != nil {
				errs = append(errs, fmt.Errorf("set neighbour %s lladdr %s (node %s): %w", p.Addr, p.MAC, p.Node, err))
			}
		}
	}
	return errors.Join(errs...)
}

func isNeighGone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) || isNotFound(err)
}

// applyIPIP is §5: tunl0 wanted, stripped of its addresses, or left alone.
func (d *Devices) applyIPIP(w IPIPWish) error {
	switch w.Mode {
	case Leave, Remove:
		return nil
	case Strip:
		l, err := d.nl.LinkByName(IPIPDevice)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up: %w", err)
		}
		return d.onlyAddr(l, netlink.FAMILY_V4, netip.Addr{})
	}
	if d.ipipDown {
		return nil
	}
	l, err := d.nl.LinkByName(IPIPDevice)
	switch {
	case isNotFound(err):
		err := d.nl.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: IPIPDevice}})
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EPROTONOSUPPORT) {
			d.ipipDown = true
			if _, told := d.problems["ipip"]; !told {
				detail := fmt.Sprintf("the kernel cannot create an ipip device (%v): no IPIP tunnel, so pods on other nodes are unreachable over IPv4 (CONFIG_NET_IPIP)", err)
				d.problems["ipip"] = detail
				d.log.Error("IPIP is on but the kernel lacks it; not retrying before the next resync", "device", IPIPDevice, "error", err)
				if d.cfg.OnProblem != nil {
					d.cfg.OnProblem("ipip", detail)
				}
			}
			return nil
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create: %w", err)
		}
		if l, err = d.nl.LinkByName(IPIPDevice); err != nil {
			return fmt.Errorf("look up after create: %w", err)
		}
	case err != nil:
		return fmt.Errorf("look up: %w", err)
	}
	delete(d.problems, "ipip")
	if err := d.configure(l, w.MTU, w.Addr); err != nil {
		return err
	}
	if l, err = d.nl.LinkByName(IPIPDevice); err != nil {
		return fmt.Errorf("look up: %w", err)
	}
	d.tell(IPIPDevice, l)
	return nil
}

// writeMTU writes the pod MTU to the MTU file when it changed (§9).
func (d *Devices) writeMTU(mtu int) error {
	if d.cfg.MTUFile == "" || mtu <= 0 {
		return nil
	}
	s := strconv.Itoa(mtu)
	if s == d.mtuWritten {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(d.cfg.MTUFile), 0o755); err != nil {
		return fmt.Errorf("MTU file: %w", err)
	}
	tmp := d.cfg.MTUFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		return fmt.Errorf("MTU file: %w", err)
	}
	if err := os.Rename(tmp, d.cfg.MTUFile); err != nil {
		return fmt.Errorf("MTU file: %w", err)
	}
	d.mtuWritten = s
	return nil
}

func ipToAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// sortedPeers is for status output.
func sortedPeers(ps []Peer) []Peer {
	out := slices.Clone(ps)
	slices.SortFunc(out, func(a, b Peer) int { return a.Addr.Compare(b.Addr) })
	return out
}

// Cleanup removes what the overlay programmed (`nftep cleanup`): the VXLAN
// devices, and with them their routes, permanent neighbours and FDB
// entries; and tunl0's IPv4 addresses. tunl0 itself stays: the kernel's
// ipip module owns it (it is the module's fallback device), as Felix leaves
// it when IPIP goes off. Cluster routes of protocol 80 (blackholes,
// same-subnet and IPIP routes) are the route table's to remove. It returns
// what it removed, in `ip` words.
func Cleanup(nl Netlink) (removed []string, err error) {
	var errs []error
	for _, name := range []string{VXLANDevice, VXLANDeviceV6} {
		l, err := nl.LinkByName(name)
		if isNotFound(err) {
			continue
		}
		if err == nil {
			err = nl.LinkDel(l)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete device %s: %w", name, err))
			continue
		}
		removed = append(removed, "link "+name)
	}
	if l, err := nl.LinkByName(IPIPDevice); err == nil {
		addrs, err := nl.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			errs = append(errs, fmt.Errorf("addresses of %s: %w", IPIPDevice, err))
		}
		for _, a := range addrs {
			if err := nl.AddrDel(l, &a); err != nil {
				errs = append(errs, fmt.Errorf("delete address %s of %s: %w", a.IPNet, IPIPDevice, err))
				continue
			}
			removed = append(removed, fmt.Sprintf("address %s dev %s", a.IPNet, IPIPDevice))
		}
	} else if !isNotFound(err) {
		errs = append(errs, fmt.Errorf("look up %s: %w", IPIPDevice, err))
	}
	return removed, errors.Join(errs...)
}
