package nft

// The transport: everything a Table asks of nf_tables, behind one small
// interface. The kernel's, over netlink, is the default; Fake is an
// in-memory nf_tables with the kernel's semantics, for tests that need no
// root and want to see the transactions.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Transport is how a Table reaches nf_tables (TableConfig.Transport). Its
// methods are unexported: the implementations are the kernel's (the
// default, for TableConfig.NetNSFd) and *Fake.
type Transport interface {
	// prepare turns part, one batch of the transaction pl plans, into
	// what commit sends. It may run on another goroutine than commit, so
	// that the next batch is prepared while the current one is applied.
	prepare(family uint8, table string, part *Transaction, pl *planned) (prepared, error)
	// commit applies a prepared batch as one atomic transaction and
	// returns the ruleset generations read just before and just after it
	// (after.known is false when the second read failed). A refusal is a
	// *refusal naming the operation.
	commit(ctx context.Context, p prepared, part *Transaction) (before uint32, after generation, err error)
	// generation reads the ruleset generation.
	generation(ctx context.Context) (uint32, error)
	// readTable reads the table back: its chains with their rules' hashes
	// and its sets, without elements. A table that does not exist reads
	// as one with exists false. An error matching errInterrupted comes
	// with the whole, possibly inconsistent, table.
	readTable(ctx context.Context, family uint8, name string) (*kernelTable, error)
	// readElements reads the elements of the named sets of the table,
	// in their order, each with its own error.
	readElements(ctx context.Context, family uint8, table string, sets []string) []elementsRead
	// subscribe reports committed changes to the table (see Table.Watch)
	// until ctx is done or the subscription fails: it calls opened once it
	// listens, then notify for each commit that changed the table, with
	// the process that committed it when known (and with nil for events
	// it may have lost). It returns whether it received anything.
	subscribe(ctx context.Context, family uint8, table string, opened func(), notify func(by *Writer)) (got bool, err error)
}

// prepared is a batch ready to commit.
type prepared interface {
	// stats returns the batch's netlink messages and bytes.
	stats() (msgs, bytes int)
	// release frees its buffers once it is sent or abandoned.
	release()
}

// generation is a ruleset generation that may be unknown.
type generation struct {
	gen   uint32
	known bool
}

// refusal is a transaction the kernel refused (or whose outcome is
// unknown): Table turns it into an *Error with the table and summary.
type refusal struct {
	op      string // the operation refused first; empty if none in particular
	err     error
	more    int // further operations refused
	unknown bool
}

func (r *refusal) Error() string { return fmt.Sprintf("%s: %v", r.op, r.err) }
func (r *refusal) Unwrap() error { return r.err }

// kernelTransport is the kernel of one network namespace, over netlink: a
// fresh NETLINK_NETFILTER socket per call (a socket that saw an error may
// hold stale replies).
type kernelTransport struct {
	netnsFd int
	// dial opens a socket: dialNetfilter(netnsFd), or in the engine's
	// own tests one that answers from a Fake.
	dial func() (*nlSock, error)
	// rcvbuf, when set, replaces the receive buffer size of commits
	// (tests use it to lose replies); watchRcvBuf is the event socket's.
	rcvbuf, watchRcvBuf int
	// beforeReceive, when it holds a function, runs before each read of
	// events (tests hold the reader to overflow its buffer).
	beforeReceive atomic.Pointer[func()]
	// owned: the table is created with NFT_TABLE_F_OWNER, and every
	// commit goes through ownerSock, the socket that owns it. The kernel
	// lets only that socket change the table and deletes the table when
	// the socket closes (nf_tables_api.c's nft_rcv_nl_event), so a table
	// of a process that is killed does not outlive it.
	owned     bool
	ownerSock *nlSock
	// endAcks: the kernel has acknowledged a batch end, as kernels from
	// 6.10 on do; from then on a commit without that acknowledgement lost
	// its replies. Until then, see commit.
	endAcks atomic.Bool
}

// newKernelTransport returns the transport of the namespace netnsFd
// refers to (≤ 0: the caller's).
func newKernelTransport(netnsFd int) *kernelTransport {
	return &kernelTransport{netnsFd: netnsFd, watchRcvBuf: defaultWatchRcvBuf,
		dial: func() (*nlSock, error) { return dialNetfilter(netnsFd) }}
}

func (k *kernelTransport) prepare(family uint8, table string, part *Transaction, pl *planned) (prepared, error) {
	var flags uint32
	if k.owned {
		flags = nftTableFOwner
	}
	return encodeBatch(family, table, part, pl, flags)
}

func (b *batch) stats() (int, int) { return b.msgs, b.size }

// commit sends the batch in one sendmsg and reads the kernel's answer.
func (k *kernelTransport) commit(ctx context.Context, p prepared, tx *Transaction) (uint32, generation, error) {
	b := p.(*batch)
	s, err := k.commitSocket()
	if err != nil {
		return 0, generation{}, err
	}
	if !k.owned {
		defer s.Close()
	}
	// The send buffer must hold the whole batch (one sendmsg, one skb).
	// Replies are only errors, with NETLINK_CAP_ACK about 40 bytes each but
	// charged to the receive buffer at their skb's true size; room for an
	// error per message means even a batch that fails everywhere is read
	// back completely instead of ending in ENOBUFS.
	rcv := (256 << 10) + b.msgs*1024
	if k.rcvbuf > 0 {
		rcv = k.rcvbuf
	}
	if err := s.setBuffers(b.size+(256<<10), rcv); err != nil {
		return 0, generation{}, err
	}
	g0, err := s.getGen(ctx)
	if err != nil {
		return 0, generation{}, err
	}
	if err := s.sendmsg(b.iovecs()); err != nil {
		// Nothing reached nf_tables: netlink_sendmsg failed before
		// delivering (EMSGSIZE, ENOMEM).
		return 0, generation{}, &refusal{op: "send batch", err: err}
	}
	// nf_tables processes the batch, commit included, inside the sendmsg
	// call (netlink_unicast_kernel runs nfnetlink_rcv in the sender's
	// context), so every reply is queued by now: drain without waiting.
	var (
		errs   []nlError
		endAck bool
	)
	for {
		reply, err := s.recv(false)
		if err != nil {
			// Typically ENOBUFS: replies were dropped, so whether the
			// batch committed is unknown (the kernel may have committed
			// it and then had no room for the replies).
			return 0, generation{}, &refusal{op: "read the kernel's answer", err: err, unknown: true}
		}
		if reply == nil {
			break
		}
		if err := forEachMsg(reply, func(m nlMsg) error {
			if m.typ != unix.NLMSG_ERROR {
				return nil
			}
			ne, ok := parseNLError(m)
			if !ok {
				return nil
			}
			if ne.errno == 0 {
				if ne.seq == b.endSeq {
					endAck = true
				}
				return nil
			}
			errs = append(errs, ne)
			return nil
		}); err != nil {
			return 0, generation{}, &refusal{op: "read the kernel's answer", err: err, unknown: true}
		}
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].seq < errs[j].seq })
		first := errs[0]
		var err error = first.errno
		if first.msg != "" {
			err = fmt.Errorf("%w (%s)", first.errno, first.msg)
		}
		return 0, generation{}, &refusal{op: b.describe(tx, first.seq), err: err, more: len(errs) - 1}
	}
	if endAck {
		k.endAcks.Store(true)
	}
	g1, err := s.getGen(ctx)
	if !endAck {
		// BATCH_END carries NLM_F_ACK: a kernel from 6.10 on acknowledges
		// it only once the batch committed, so with such a kernel no ack
		// and no error means a reply was lost. Older kernels (Debian 12's
		// 6.1, found by hack/vmtest.sh) never acknowledge it and answer a
		// batch only with errors: with one that has not acknowledged a
		// batch end yet, no error and a generation that moved mean the
		// batch committed (a refused batch or a failed commit answers
		// with an error, and lost replies end the read above with
		// ENOBUFS). Anything else is unknown.
		if k.endAcks.Load() || err != nil || g1 == g0 {
			return 0, generation{}, &refusal{err: errors.New("no acknowledgement of the batch end"), unknown: true}
		}
	}
	if err != nil {
		return g0, generation{}, nil
	}
	return g0, generation{g1, true}, nil
}

// nftTableFOwner is NFT_TABLE_F_OWNER (linux/netfilter/nf_tables.h), which
// golang.org/x/sys/unix does not define.
const nftTableFOwner = 0x2

// commitSocket returns the socket a commit goes through: a new one, or the
// owner's, which it keeps open.
func (k *kernelTransport) commitSocket() (*nlSock, error) {
	if !k.owned {
		return k.dial()
	}
	if k.ownerSock == nil {
		s, err := k.dial()
		if err != nil {
			return nil, err
		}
		k.ownerSock = s
	}
	return k.ownerSock, nil
}

// close closes the owner's socket, which makes the kernel delete an owned
// table.
func (k *kernelTransport) close() error {
	if k.ownerSock == nil {
		return nil
	}
	err := k.ownerSock.Close()
	k.ownerSock = nil
	return err
}

func (k *kernelTransport) generation(ctx context.Context) (uint32, error) {
	s, err := k.dial()
	if err != nil {
		return 0, err
	}
	defer s.Close()
	return s.getGen(ctx)
}

func (k *kernelTransport) readTable(ctx context.Context, family uint8, name string) (*kernelTable, error) {
	s, err := k.dial()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return readTable(ctx, s, k.dial, family, name)
}

func (k *kernelTransport) readElements(ctx context.Context, family uint8, table string, sets []string) []elementsRead {
	return readSetsElements(ctx, k.dial, family, table, sets)
}

func (k *kernelTransport) subscribe(ctx context.Context, family uint8, table string, opened func(), notify func(by *Writer)) (bool, error) {
	c, err := dialMonitor(k.netnsFd, k.watchRcvBuf)
	if err != nil {
		return false, err
	}
	defer c.Close()
	opened()
	return watchEvents(ctx, c, family, table, notify, &k.beforeReceive)
}
