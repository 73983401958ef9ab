package nft

// This file is the wire: one netlink socket per transaction or read, and the
// encoder that writes nf_tables messages straight into the batch.
//
// Why not google/nftables' Conn.Flush for the writes: v0.3.0 asks for an ACK
// on every message and an echo of every rule (NLM_F_ECHO on NEWRULE), so the
// kernel builds and sends back a copy of every rule and the library reads one
// reply per message (Conn.Flush in google/nftables v0.3.0 conn.go). It also
// marshals every message into its own slice and then copies them all into
// one more buffer.
// We reuse its expression marshalling (expr.Marshal) but frame the batch
// ourselves: no ACK and no echo per message (the kernel still reports every
// failing message, nfnetlink.c nfnetlink_rcv_batch: "if (nlh->nlmsg_flags &
// NLM_F_ACK || err)"), messages written once into fixed-size chunks that go to
// the kernel as the iovecs of one sendmsg, and every message numbered so that
// an error names the object it was about.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nlHeaderLen is sizeof(struct nlmsghdr) + sizeof(struct nfgenmsg).
const nlHeaderLen = 16 + 4

// maxIovecs is the kernel's UIO_MAXIOV: sendmsg refuses more iovecs.
const maxIovecs = 1024

// Batch chunk sizes: the first chunk is small so that a one-endpoint change
// does not map megabytes; later ones double up to chunkMax, which keeps a
// 100 MB cold-start batch within a few dozen iovecs.
const (
	chunkMin = 64 << 10
	chunkMax = 4 << 20
)

// msgType is an nf_tables message type on the wire (subsystem in the high byte).
func msgType(m uint16) uint16 { return unix.NFNL_SUBSYS_NFTABLES<<8 | m }

// enc appends netlink attributes to a message under construction. Nested
// attributes are opened with nest and closed with end, which backpatches the
// length.
type enc struct {
	b []byte
}

// reset starts a new nf_tables message: nlmsghdr (length patched by finish)
// and nfgenmsg.
func (e *enc) reset(typ uint16, flags uint16, seq uint32, family uint8) {
	e.b = e.b[:0]
	e.b = binary.NativeEndian.AppendUint32(e.b, 0)
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
	e.b = binary.NativeEndian.AppendUint16(e.b, flags)
	e.b = binary.NativeEndian.AppendUint32(e.b, seq)
	e.b = binary.NativeEndian.AppendUint32(e.b, 0) // port id: the kernel fills it in
	e.b = append(e.b, family, unix.NFNETLINK_V0, 0, 0)
}

// finish patches the message length and returns the message.
func (e *enc) finish() []byte {
	binary.NativeEndian.PutUint32(e.b[0:4], uint32(len(e.b)))
	return e.b
}

func (e *enc) pad() {
	for len(e.b)%4 != 0 {
		e.b = append(e.b, 0)
	}
}

func (e *enc) attrHeader(typ uint16, n int) {
	e.b = binary.NativeEndian.AppendUint16(e.b, uint16(4+n))
	e.b = binary.NativeEndian.AppendUint16(e.b, typ)
}

func (e *enc) bytes(typ uint16, v []byte) {
	e.attrHeader(typ, len(v))
	e.b = append(e.b, v...)
	e.pad()
}

// str writes a NUL-terminated string, as nf_tables expects names.
func (e *enc) str(typ uint16, s string) {
	e.attrHeader(typ, len(s)+1)
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
	e.pad()
}

func (e *enc) be32(typ uint16, v uint32) {
	e.attrHeader(typ, 4)
	e.b = binary.BigEndian.AppendUint32(e.b, v)
}

// nest opens a nested attribute and returns its offset for end.
func (e *enc) nest(typ uint16) int {
	off := len(e.b)
	e.attrHeader(typ|unix.NLA_F_NESTED, 0)
	return off
}

// end closes the nested attribute opened at off. A nested attribute longer
// than 64 KiB cannot be expressed (nla_len is a u16); callers keep element
// lists below that (see maxElemListBytes), and end reports it rather than
// letting the length wrap as google/nftables v0.3.0 does silently.
func (e *enc) end(off int) error {
	n := len(e.b) - off
	if n > 0xffff {
		return fmt.Errorf("nested attribute of %d bytes exceeds the netlink limit of 65535", n)
	}
	binary.NativeEndian.PutUint16(e.b[off:], uint16(n))
	return nil
}

// batchBuf holds messages of an nfnetlink batch as a list of chunks that
// become iovecs of a single sendmsg. Messages may straddle chunk boundaries:
// the kernel copies the iovecs into one skb before parsing.
//
// The chunks are anonymous mappings outside the Go heap, unmapped by release
// as soon as the batch is sent: a cold start's batch is as big as the model
// (85 MB at 10,000 workloads), and on the heap it would double the garbage
// collector's target, and with it the daemon's peak memory, for a buffer
// that lives a few seconds.
type batchBuf struct {
	chunks [][]byte
	size   int
	msgs   int
}

// write appends one complete message.
func (bb *batchBuf) write(m []byte) {
	bb.size += len(m)
	bb.msgs++
	for len(m) > 0 {
		n := len(bb.chunks)
		if n == 0 || len(bb.chunks[n-1]) == cap(bb.chunks[n-1]) {
			size := chunkMin
			if n > 0 {
				size = min(2*cap(bb.chunks[n-1]), chunkMax)
			}
			bb.chunks = append(bb.chunks, mapChunk(size))
			n++
		}
		c := bb.chunks[n-1]
		k := min(cap(c)-len(c), len(m))
		bb.chunks[n-1] = append(c, m[:k]...)
		m = m[k:]
	}
}

// release unmaps the chunks.
func (bb *batchBuf) release() {
	for _, c := range bb.chunks {
		unmapChunk(c)
	}
	bb.chunks = nil
}

// mapChunk returns an empty slice of capacity size backed by an anonymous
// mapping, or by the heap if mapping fails.
func mapChunk(size int) []byte {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, 0, size)
	}
	return b[:0]
}

func unmapChunk(c []byte) {
	if err := unix.Munmap(c[:cap(c)]); err != nil {
		// A heap chunk (mapChunk's fallback): the collector frees it.
		return
	}
}

// nlSock is one NETLINK_NETFILTER socket, opened for one transaction or one
// read and closed afterwards: after an ENOBUFS a socket's replies no longer
// line up with its requests (replies were dropped, see netlink(7)), and a
// fresh socket per transaction makes that impossible to inherit.
type nlSock struct {
	conn nlConn
	seq  uint32
}

// nlConn is the socket under an nlSock: the kernel's (kernelConn), or in
// the engine's own tests one that answers like nf_tables from a Fake.
type nlConn interface {
	sendmsg(bufs [][]byte) error
	// recv reads one datagram; with wait false it returns (nil, nil)
	// when nothing is queued.
	recv(wait bool) ([]byte, error)
	setBuffers(snd, rcv int) error
	setDeadline(t time.Time)
	Close() error
}

// kernelConn is a NETLINK_NETFILTER socket.
type kernelConn struct {
	c   *netlink.Conn
	raw syscall.RawConn
	rb  []byte
}

// recvBufSize is the user-space receive buffer. A dump skb is at most 32 KiB
// (netlink_dump caps max_recvmsg_len), so one read never truncates.
const recvBufSize = 64 << 10

// dialConn opens a NETLINK_NETFILTER socket in the namespace netnsFd
// refers to (≤ 0: the caller's).
func dialConn(netnsFd int) (*netlink.Conn, error) {
	cfg := &netlink.Config{}
	if netnsFd > 0 {
		cfg.NetNS = netnsFd
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	return c, nil
}

// dialNetfilter opens a NETLINK_NETFILTER socket in the namespace netnsFd
// refers to (≤ 0: the caller's namespace). mdlayher/socket creates it from a
// locked helper thread, so no goroutine of ours changes namespace.
func dialNetfilter(netnsFd int) (*nlSock, error) {
	c, err := dialConn(netnsFd)
	if err != nil {
		return nil, err
	}
	raw, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	kc := &kernelConn{c: c, raw: raw, rb: make([]byte, recvBufSize)}
	s := &nlSock{conn: kc, seq: uint32(time.Now().UnixNano())}
	// NETLINK_CAP_ACK: an error reply carries only the header of the failed
	// message, not a copy of it, so a batch of 100,000 failing rules cannot
	// flood the receive buffer. NETLINK_EXT_ACK: let the kernel add its
	// message and attribute offset when it has one.
	if err := kc.setsockopt(unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1); err != nil {
		s.Close()
		return nil, fmt.Errorf("set NETLINK_CAP_ACK: %w", err)
	}
	_ = kc.setsockopt(unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	return s, nil
}

func (s *nlSock) Close() error                   { return s.conn.Close() }
func (s *nlSock) setBuffers(snd, rcv int) error  { return s.conn.setBuffers(snd, rcv) }
func (s *nlSock) sendmsg(bufs [][]byte) error    { return s.conn.sendmsg(bufs) }
func (s *nlSock) recv(wait bool) ([]byte, error) { return s.conn.recv(wait) }

// setDeadline applies ctx's deadline to blocking reads.
func (s *nlSock) setDeadline(ctx context.Context) {
	if d, ok := ctx.Deadline(); ok {
		s.conn.setDeadline(d)
	}
}

func (s *kernelConn) setsockopt(level, opt, v int) error {
	var serr error
	if err := s.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), level, opt, v)
	}); err != nil {
		return err
	}
	return serr
}

// Close closes the socket.
func (s *kernelConn) Close() error { return s.c.Close() }

// setBuffers forces the socket buffers (SO_SNDBUFFORCE / SO_RCVBUFFORCE as
// root, so net.core.{w,r}mem_max do not cap them). The kernel doubles the
// value it is given and refuses a message longer than sk_sndbuf - 32
// (netlink_sendmsg), so a batch fits when snd ≥ its size.
func (s *kernelConn) setBuffers(snd, rcv int) error {
	const maxBuf = 1 << 30 // the kernel doubles it into an int
	if err := s.c.SetWriteBuffer(min(snd, maxBuf)); err != nil {
		return fmt.Errorf("set socket send buffer to %d bytes: %w", snd, err)
	}
	if err := s.c.SetReadBuffer(min(rcv, maxBuf)); err != nil {
		return fmt.Errorf("set socket receive buffer to %d bytes: %w", rcv, err)
	}
	return nil
}

func (s *kernelConn) setDeadline(d time.Time) { _ = s.c.SetDeadline(d) }

func (s *nlSock) nextSeq() uint32 {
	s.seq++
	return s.seq
}

// sendmsg sends bufs as one datagram: one skb, one nfnetlink batch.
func (s *kernelConn) sendmsg(bufs [][]byte) error {
	var serr error
	err := s.raw.Write(func(fd uintptr) bool {
		_, serr = unix.SendmsgBuffers(int(fd), bufs, nil, nil, 0)
		return serr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return os.NewSyscallError("sendmsg", serr)
	}
	return nil
}

// recv reads one datagram (several netlink messages). With wait false it
// returns (nil, nil) when nothing is queued.
func (s *kernelConn) recv(wait bool) ([]byte, error) {
	var (
		n    int
		rerr error
	)
	err := s.raw.Read(func(fd uintptr) bool {
		n, _, rerr = unix.Recvfrom(int(fd), s.rb, unix.MSG_DONTWAIT)
		return !(wait && rerr == unix.EAGAIN)
	})
	if err != nil {
		return nil, err
	}
	if rerr == unix.EAGAIN {
		return nil, nil
	}
	if rerr != nil {
		return nil, os.NewSyscallError("recvmsg", rerr)
	}
	return s.rb[:n], nil
}

// nlMsg is one received netlink message; data is the payload after the
// nlmsghdr (for nf_tables messages it starts with the nfgenmsg).
type nlMsg struct {
	typ   uint16
	flags uint16
	seq   uint32
	data  []byte
}

// forEachMsg calls fn for every netlink message in a datagram.
func forEachMsg(b []byte, fn func(m nlMsg) error) error {
	for len(b) >= 16 {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < 16 || l > len(b) {
			return fmt.Errorf("malformed netlink message: length %d of %d bytes", l, len(b))
		}
		m := nlMsg{
			typ:   binary.NativeEndian.Uint16(b[4:6]),
			flags: binary.NativeEndian.Uint16(b[6:8]),
			seq:   binary.NativeEndian.Uint32(b[8:12]),
			data:  b[16:l],
		}
		if err := fn(m); err != nil {
			return err
		}
		al := (l + 3) &^ 3
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return nil
}

// nlError is the content of an NLMSG_ERROR reply: the errno, the header of
// the message it answers, and the kernel's extended-ack text if any.
type nlError struct {
	errno  syscall.Errno
	seq    uint32 // of the message that failed
	typ    uint16 // of the message that failed
	msg    string // NLMSGERR_ATTR_MSG
	offset uint32 // NLMSGERR_ATTR_OFFS, 0 if absent
}

func parseNLError(m nlMsg) (nlError, bool) {
	if len(m.data) < 4+16 {
		return nlError{}, false
	}
	code := int32(binary.NativeEndian.Uint32(m.data[0:4]))
	e := nlError{
		errno: syscall.Errno(-code),
		typ:   binary.NativeEndian.Uint16(m.data[4+4 : 4+6]),
		seq:   binary.NativeEndian.Uint32(m.data[4+8 : 4+12]),
	}
	// With NETLINK_CAP_ACK the original payload is left out and the
	// extended-ack TLVs follow the header directly (NLM_F_ACK_TLVS).
	if m.flags&unix.NLM_F_ACK_TLVS != 0 {
		off := 4 + 16
		if m.flags&unix.NLM_F_CAPPED == 0 {
			off = 4 + int(binary.NativeEndian.Uint32(m.data[4:8]))
			off = (off + 3) &^ 3
		}
		if off <= len(m.data) {
			if ad, err := netlink.NewAttributeDecoder(m.data[off:]); err == nil {
				for ad.Next() {
					switch ad.Type() {
					case unix.NLMSGERR_ATTR_MSG:
						e.msg = ad.String()
					case unix.NLMSGERR_ATTR_OFFS:
						e.offset = ad.Uint32()
					}
				}
			}
		}
	}
	return e, true
}

// dump sends one request with NLM_F_DUMP and calls fn for every reply until
// NLMSG_DONE. It reports errInterrupted when the kernel flagged the dump
// NLM_F_DUMP_INTR (the ruleset changed while it was being read).
func (s *nlSock) dump(ctx context.Context, typ uint16, family uint8, attrs func(e *enc), fn func(m nlMsg) error) error {
	var e enc
	seq := s.nextSeq()
	e.reset(msgType(typ), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq, family)
	if attrs != nil {
		attrs(&e)
	}
	if err := s.sendmsg([][]byte{e.finish()}); err != nil {
		return err
	}
	s.setDeadline(ctx)
	interrupted := false
	for {
		b, err := s.recv(true)
		if err != nil {
			return err
		}
		done := false
		err = forEachMsg(b, func(m nlMsg) error {
			if m.seq != seq {
				return nil // a stray reply (e.g. a late ACK), not ours
			}
			if m.flags&unix.NLM_F_DUMP_INTR != 0 {
				interrupted = true
			}
			switch m.typ {
			case unix.NLMSG_DONE:
				done = true
				return nil
			case unix.NLMSG_ERROR:
				ne, ok := parseNLError(m)
				if ok && ne.errno != 0 {
					return ne.errno
				}
				return nil
			}
			return fn(m)
		})
		if err != nil {
			return err
		}
		if done {
			if interrupted {
				return errInterrupted
			}
			return nil
		}
	}
}

// errInterrupted says a dump was interrupted by a concurrent change.
var errInterrupted = errors.New("dump interrupted by a concurrent ruleset change")

// request sends one request that is answered by a single message (or an
// error) and returns that message's payload.
func (s *nlSock) request(ctx context.Context, typ uint16, family uint8, attrs func(e *enc)) (nlMsg, error) {
	var e enc
	seq := s.nextSeq()
	e.reset(msgType(typ), unix.NLM_F_REQUEST, seq, family)
	if attrs != nil {
		attrs(&e)
	}
	if err := s.sendmsg([][]byte{e.finish()}); err != nil {
		return nlMsg{}, err
	}
	s.setDeadline(ctx)
	for {
		b, err := s.recv(true)
		if err != nil {
			return nlMsg{}, err
		}
		var (
			got   nlMsg
			found bool
		)
		err = forEachMsg(b, func(m nlMsg) error {
			if m.seq != seq || found {
				return nil
			}
			if m.typ == unix.NLMSG_ERROR {
				ne, ok := parseNLError(m)
				if ok && ne.errno != 0 {
					return ne.errno
				}
				return nil
			}
			got = nlMsg{typ: m.typ, flags: m.flags, seq: m.seq, data: append([]byte(nil), m.data...)}
			found = true
			return nil
		})
		if err != nil {
			return nlMsg{}, err
		}
		if found {
			return got, nil
		}
	}
}
