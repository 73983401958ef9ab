package explain

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/tracer"
)

// netnsDir is where `ip netns` and CNI plugins bind-mount named network
// namespaces.
const netnsDir = "/run/netns"

// PeerNamespace finds the named network namespace that holds the other end
// of the veth iface (a pod's namespace, for a workload interface), as `ip
// netns` names it: the namespace whose id, as the node's namespace sees it,
// is the link's peer namespace id.
func PeerNamespace(nl *netlink.Handle, iface string) (string, error) {
	link, err := nl.LinkByName(iface)
	if err != nil {
		return "", fmt.Errorf("interface %q: %w", iface, err)
	}
	id := link.Attrs().NetNsID
	if id < 0 {
		return "", fmt.Errorf("interface %q has no peer in another network namespace", iface)
	}
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		return "", fmt.Errorf("the peer namespace of %q: %w", iface, err)
	}
	for _, e := range entries {
		h, err := netns.GetFromPath(filepath.Join(netnsDir, e.Name()))
		if err != nil {
			continue
		}
		got, err := nl.GetNetNsIdByFd(int(h))
		h.Close()
		if err == nil && got == id {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("the peer namespace of %q (id %d) is not a named namespace under %s", iface, id, netnsDir)
}

// freebind lets the probe bind to an address its namespace does not have,
// so that a spoofed source (--src) can be sent and the node's reverse-path
// check confirmed.
func freebind(v6 bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if v6 {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// Probe sends one packet of p's flow (TCP: a connection attempt, whose SYN
// is the traced packet; UDP: one datagram) from namespace ns, bound to p's
// source address and port, and reports whether a TCP connection was made.
// A refused, reset or timed-out connection is not an error: the trace says
// what happened to the packet.
func Probe(ctx context.Context, ns *netnsutil.NS, p tracer.Packet, timeout time.Duration) (connected bool, err error) {
	var network string
	var local net.Addr
	switch p.Proto {
	case tracer.ProtoTCP:
		network, local = "tcp", &net.TCPAddr{IP: p.Src.AsSlice(), Port: int(p.SPort)}
	case tracer.ProtoUDP:
		network, local = "udp", &net.UDPAddr{IP: p.Src.AsSlice(), Port: int(p.SPort)}
	default:
		return false, fmt.Errorf("--confirm sends tcp or udp probes, not %s", protoWord(p.Proto))
	}
	d := net.Dialer{Timeout: timeout, LocalAddr: local, Control: freebind(p.Src.Is6())}
	dst := net.JoinHostPort(p.Dst.String(), fmt.Sprint(p.DPort))
	err = ns.Do(func() error {
		c, err := d.DialContext(ctx, network, dst)
		if err != nil {
			return err
		}
		defer c.Close()
		if network == "udp" {
			_, err = c.Write([]byte("nftep explain --confirm\n"))
			return err
		}
		connected = true
		return nil
	})
	var se *os.SyscallError
	var te interface{ Timeout() bool }
	switch {
	case err == nil:
		return connected, nil
	case errors.As(err, &se) && se.Syscall == "bind":
		return false, fmt.Errorf("probe from %s: %w", ns, err)
	case errors.As(err, &te) && te.Timeout(), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EPERM):
		return false, nil
	}
	return false, fmt.Errorf("probe %s %s → %s: %w", network, local, dst, err)
}
