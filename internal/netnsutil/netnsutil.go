// Package netnsutil works with named network namespaces from non-test code:
// `nftep --netns NAME` operates inside one, and `nftep demo` builds a few
// throwaway ones. It is internal/netnstest's runtime sibling (no testing
// import): every namespace is reached through a file descriptor, and a
// goroutine that needs to run inside one does so on a locked OS thread that is
// switched back before it is released, so no other goroutine ever lands on a
// thread in a foreign namespace.
package netnsutil

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// bindMountDir is where iproute2 and vishvananda/netns keep named namespaces.
const bindMountDir = "/run/netns"

// NS is an open network namespace: the caller's own (Name empty, no
// handle) or a named one.
type NS struct {
	// Name is the namespace's name under /run/netns; empty for the
	// caller's own namespace.
	Name string

	handle netns.NsHandle
	nl     *netlink.Handle
	owned  bool
}

// closedHandle is the handle of a closed NS: never a valid descriptor, so
// that a use after Close fails (EBADF) rather than act on the caller's own
// namespace, which a handle of -1 would mean to the nft, netlink and sysctl
// code. A test whose namespace was closed under a running dataplane once
// programmed tunnel devices into the host that way.
const closedHandle = netns.NsHandle(1<<31 - 1)

// errClosed is the error of a use of a closed NS.
var errClosed = errors.New("the namespace handle is closed")

// Current returns the caller's own namespace. Its Fd is -1, which nft,
// netlink and sysctl code take as "the caller's namespace".
func Current() *NS {
	return &NS{handle: netns.None()}
}

// Open opens the existing named namespace (`ip netns add NAME` made it).
// Close releases it; the namespace itself stays.
func Open(name string) (*NS, error) {
	h, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %q: %w", name, err)
	}
	return &NS{Name: name, handle: h}, nil
}

// Create makes a new named network namespace with its loopback up. Delete
// removes it (Close alone leaves it in place).
func Create(name string) (*NS, error) {
	if _, err := os.Lstat(filepath.Join(bindMountDir, name)); err == nil {
		return nil, fmt.Errorf("create network namespace %q: it exists already", name)
	}
	h, err := createNamed(name)
	if err != nil {
		return nil, fmt.Errorf("create network namespace %q: %w", name, err)
	}
	ns := &NS{Name: name, handle: h, owned: true}
	nl, err := ns.Netlink()
	if err == nil {
		var lo netlink.Link
		if lo, err = nl.LinkByName("lo"); err == nil {
			err = nl.LinkSetUp(lo)
		}
	}
	if err != nil {
		_ = ns.Delete()
		return nil, fmt.Errorf("network namespace %q: set lo up: %w", name, err)
	}
	return ns, nil
}

// createNamed unshares a new network namespace on a locked OS thread,
// bind-mounts it under /run/netns and switches the thread back. If the thread
// cannot be switched back it stays locked, so the Go runtime destroys it when
// the goroutine exits instead of reusing a thread in the wrong namespace.
func createNamed(name string) (netns.NsHandle, error) {
	type result struct {
		h   netns.NsHandle
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("get current namespace: %w", err)}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if restoreErr := netns.Set(orig); restoreErr != nil {
			if err == nil {
				h.Close()
				_ = netns.DeleteNamed(name)
			}
			done <- result{err: fmt.Errorf("switch thread back to the original namespace: %w", restoreErr)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{h: h, err: err}
	}()
	r := <-done
	return r.h, r.err
}

// IsCurrent reports whether ns is the caller's own namespace.
func (ns *NS) IsCurrent() bool { return ns.handle == netns.None() }

// closed reports whether Close was called on a named namespace.
func (ns *NS) closed() bool { return ns.handle == closedHandle }

// Fd returns the namespace's file descriptor, or -1 for the caller's own
// (after Close, a number that is no descriptor).
func (ns *NS) Fd() int { return int(ns.handle) }

// Handle returns the namespace's handle; netns.None() for the caller's own.
func (ns *NS) Handle() netns.NsHandle { return ns.handle }

// String names the namespace for messages.
func (ns *NS) String() string {
	if ns.IsCurrent() {
		return "the current network namespace"
	}
	return fmt.Sprintf("network namespace %q", ns.Name)
}

// Netlink returns a rtnetlink handle bound to the namespace, opened on first
// use and closed by Close.
func (ns *NS) Netlink() (*netlink.Handle, error) {
	if ns.nl != nil {
		return ns.nl, nil
	}
	if ns.closed() {
		return nil, fmt.Errorf("netlink handle in %s: %w", ns, errClosed)
	}
	var (
		h   *netlink.Handle
		err error
	)
	if ns.IsCurrent() {
		h, err = netlink.NewHandle()
	} else {
		h, err = netlink.NewHandleAt(ns.handle)
	}
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", ns, err)
	}
	ns.nl = h
	return h, nil
}

// Do runs fn on an OS thread switched into the namespace (directly, for the
// caller's own). Sockets fn opens stay in the namespace after Do returns, and
// /proc/sys/net shows the namespace's settings inside fn.
func (ns *NS) Do(fn func() error) error {
	if ns.IsCurrent() {
		return fn()
	}
	if ns.closed() {
		return fmt.Errorf("enter %s: %w", ns, errClosed)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("get current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns.handle); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("enter %s: %w", ns, err)
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			done <- errors.Join(fnErr, fmt.Errorf("leave %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		done <- fnErr
	}()
	return <-done
}

// Close releases the handles; the namespace itself stays.
func (ns *NS) Close() error {
	if ns.nl != nil {
		ns.nl.Close()
		ns.nl = nil
	}
	if ns.IsCurrent() || ns.closed() {
		return nil
	}
	err := ns.handle.Close()
	ns.handle = closedHandle
	if err != nil {
		return fmt.Errorf("close network namespace %q: %w", ns.Name, err)
	}
	return nil
}

// Delete closes the handles and removes the named namespace. Links in it
// (and the peers of its veth pairs) disappear with it.
func (ns *NS) Delete() error {
	name := ns.Name
	errs := []error{ns.Close()}
	if name != "" {
		if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete network namespace %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Exists reports whether a namespace called name exists under /run/netns.
func Exists(name string) bool {
	_, err := os.Lstat(filepath.Join(bindMountDir, name))
	return err == nil
}

// List returns the names under /run/netns that start with prefix.
func List(prefix string) ([]string, error) {
	entries, err := os.ReadDir(bindMountDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", bindMountDir, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Veth creates a veth pair: end aName in namespace a, end bName in namespace
// b, with the MAC address bMAC on b's end when it is not nil; both ends are
// set up. The pair disappears with either namespace.
func Veth(a *NS, aName string, b *NS, bName string, bMAC net.HardwareAddr) error {
	anl, err := a.Netlink()
	if err != nil {
		return err
	}
	bnl, err := b.Netlink()
	if err != nil {
		return err
	}
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: aName},
		PeerName:      bName,
		PeerNamespace: netlink.NsFd(b.Fd()),
	}
	if len(bMAC) > 0 {
		v.PeerHardwareAddr = bMAC
	}
	if err := anl.LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s (%s) <-> %s (%s): %w", aName, a, bName, b, err)
	}
	for _, side := range []struct {
		nl   *netlink.Handle
		ns   *NS
		name string
	}{{anl, a, aName}, {bnl, b, bName}} {
		l, err := side.nl.LinkByName(side.name)
		if err == nil {
			err = side.nl.LinkSetUp(l)
		}
		if err != nil {
			return fmt.Errorf("%s: set %q up: %w", side.ns, side.name, err)
		}
	}
	// The kernel sets IFF_RUNNING (carrier) from its linkwatch work, which
	// may run up to a second after both ends are up. Callers treat a link
	// as up only once it is running, as Felix does, so wait for it here
	// rather than let every caller race it.
	for _, side := range []struct {
		nl   *netlink.Handle
		ns   *NS
		name string
	}{{anl, a, aName}, {bnl, b, bName}} {
		if err := waitRunning(side.nl, side.name, 5*time.Second); err != nil {
			return fmt.Errorf("%s: %w", side.ns, err)
		}
	}
	return nil
}

// waitRunning polls the link called name until it has IFF_RUNNING.
func waitRunning(nl *netlink.Handle, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l, err := nl.LinkByName(name)
		if err != nil {
			return fmt.Errorf("link %q: %w", name, err)
		}
		if l.Attrs().RawFlags&unix.IFF_RUNNING != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %q not running after %v", name, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
