package routes

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"unsafe"

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
		addrs, err := dumpAddrs(fd, uint32(seq+1), family, index)
		if err != nil {
			return nil, fmt.Errorf("addresses of interface %d: %w", index, err)
		}
		out = append(out, addrs...)
	}
	slices.SortFunc(out, func(x, y netip.Addr) int { return x.Compare(y) })
	return slices.Compact(out), nil
}

// dumpAddrs sends one RTM_GETADDR dump request for family filtered by
// index, and reads the answer to its end.
func dumpAddrs(fd int, seq uint32, family uint8, index int) ([]netip.Addr, error) {
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
	var out []netip.Addr
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
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
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := *(*int32)(unsafe.Pointer(&m.Data[0])); errno != 0 {
						return nil, unix.Errno(-errno)
					}
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

// parseAddrMsg returns the address of an RTM_NEWADDR message about the
// interface index (IFA_LOCAL, or IFA_ADDRESS without it, as ip does).
func parseAddrMsg(m *syscall.NetlinkMessage, index int) (netip.Addr, bool) {
	if len(m.Data) < unix.SizeofIfAddrmsg {
		return netip.Addr{}, false
	}
	ifa := (*unix.IfAddrmsg)(unsafe.Pointer(&m.Data[0]))
	if int(ifa.Index) != index {
		return netip.Addr{}, false
	}
	attrs, err := syscall.ParseNetlinkRouteAttr(m)
	if err != nil {
		return netip.Addr{}, false
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
		return local, true
	}
	return addr, addr.IsValid()
}
