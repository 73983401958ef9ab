package routes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"net"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// batchWriter writes many routes or neighbours without waiting for each
// acknowledgement. It returns one error per request, in the order given
// (nil: acknowledged). A dataplane that is one (the kernel tests' wrapper)
// is used as such; otherwise Table uses its pipe when it has one, or the
// dataplane's one-at-a-time calls.
type batchWriter interface {
	RouteReplaceAll(routes []*netlink.Route) []error
	NeighSetAll(neighs []*netlink.Neigh) []error
}

// ErrOutcomeUnknown is wrapped into the error of a pipelined write whose
// acknowledgement never came (the socket's receive queue overflowed, or the
// read failed): the kernel may or may not hold it. The table rereads the
// kernel before it trusts its view again.
var ErrOutcomeUnknown = errors.New("outcome unknown: acknowledgement lost")

// pipe sends route and neighbour writes over one NETLINK_ROUTE socket of
// its own, many requests per sendmsg, and matches the acknowledgements to
// the requests by sequence number. `ip route replace` one at a time waits
// for each reply; at thousands of workloads that is a system call pair per
// route. The kernel runs the requests of one sendmsg one after the other
// (rtnetlink_rcv, under the RTNL lock per request) and queues one
// acknowledgement each, success or error, so an error belongs to exactly
// its request and the others still happen.
//
// At most pipeWindow requests are in flight: their acknowledgements must
// fit the socket's receive buffer (NETLINK_CAP_ACK keeps an error's
// acknowledgement small: the request is not echoed back).
type pipe struct {
	sock *nl.NetlinkSocket
	fd   int
	seq  uint32
	buf  []byte // requests of one window
	rbuf []byte
}

// pipeWindow is the number of requests sent in one sendmsg before their
// acknowledgements are read: ~100 bytes each out, one small skb each back.
const pipeWindow = 256

// pipeRcvBuf is the receive buffer asked for (SO_RCVBUFFORCE, which root
// may set above net.core.rmem_max); the default, 208 KiB, holds a window's
// acknowledgements too.
const pipeRcvBuf = 4 << 20

// openPipe opens a pipe in namespace ns (netns.None(): the caller's).
func openPipe(ns netns.NsHandle) (*pipe, error) {
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	p := &pipe{sock: sock, fd: sock.GetFd(), rbuf: make([]byte, 64<<10)}
	for _, opt := range []int{unix.NETLINK_CAP_ACK, unix.NETLINK_EXT_ACK} {
		if err := unix.SetsockoptInt(p.fd, unix.SOL_NETLINK, opt, 1); err != nil && opt == unix.NETLINK_CAP_ACK {
			sock.Close()
			return nil, fmt.Errorf("netlink socket option %d: %w", opt, err)
		}
	}
	if err := unix.SetsockoptInt(p.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, pipeRcvBuf); err != nil {
		_ = unix.SetsockoptInt(p.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, pipeRcvBuf)
	}
	// The kernel answers within the sendmsg; a read that waits this long
	// means the acknowledgement is lost.
	tv := unix.NsecToTimeval(int64(30e9))
	if err := unix.SetsockoptTimeval(p.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		sock.Close()
		return nil, fmt.Errorf("netlink socket timeout: %w", err)
	}
	return p, nil
}

func (p *pipe) close() {
	if p != nil && p.sock != nil {
		p.sock.Close()
		p.sock = nil
	}
}

// RouteReplaceAll is part of batchWriter: `ip route replace` of each route.
func (p *pipe) RouteReplaceAll(routes []*netlink.Route) []error {
	return p.exec(len(routes), func(b []byte, i int, seq uint32) []byte { return appendRouteReplace(b, routes[i], seq) })
}

// NeighSetAll is part of batchWriter: `ip neigh replace` of each neighbour.
func (p *pipe) NeighSetAll(neighs []*netlink.Neigh) []error {
	return p.exec(len(neighs), func(b []byte, i int, seq uint32) []byte { return appendNeighSet(b, neighs[i], seq) })
}

// exec sends n requests, pipeWindow per sendmsg, and returns their errors.
func (p *pipe) exec(n int, encode func(b []byte, i int, seq uint32) []byte) []error {
	errs := make([]error, n)
	for start := 0; start < n; start += pipeWindow {
		end := min(start+pipeWindow, n)
		first := p.seq + 1
		p.buf = p.buf[:0]
		for i := start; i < end; i++ {
			p.seq++
			p.buf = encode(p.buf, i, p.seq)
		}
		if err := p.window(first, errs[start:end]); err != nil {
			for i := start; i < end; i++ {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

// window sends p.buf, whose requests have sequence numbers first,
// first+1, …, and reads an acknowledgement for each into errs. The error
// returned is for the requests not acknowledged: the send failed (none
// was done), or the acknowledgements were lost (ErrOutcomeUnknown).
// Those acknowledged have a nil error in errs, and errs must arrive
// zeroed.
func (p *pipe) window(first uint32, errs []error) error {
	if err := unix.Sendto(p.fd, p.buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send to the kernel: %w", err)
	}
	acked := make([]bool, len(errs))
	left := len(errs)
	for left > 0 {
		n, _, err := unix.Recvfrom(p.fd, p.rbuf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			// ENOBUFS: acknowledgements were dropped; EAGAIN: the
			// timeout. Either way, which ones happened is unknown.
			for i := range errs {
				if !acked[i] {
					errs[i] = fmt.Errorf("%w (%w)", ErrOutcomeUnknown, err)
				}
			}
			return nil
		}
		msgs, err := parseAcks(p.rbuf[:n])
		if err != nil {
			for i := range errs {
				if !acked[i] {
					errs[i] = fmt.Errorf("%w (%w)", ErrOutcomeUnknown, err)
				}
			}
			return nil
		}
		for _, m := range msgs {
			i := int(m.seq - first)
			if m.seq < first || i >= len(errs) || acked[i] {
				continue // not one of this window's (a late reply)
			}
			acked[i] = true
			left--
			errs[i] = m.err
		}
	}
	return nil
}

// ack is one acknowledgement: its request's sequence number and error.
type ack struct {
	seq uint32
	err error
}

// parseAcks reads the NLMSG_ERROR messages of one datagram. An error
// carries the kernel's extended acknowledgement message, if any
// (NLMSGERR_ATTR_MSG), after the errno, which errors.Is still finds.
func parseAcks(b []byte) ([]ack, error) {
	var out []ack
	for m, err := range nlMessages(b) {
		if err != nil {
			return out, err
		}
		if m.typ != unix.NLMSG_ERROR || len(m.body) < 4 {
			continue
		}
		err := bodyErrno(m.body)
		if err != nil && m.flags&unix.NLM_F_ACK_TLVS != 0 && len(m.body) >= 4+unix.NLMSG_HDRLEN {
			if msg := extAckMessage(m.body[4+unix.NLMSG_HDRLEN:]); msg != "" {
				err = fmt.Errorf("%w: %s", err, msg)
			}
		}
		out = append(out, ack{seq: m.seq, err: err})
	}
	return out, nil
}

// nlMessage is one netlink message of a datagram: its header's type, flags
// and sequence number, and its body.
type nlMessage struct {
	typ, flags uint16
	seq        uint32
	body       []byte
}

// nlMessages yields the messages of datagram b in order; at one that
// claims more bytes than b has left it yields an error and stops.
func nlMessages(b []byte) iter.Seq2[nlMessage, error] {
	return func(yield func(nlMessage, error) bool) {
		for len(b) >= unix.NLMSG_HDRLEN {
			l := int(binary.NativeEndian.Uint32(b[0:4]))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				yield(nlMessage{}, fmt.Errorf("malformed netlink message of %d bytes in %d", l, len(b)))
				return
			}
			m := nlMessage{
				typ:   binary.NativeEndian.Uint16(b[4:6]),
				flags: binary.NativeEndian.Uint16(b[6:8]),
				seq:   binary.NativeEndian.Uint32(b[8:12]),
				body:  b[unix.NLMSG_HDRLEN:l],
			}
			b = b[min(nlmAlign(l), len(b)):]
			if !yield(m, nil) {
				return
			}
		}
	}
}

// bodyErrno is the error of an NLMSG_ERROR or NLMSG_DONE message's body:
// its first four bytes, a negative errno, or 0 for none.
func bodyErrno(body []byte) error {
	if len(body) >= 4 {
		if code := int32(binary.NativeEndian.Uint32(body[0:4])); code != 0 {
			return unix.Errno(-code)
		}
	}
	return nil
}

// extAckMessage returns the NLMSGERR_ATTR_MSG attribute of an extended
// acknowledgement's attributes.
func extAckMessage(b []byte) string {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4])
		if l < 4 || l > len(b) {
			return ""
		}
		if typ == unix.NLMSGERR_ATTR_MSG {
			v := b[4:l]
			for len(v) > 0 && v[len(v)-1] == 0 {
				v = v[:len(v)-1]
			}
			return string(v)
		}
		b = b[min(nlmAlign(l), len(b)):]
	}
	return ""
}

func nlmAlign(n int) int { return (n + 3) &^ 3 }

// appendHeader appends a netlink header whose length is fixed up by
// finish.
func appendHeader(b []byte, typ uint16, seq uint32) ([]byte, int) {
	start := len(b)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_REPLACE)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	return b, start
}

func finish(b []byte, start int) []byte {
	binary.NativeEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func appendU32Attr(b []byte, typ uint16, v uint32) []byte {
	return appendAttr(b, typ, binary.NativeEndian.AppendUint32(nil, v))
}

// ipBytes is ip in its family's length.
func ipBytes(ip net.IP) []byte {
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip.To16()
}

// appendRouteReplace appends RTM_NEWROUTE with NLM_F_CREATE|NLM_F_REPLACE
// for r, encoded as netlink.Handle.RouteReplace encodes the fields Table
// sets (addRoute): destination, device, metric, TOS, table (main, < 256),
// protocol, scope, type, flags, preferred source, gateway and the mtu
// metric.
func appendRouteReplace(b []byte, r *netlink.Route, seq uint32) []byte {
	b, start := appendHeader(b, unix.RTM_NEWROUTE, seq)
	family := unix.AF_INET
	dst := ipBytes(r.Dst.IP)
	if len(dst) == net.IPv6len {
		family = unix.AF_INET6
	}
	ones, _ := r.Dst.Mask.Size()
	typ := r.Type
	if typ == 0 {
		typ = unix.RTN_UNICAST
	}
	table, proto := r.Table, r.Protocol
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	if proto == 0 {
		proto = unix.RTPROT_BOOT // the library's default too
	}
	b = append(b, byte(family), byte(ones), 0, byte(r.Tos), byte(table), byte(proto), byte(r.Scope), byte(typ))
	b = binary.NativeEndian.AppendUint32(b, uint32(r.Flags))
	b = appendAttr(b, unix.RTA_DST, dst)
	if r.Src != nil {
		b = appendAttr(b, unix.RTA_PREFSRC, ipBytes(r.Src))
	}
	if r.Gw != nil {
		b = appendAttr(b, unix.RTA_GATEWAY, ipBytes(r.Gw))
	}
	if r.LinkIndex > 0 {
		b = appendU32Attr(b, unix.RTA_OIF, uint32(r.LinkIndex))
	}
	b = appendU32Attr(b, unix.RTA_PRIORITY, uint32(r.Priority))
	if r.MTU > 0 {
		b = appendAttr(b, unix.RTA_METRICS, appendU32Attr(nil, unix.RTAX_MTU, uint32(r.MTU)))
	}
	return finish(b, start)
}

// appendNeighSet appends RTM_NEWNEIGH with NLM_F_CREATE|NLM_F_REPLACE for
// n, as netlink.Handle.NeighSet encodes a neighbour with an address, a
// link-layer address, a device and a state.
func appendNeighSet(b []byte, n *netlink.Neigh, seq uint32) []byte {
	b, start := appendHeader(b, unix.RTM_NEWNEIGH, seq)
	b = append(b, byte(n.Family), 0, 0, 0)
	b = binary.NativeEndian.AppendUint32(b, uint32(n.LinkIndex))
	b = binary.NativeEndian.AppendUint16(b, uint16(n.State))
	b = append(b, byte(n.Flags), byte(n.Type))
	b = appendAttr(b, unix.NDA_DST, ipBytes(n.IP))
	if n.HardwareAddr != nil {
		b = appendAttr(b, unix.NDA_LLADDR, n.HardwareAddr)
	}
	return finish(b, start)
}

// oneByOne is the batchWriter of a dataplane without one: each write
// waits for its acknowledgement.
type oneByOne struct{ dp dataplane }

func (o oneByOne) RouteReplaceAll(routes []*netlink.Route) []error {
	errs := make([]error, len(routes))
	for i, r := range routes {
		errs[i] = o.dp.RouteReplace(r)
	}
	return errs
}

func (o oneByOne) NeighSetAll(neighs []*netlink.Neigh) []error {
	errs := make([]error, len(neighs))
	for i, n := range neighs {
		errs[i] = o.dp.NeighSet(n)
	}
	return errs
}
