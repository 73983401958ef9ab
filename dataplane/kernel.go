package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"syscall"
	"time"

	"github.com/google/nftables"

	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/routes"
	"github.com/nftep/nftep/sysctl"
	"github.com/nftep/nftep/takeover"
)

// Table is the part of *nft.Table the dataplane drives.
type Table interface {
	Desired() *nft.Model
	Apply(ctx context.Context) (nft.ApplyStats, error)
	Resync(ctx context.Context) (nft.ResyncStats, error)
	Delete(ctx context.Context) error
}

// RouteTable is the part of *routes.Table the dataplane drives.
type RouteTable interface {
	SetRoutes(iface string, targets []routes.Target)
	OnIfaceStateChanged(name string, index int, state routes.IfaceState)
	Apply() error
	NextDeadline() time.Time
	QueueResync()
	EventsSubscribed(at time.Time) bool
	EventsLost()
	Close()
	Adopt(owned map[string]int)
	Owned() map[string]int
}

// Kernel makes the pieces that touch the kernel, once the configuration
// (which names the tables) is known. NewKernel returns the real one; tests
// pass fakes.
type Kernel interface {
	// NewTable returns the table family/name. It must not touch the
	// kernel before Apply (nft.NewTable does not).
	NewTable(family nft.Family, name string) (Table, error)
	// NewRoutes returns a route table; nil with a nil error means the
	// dataplane programs no routes.
	NewRoutes(cfg routes.Config) (RouteTable, error)
	// Sysctls returns the writer for /proc/sys; nil means none are written.
	Sysctls() sysctl.Writer
	// TableExists reports whether the kernel holds the table family/name.
	TableExists(ctx context.Context, family nft.Family, name string) (bool, error)
	// Interfaces lists the interfaces that exist now, as the interface
	// monitor would first report them (routes.InterfaceStateUpdate and
	// routes.InterfaceAddrsUpdate values).
	Interfaces() ([]any, error)
	// WatchInterfaces reports interface changes to emit until ctx is done
	// (routes.Monitor.Run).
	WatchInterfaces(ctx context.Context, emit func(any)) error
}

// NewKernel returns the real kernel of the network namespace ns (the
// caller's when ns is nil): nft tables, routes and the interface monitor
// over netlink sockets bound to it, and sysctl writes from a thread inside
// it. ns must stay open while the Kernel is used.
func NewKernel(ns *netnsutil.NS, logger *slog.Logger) Kernel {
	if ns == nil {
		ns = netnsutil.Current()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &realKernel{ns: ns, log: logger, gens: nft.NewGenerations()}
}

type realKernel struct {
	ns  *netnsutil.NS
	log *slog.Logger
	// gens is shared by the tables of the namespace (inet and arp), so
	// that a commit to one does not make the other read itself back at
	// the resync nftables events trigger after our own commits.
	gens *nft.Generations
	// sweeper removes Calico's leftovers (made on first use).
	sweeper *takeover.Sweeper
	// mtuFile is Options.MTUFile.
	mtuFile string
}

// NewDevices returns the tunnel devices' programmer (package overlay) in
// the namespace.
func (k *realKernel) NewDevices(cfg overlay.DevicesConfig) (*overlay.Devices, error) {
	h, err := k.ns.Netlink()
	if err != nil {
		return nil, err
	}
	cfg.Netlink = h
	cfg.MTUFile = k.mtuFile
	return overlay.NewDevices(cfg), nil
}

// Takeover returns the namespace's remover of Calico's leftovers.
func (k *realKernel) Takeover() *takeover.Sweeper {
	if k.sweeper == nil {
		k.sweeper = takeover.New(k.ns, k.log)
	}
	return k.sweeper
}

// NewTable is part of Kernel.
func (k *realKernel) NewTable(family nft.Family, name string) (Table, error) {
	t, err := nft.NewTable(nft.TableConfig{Family: family, Name: name, NetNSFd: k.ns.Fd(), Logger: k.log, Generations: k.gens})
	if err != nil {
		return nil, fmt.Errorf("table %s %s: %w", family, name, err)
	}
	return t, nil
}

// NewRoutes is part of Kernel.
func (k *realKernel) NewRoutes(cfg routes.Config) (RouteTable, error) {
	h, err := k.ns.Netlink()
	if err != nil {
		return nil, err
	}
	cfg.Netlink = h
	at := k.ns.Handle()
	cfg.Namespace = &at
	t, err := routes.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("route table: %w", err)
	}
	return t, nil
}

// Sysctls is part of Kernel.
func (k *realKernel) Sysctls() sysctl.Writer {
	if k.ns.IsCurrent() {
		return sysctl.NewProcWriter("")
	}
	// /proc/sys/net shows the namespace of the thread that opens the file.
	return sysctl.NewProcWriter("", sysctl.InNamespace(k.ns.Do))
}

// TableExists is part of Kernel.
func (k *realKernel) TableExists(ctx context.Context, family nft.Family, name string) (bool, error) {
	return TableExists(k.ns, family, name)
}

// TableExists reports whether the network namespace ns (nil: the caller's)
// holds the nftables table family/name, asking the kernel over netlink.
func TableExists(ns *netnsutil.NS, family nft.Family, name string) (bool, error) {
	if ns == nil {
		ns = netnsutil.Current()
	}
	var opts []nftables.ConnOption
	if !ns.IsCurrent() {
		opts = append(opts, nftables.WithNetNSFd(ns.Fd()))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return false, fmt.Errorf("nftables connection in %s: %w", ns, err)
	}
	defer c.CloseLasting()
	fam := nftables.TableFamilyINet
	if family == nft.FamilyARP {
		fam = nftables.TableFamilyARP
	}
	if _, err := c.ListTableOfFamily(name, fam); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("look up table %s %s in %s: %w", family, name, ns, err)
	}
	return true, nil
}

// Interfaces is part of Kernel: routes.ListInterfacesHere in the
// namespace, which retries a dump the kernel flags as interrupted, as the
// monitor's relists do.
func (k *realKernel) Interfaces() ([]any, error) {
	var out []any
	err := k.ns.Do(func() error {
		var err error
		out, err = routes.ListInterfacesHere()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("interfaces in %s: %w", k.ns, err)
	}
	return out, nil
}

// InterfacesNamed is Interfaces for the interfaces names only.
func (k *realKernel) InterfacesNamed(names []string) ([]any, error) {
	h, err := k.ns.Netlink()
	if err != nil {
		return nil, err
	}
	addrsOf := func(index int) ([]netip.Addr, error) {
		var addrs []netip.Addr
		err := k.ns.Do(func() error {
			var err error
			addrs, err = routes.AddrsOfIndex(index)
			return err
		})
		return addrs, err
	}
	out, err := routes.ListInterfacesNamed(h, addrsOf, names)
	if err != nil {
		return nil, fmt.Errorf("interfaces in %s: %w", k.ns, err)
	}
	return out, nil
}

// WatchInterfaces is part of Kernel.
func (k *realKernel) WatchInterfaces(ctx context.Context, emit func(any)) error {
	// No periodic relist: a relist of a node of 10,000 workloads is two
	// dumps of 10,000 links and addresses (half a CPU second, and the
	// garbage of it), and it finds nothing the subscriptions did not
	// report. The kernel does not drop a multicast event silently: an
	// overrun fails the next read (ENOBUFS), and the Monitor then
	// subscribes again and relists. Routes and neighbours are trusted the
	// same way (routes.Table.EventsSubscribed); interface sysctls, which
	// make no event, are read back a slice at a time with each nftables
	// refresh, or every RouteRefreshInterval without one
	// (loop.verifySysctls).
	cfg := routes.MonitorConfig{Logger: k.log, KernelEvents: true, WatchLinks: overlay.DeviceNames, ResyncInterval: -1}
	if !k.ns.IsCurrent() {
		h := k.ns.Handle()
		cfg.Namespace = &h
	}
	return routes.NewMonitor(cfg, emit).Run(ctx)
}

// dryKernel is the kernel of a dry run: the tables go to an in-memory
// nft.Fake (planned and checked as the kernel would check them, not
// encoded), and nothing else is programmed. It may list the real interfaces
// (for realistic statuses) through ifaces.
type dryKernel struct {
	ifaces func() ([]any, error)
}

// NewTable is part of Kernel.
func (dryKernel) NewTable(family nft.Family, name string) (Table, error) {
	f := nft.NewFake()
	f.SkipEncoding()
	// A dry run's engine is dropped at the first refusal: no copy of the
	// table per transaction.
	f.InPlace()
	return nft.NewTable(nft.TableConfig{Family: family, Name: name, Transport: f})
}

// NewRoutes is part of Kernel.
func (dryKernel) NewRoutes(routes.Config) (RouteTable, error) { return nil, nil }

// Sysctls is part of Kernel.
func (dryKernel) Sysctls() sysctl.Writer { return nil }

// TableExists is part of Kernel.
func (dryKernel) TableExists(context.Context, nft.Family, string) (bool, error) {
	return false, nil
}

// Interfaces is part of Kernel.
func (k dryKernel) Interfaces() ([]any, error) {
	if k.ifaces == nil {
		return nil, nil
	}
	return k.ifaces()
}

// WatchInterfaces is part of Kernel.
func (dryKernel) WatchInterfaces(ctx context.Context, _ func(any)) error {
	<-ctx.Done()
	return nil
}

var (
	_ Kernel     = (*realKernel)(nil)
	_ Kernel     = dryKernel{}
	_ Table      = (*nft.Table)(nil)
	_ RouteTable = (*routes.Table)(nil)
)
