package routes

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// rtextFilterSkipStats is RTEXT_FILTER_SKIP_STATS of the kernel's
// include/uapi/linux/rtnetlink.h (not in x/sys/unix): a link dump without
// IFLA_STATS and IFLA_STATS64.
const rtextFilterSkipStats = 1 << 3

// linkBrief is what a resync needs of a link.
type linkBrief struct {
	index   int
	name    string
	running bool // IFF_RUNNING: see linkOperUp
}

// links dumps every link of the pipe's namespace, briefly: each link's
// index, flags and name, from an RTM_GETLINK dump that leaves the
// statistics out (IFLA_EXT_MASK with RTEXT_FILTER_SKIP_STATS; a kernel
// without it sends them, and they are skipped here).
//
// netlink's LinkList decodes every attribute of every link into a Link
// and a fresh buffer per read: about 10 KB allocated per link, 100 MB at
// 10,000 workloads, for the three fields a resync uses; it was the largest
// allocation of a cold apply. This reads into the pipe's own buffer and
// keeps only the names.
//
// A dump the kernel marks as interrupted (the links changed during it)
// returns netlink.ErrDumpInterrupted, for retryDump.
//
// Equivalent to: ip link show.
func (p *pipe) links() ([]linkBrief, error) {
	p.seq++
	return dumpLinks(p.fd, p.seq, p.rbuf)
}

// dumpLinks sends the dump request of pipe.links on the NETLINK_ROUTE
// socket fd with sequence number seq, and reads its answer into buf.
func dumpLinks(fd int, seq uint32, buf []byte) ([]linkBrief, error) {
	req := struct {
		hdr  unix.NlMsghdr
		msg  unix.IfInfomsg
		attr unix.RtAttr
		mask uint32
	}{
		hdr:  unix.NlMsghdr{Type: unix.RTM_GETLINK, Flags: unix.NLM_F_REQUEST | unix.NLM_F_DUMP, Seq: seq},
		msg:  unix.IfInfomsg{Family: unix.AF_UNSPEC},
		attr: unix.RtAttr{Len: unix.SizeofRtAttr + 4, Type: unix.IFLA_EXT_MASK},
		mask: rtextFilterSkipStats,
	}
	req.hdr.Len = uint32(unsafe.Sizeof(req))
	b := unsafe.Slice((*byte)(unsafe.Pointer(&req)), unsafe.Sizeof(req))
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("link dump: %w", err)
	}
	var out []linkBrief
	interrupted := false
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return nil, fmt.Errorf("link dump: %w", err)
		}
		done, err := parseLinkDump(buf[:n], seq, &out, &interrupted)
		if err != nil {
			return nil, fmt.Errorf("link dump: %w", err)
		}
		if done {
			if interrupted {
				return nil, netlink.ErrDumpInterrupted
			}
			return out, nil
		}
	}
}

// ListInterfacesHere is ListInterfaces for the network namespace of the
// calling thread (lock it to the thread and enter the namespace first, as
// netnsutil's Do does), through dumps of its own: the links as pipe.links
// reads them, and every address as AddrsOfIndex reads one interface's.
// At 10,000 workloads netlink's LinkList and AddrList allocated about
// 80 MB for this listing, of which it keeps names and addresses.
//
// Equivalent to: ip link show; ip addr show.
func ListInterfacesHere() ([]any, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	buf := make([]byte, 64<<10)
	seq := uint32(0)
	links, err := retryDump(func() ([]linkBrief, error) {
		seq++
		return dumpLinks(fd, seq, buf)
	})
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	byIndex := map[int][]netip.Addr{}
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		addrs, err := retryDump(func() ([]indexedAddr, error) {
			seq++
			return dumpAddrsOf(fd, seq, family, 0)
		})
		if err != nil {
			return nil, fmt.Errorf("list addresses: %w", err)
		}
		for _, a := range addrs {
			byIndex[a.index] = append(byIndex[a.index], a.addr)
		}
	}
	slices.SortFunc(links, func(a, b linkBrief) int { return cmp.Compare(a.index, b.index) })
	return interfaceUpdates(links, byIndex), nil
}

// parseLinkDump reads the messages of one datagram of the dump seq into
// out, and says whether the dump is done.
func parseLinkDump(b []byte, seq uint32, out *[]linkBrief, interrupted *bool) (done bool, err error) {
	for m, err := range nlMessages(b) {
		if err != nil {
			return false, err
		}
		if m.seq != seq {
			continue // a late acknowledgement of an earlier request
		}
		if m.flags&unix.NLM_F_DUMP_INTR != 0 {
			*interrupted = true
		}
		switch m.typ {
		case unix.NLMSG_DONE, unix.NLMSG_ERROR:
			// A dump that failed on the way ends with the error in its
			// NLMSG_DONE (netlink_dump_done): what was read is not the
			// whole.
			if err := bodyErrno(m.body); err != nil {
				return false, err
			}
			return true, nil
		case unix.RTM_NEWLINK:
			lb, err := parseLinkMsg(m.body)
			if err != nil {
				// Not skipped: a resync would take a link missing from
				// the dump for a link that is gone.
				return false, err
			}
			*out = append(*out, lb)
		}
	}
	return false, nil
}

// parseLinkMsg reads an RTM_NEWLINK message's index, flags and name.
func parseLinkMsg(body []byte) (linkBrief, error) {
	if len(body) < unix.SizeofIfInfomsg {
		return linkBrief{}, fmt.Errorf("link message of %d bytes", len(body))
	}
	index := int(int32(binary.NativeEndian.Uint32(body[4:8])))
	flags := binary.NativeEndian.Uint32(body[8:12])
	attrs := body[unix.SizeofIfInfomsg:]
	for len(attrs) >= unix.SizeofRtAttr {
		alen := int(binary.NativeEndian.Uint16(attrs[0:2]))
		atyp := binary.NativeEndian.Uint16(attrs[2:4])
		if alen < unix.SizeofRtAttr || alen > len(attrs) {
			return linkBrief{}, fmt.Errorf("link %d: malformed attribute", index)
		}
		if atyp&^unix.NLA_F_NESTED == unix.IFLA_IFNAME {
			v := attrs[unix.SizeofRtAttr:alen]
			for len(v) > 0 && v[len(v)-1] == 0 {
				v = v[:len(v)-1]
			}
			return linkBrief{index: index, name: string(v), running: flags&unix.IFF_RUNNING != 0}, nil
		}
		attrs = attrs[min(rtaAlign(alen), len(attrs)):]
	}
	return linkBrief{}, fmt.Errorf("link %d without a name", index)
}

// rtaAlign rounds an attribute's length up to the next one's start (as
// nlmAlign does for messages; both align to 4).
func rtaAlign(n int) int { return nlmAlign(n) }
