package routes

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AddrsOfIndex returns the addresses of the interface with index, sorted,
// from the network namespace of the calling thread (lock it to the thread
// and enter the namespace first, as netnsutil's Do does).
//
// netlink's AddrList dumps every address of the namespace and keeps those
// of the link asked for: on a node of 10,000 workloads that is tens of
// thousands of IPv6 link-local addresses for each interface looked up. This
// asks the kernel to filter the dump by interface instead (strict checking
// of dump requests, NETLINK_GET_STRICT_CHK, Linux 4.20); a kernel that
// ignores the filter still gives the right answer, the long way.
//
// Equivalent to: ip addr show dev NAME.
func AddrsOfIndex(index int) ([]netip.Addr, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("address dump: %w", err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("address dump: %w", err)
	}
	out := []netip.Addr{} // none is empty, not nil (nil says the interface is gone)
	for seq, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		addrs, err := retryDump(func() ([]indexedAddr, error) { return dumpAddrsOf(fd, uint32(seq+1), family, index) })
		if errors.Is(err, unix.ENODEV) {
			// The interface went meanwhile (the filtered dump ends
			// with ENODEV): it has no addresses.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("addresses of interface %d: %w", index, err)
		}
		for _, a := range addrs {
			out = append(out, a.addr)
		}
	}
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return slices.Compact(out), nil
}

// indexedAddr is an address and the index of its interface.
type indexedAddr struct {
	index int
	addr  netip.Addr
}

// dumpAddrsOf sends one RTM_GETADDR dump request for family filtered by
// index (0: every interface), and reads the answer to its end. A dump the
// kernel marks as interrupted returns netlink.ErrDumpInterrupted.
func dumpAddrsOf(fd int, seq uint32, family uint8, index int) ([]indexedAddr, error) {
	req := struct {
		hdr unix.NlMsghdr
		msg unix.IfAddrmsg
	}{
		hdr: unix.NlMsghdr{Type: unix.RTM_GETADDR, Flags: unix.NLM_F_REQUEST | unix.NLM_F_DUMP, Seq: seq},
		msg: unix.IfAddrmsg{Family: family, Index: uint32(index)},
	}
	req.hdr.Len = uint32(unsafe.Sizeof(req))
	b := unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req))
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []indexedAddr
	interrupted := false
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue
			}
			if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				// A dump that failed on the way ends with the error here
				// (netlink_dump_done).
				if err := bodyErrno(m.Data); err != nil {
					return nil, err
				}
				if interrupted {
					return nil, netlink.ErrDumpInterrupted
				}
				return out, nil
			case unix.NLMSG_ERROR:
				if err := bodyErrno(m.Data); err != nil {
					return nil, err
				}
				return out, nil
			case unix.RTM_NEWADDR:
				if a, ok := parseAddrMsg(&m, index); ok {
					out = append(out, a)
				}
			}
		}
	}
}

// parseAddrMsg returns the address of an RTM_NEWADDR message (IFA_LOCAL,
// or IFA_ADDRESS without it, as ip does) with its interface's index, if it
// is about the interface index (0: any).
func parseAddrMsg(m *syscall.NetlinkMessage, index int) (indexedAddr, bool) {
	if len(m.Data) < unix.SizeofIfAddrmsg {
		return indexedAddr{}, false
	}
	ifa := (*unix.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
	if index != 0 && int(ifa.Index) != index {
		return indexedAddr{}, false
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return indexedAddr{}, false
	}
	var addr, local netip.Addr
	for _, a := range attrs {
		ip, ok := netip.AddrFromSlice(a.Value)
		if !ok {
			continue
		}
		switch a.Attr.Type {
		case unix.IFA_ADDRESS:
			addr = ip.Unmap()
		case unix.IFA_LOCAL:
			local = ip.Unmap()
		}
	}
	if local.IsValid() {
		addr = local
	}
	return indexedAddr{index: int(ifa.Index), addr: addr}, addr.IsValid()
}
