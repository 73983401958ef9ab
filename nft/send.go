package nft

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"
)

// send opens a fresh socket, sends the batch and reads the kernel's answer.
// It returns the generation read after the commit, and whether the table is
// known to hold exactly what we programmed at that generation: only when
// the caller knew the table at generation want (wantKnown), the generation
// read just before sending is still want (no foreign commit landed since),
// and the one read after is one more (every commit bumps it by exactly one,
// so anything else means another commit came in between).
//
// tx holds the batch's operations (to name the one the kernel refuses);
// summary says what the whole transaction does.
func (t *Table) send(ctx context.Context, b *batch, tx *Transaction, summary string, want uint32, wantKnown bool) (uint32, bool, error) {
	fail := func(op string, err error, more int, unknown bool) error {
		return &Error{Table: t.describe(), Summary: summary, Op: op, Err: err, More: more, unknown: unknown}
	}
	s, err := dialNetfilter(t.cfg.NetNSFd)
	if err != nil {
		return 0, false, fail("", err, 0, false)
	}
	defer s.Close()
	// The send buffer must hold the whole batch (one sendmsg, one skb).
	// Replies are only errors, with NETLINK_CAP_ACK about 40 bytes each but
	// charged to the receive buffer at their skb's true size; room for an
	// error per message means even a batch that fails everywhere is read
	// back completely instead of ending in ENOBUFS.
	rcv := (256 << 10) + b.msgs*1024
	if t.rcvbuf > 0 {
		rcv = t.rcvbuf
	}
	if err := s.setBuffers(b.size+(256<<10), rcv); err != nil {
		return 0, false, fail("", err, 0, false)
	}
	g0, err := s.getGen(ctx)
	if err != nil {
		return 0, false, fail("", err, 0, false)
	}
	if err := s.sendmsg(b.iovecs()); err != nil {
		// Nothing reached nf_tables: netlink_sendmsg failed before
		// delivering (EMSGSIZE, ENOMEM).
		return 0, false, fail("send batch", err, 0, false)
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
			// batch committed is unknown (nftables-go-notes §4.2).
			return 0, false, fail("read the kernel's answer", err, 0, true)
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
			return 0, false, fail("read the kernel's answer", err, 0, true)
		}
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].seq < errs[j].seq })
		first := errs[0]
		var err error = first.errno
		if first.msg != "" {
			err = fmt.Errorf("%w (%s)", first.errno, first.msg)
		}
		return 0, false, fail(b.describe(tx, first.seq), err, len(errs)-1, false)
	}
	if !endAck {
		// BATCH_END carries NLM_F_ACK: the kernel acknowledges it only once
		// the batch committed. No ack and no error means a reply was lost.
		return 0, false, fail("", errors.New("no acknowledgement of the batch end"), 0, true)
	}
	g1, err := s.getGen(ctx)
	if err != nil {
		return 0, false, nil
	}
	if g1 == g0+1 && t.cfg.Generations != nil {
		t.cfg.Generations.committed(t, g0)
	}
	return g1, wantKnown && g0 == want && g1 == g0+1, nil
}
