package nft

// The Fake's nf_tables events: what the kernel multicasts to the
// NFNLGRP_NFTABLES group after each commit (one message per object added or
// removed, each naming its table, then NEWGEN with the generation and the
// committing process), delivered to its subscribers' queues. Watch and
// WatchCommits read them with the same code that reads the kernel's.

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// defaultFakeEventQueue is how many commits' events a subscriber of the
// Fake holds unread before it overflows.
const defaultFakeEventQueue = 1024

// fakeForeignPID is the process the Fake names for foreign changes: above
// the kernel's PID_MAX_LIMIT (4,194,304), so never a thread of this
// process (Writer.Self is false).
const fakeForeignPID = 1<<22 + 1

// fakeSelf is the process the Fake names for the commits of Tables: this
// process, as the kernel would (its main thread, so Writer.Self is true).
func fakeSelf() Writer {
	name := filepath.Base(os.Args[0])
	if len(name) > 15 { // the kernel's comm is 15 bytes
		name = name[:15]
	}
	return Writer{PID: uint32(os.Getpid()), Name: name}
}

// commitEvents returns the events of one committed transaction of the
// table key that produced generation gen. A flush is one DELRULE naming the
// chain (the kernel sends one per rule removed).
func commitEvents(key fakeKey, ops []Op, gen uint32, by Writer) []netlink.Message {
	fam := familyNum(key.family)
	var out []netlink.Message
	add := func(typ, nameAttr uint16, value string) {
		var e enc
		e.reset(msgType(typ), 0, 0, fam)
		e.str(1, key.name) // NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, …: always attribute 1
		if nameAttr != 0 {
			e.str(nameAttr, value)
		}
		out = append(out, eventMessage(e.finish()))
	}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case OpAddTable:
			add(unix.NFT_MSG_NEWTABLE, 0, "")
		case OpDeleteTable:
			add(unix.NFT_MSG_DELTABLE, 0, "")
		case OpAddChain:
			add(unix.NFT_MSG_NEWCHAIN, unix.NFTA_CHAIN_NAME, op.Name)
		case OpDeleteChain:
			add(unix.NFT_MSG_DELCHAIN, unix.NFTA_CHAIN_NAME, op.Name)
		case OpFlushChain:
			add(unix.NFT_MSG_DELRULE, unix.NFTA_RULE_CHAIN, op.Name)
		case OpAddRules:
			for range op.Chain.Rules {
				add(unix.NFT_MSG_NEWRULE, unix.NFTA_RULE_CHAIN, op.Name)
			}
		case OpAddSet:
			add(unix.NFT_MSG_NEWSET, unix.NFTA_SET_NAME, op.Name)
			if len(op.Elements) > 0 {
				add(unix.NFT_MSG_NEWSETELEM, unix.NFTA_SET_ELEM_LIST_SET, op.Name)
			}
		case OpDeleteSet:
			add(unix.NFT_MSG_DELSET, unix.NFTA_SET_NAME, op.Name)
		case OpAddElements:
			add(unix.NFT_MSG_NEWSETELEM, unix.NFTA_SET_ELEM_LIST_SET, op.Name)
		case OpDeleteElements:
			add(unix.NFT_MSG_DELSETELEM, unix.NFTA_SET_ELEM_LIST_SET, op.Name)
		}
	}
	var e enc
	e.reset(msgType(unix.NFT_MSG_NEWGEN), 0, 0, unix.AF_UNSPEC)
	e.be32(unix.NFTA_GEN_ID, gen)
	e.be32(unix.NFTA_GEN_PROC_PID, by.PID)
	e.str(unix.NFTA_GEN_PROC_NAME, by.Name)
	return append(out, eventMessage(e.finish()))
}

// eventMessage turns an encoded message (netlink header included) into
// what netlink.Conn.Receive returns.
func eventMessage(b []byte) netlink.Message {
	h := netlink.Header{Length: uint32(len(b)), Type: netlink.HeaderType(binary.NativeEndian.Uint16(b[4:6]))}
	return netlink.Message{Header: h, Data: append([]byte(nil), b[16:]...)}
}

// eventQueue is one subscription to the Fake's events, as a socket joined
// to NFNLGRP_NFTABLES receives them: one batch of messages per commit. A
// subscriber that lets more than max batches pile up loses events, and its
// next Receive fails with ENOBUFS, as a socket whose receive buffer
// overflowed does; reading then goes on.
type eventQueue struct {
	mu       sync.Mutex
	batches  [][]netlink.Message
	max      int
	overflow bool
	deadline time.Time
	wake     chan struct{}
	closed   chan struct{}
	once     sync.Once
}

func newEventQueue(max int) *eventQueue {
	return &eventQueue{max: max, wake: make(chan struct{}, 1), closed: make(chan struct{})}
}

var _ eventConn = (*eventQueue)(nil)

// push queues one commit's messages, or records the overflow.
func (q *eventQueue) push(msgs []netlink.Message) {
	q.mu.Lock()
	if len(q.batches) >= q.max {
		q.overflow = true
	} else {
		q.batches = append(q.batches, msgs)
	}
	q.mu.Unlock()
	q.poke()
}

func (q *eventQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Receive returns the next batch, waiting for one until the read deadline
// (os.ErrDeadlineExceeded) or Close (net.ErrClosed).
func (q *eventQueue) Receive() ([]netlink.Message, error) {
	for {
		q.mu.Lock()
		switch {
		case q.overflow:
			q.overflow = false
			q.mu.Unlock()
			return nil, os.NewSyscallError("recvmsg", unix.ENOBUFS)
		case len(q.batches) > 0:
			b := q.batches[0]
			q.batches = q.batches[1:]
			q.mu.Unlock()
			return b, nil
		}
		deadline := q.deadline
		q.mu.Unlock()
		if err := q.wait(deadline); err != nil {
			return nil, err
		}
	}
}

// wait waits for a push, a new deadline or Close.
func (q *eventQueue) wait(deadline time.Time) error {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if d <= 0 {
			return os.ErrDeadlineExceeded
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-q.closed:
		return net.ErrClosed
	case <-expired:
		return os.ErrDeadlineExceeded
	case <-q.wake:
		return nil
	}
}

// SetReadDeadline sets when a waiting Receive gives up (zero: never).
func (q *eventQueue) SetReadDeadline(t time.Time) error {
	q.mu.Lock()
	q.deadline = t
	q.mu.Unlock()
	q.poke()
	return nil
}

// Close ends the subscription: a waiting Receive returns.
func (q *eventQueue) Close() error {
	q.once.Do(func() { close(q.closed) })
	return nil
}
