package nft

// Drift detection by event: the kernel multicasts every committed nf_tables
// change to the NFNLGRP_NFTABLES group of a NETLINK_NETFILTER socket in the
// same namespace (nf_tables_api.c's notifications, what `nft monitor`
// prints). Watch listens there and tells its caller when a change concerns
// the table, so that someone flushing our dispatch chain is repaired within
// moments instead of at the next periodic resync.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// defaultWatchRcvBuf is the receive buffer Watch asks for. When it
// overflows (events lost, ENOBUFS), Watch reports a change anyway, so the
// size only decides how often a large commit of our own ends in that
// report.
const defaultWatchRcvBuf = 4 << 20

// Watch calls notify whenever the kernel reports a committed change to the
// table (a table, chain, rule, set, element, object or flowtable of its
// family and name added or removed), until ctx is done. Changes to other
// tables do not notify. It also calls notify when changes may have been
// missed: once its subscription is open (changes made before are not
// reported), when the subscription's receive buffer overflowed (ENOBUFS),
// and after a failed subscription was opened again (with backoff). It
// returns once ctx is done, having closed its socket.
//
// notify runs on Watch's goroutine and must not block; it is called at
// most once per batch of events the socket delivers, which may hold any
// number of changes. Watch may run concurrently with the Table's other
// methods (it only reads the table's configuration), but notify must not
// use the Table itself: the caller owns the Table and should resync it
// from its own goroutine (see Resync).
//
// Our own commits are reported too. That is harmless: a Resync right after
// one of them finds the ruleset generation that commit produced and skips
// the read, and a Resync that finds nothing to repair sends nothing, so
// commits no transaction and makes the kernel report nothing: there is no
// feedback loop. Someone who keeps changing the table makes the caller
// repair it as often as the caller lets notify trigger a resync.
//
// A subscription has a cost beyond Watch itself: while anyone listens, the
// kernel builds an event for every object a commit adds or removes, which
// makes a large commit of ours take longer (a cold start of 10,000
// workloads: 3.4 to 4.0 s in the kernel instead of 2.1 s). Callers should start Watch after such
// a commit; the notification on subscribing covers the gap.
func (t *Table) Watch(ctx context.Context, notify func()) {
	backoff := t.tune.watchBackoffMin
	for failed := false; ctx.Err() == nil; failed = true {
		if failed {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, t.tune.watchBackoffMax)
		}
		// Changes made before the subscription, or while a failed one
		// was down, were not reported: notify once it is open.
		opened := func() {
			if t.tune.watchSubscribed != nil {
				t.tune.watchSubscribed()
			}
			notify()
		}
		changed := func(by *Writer) {
			if by != nil && !by.Self() {
				t.writer.Store(by)
			}
			notify()
		}
		got, err := t.tr.subscribe(ctx, t.family, t.cfg.Name, opened, changed)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = t.tune.watchBackoffMin
		}
		t.log.Warn("nftables event subscription failed; resubscribing", "table", t.describe(), "in", backoff, "error", err)
		notify()
	}
}

// Writer is a process that committed a change, as the kernel names it in
// the NEWGEN message that ends every commit (NFTA_GEN_PROC_PID and
// NFTA_GEN_PROC_NAME: the pid and comm of the committing task).
type Writer struct {
	// PID is the committing task's id: for a multi-threaded process such
	// as nftep, the id of the thread (task_pid_nr), not of the process.
	PID  uint32
	Name string
}

func (w Writer) String() string { return fmt.Sprintf("%s (pid %d)", w.Name, w.PID) }

// Self says whether the writer is a thread of this process (seen in its
// /proc/self/task, so only when both share a pid namespace).
func (w Writer) Self() bool {
	_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", w.PID))
	return err == nil
}

// parseWriter reads the process of a NEWGEN message; nil if it names none.
func parseWriter(data []byte) *Writer {
	if len(data) < 4 {
		return nil
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return nil
	}
	ad.ByteOrder = binary.BigEndian
	w := &Writer{}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_GEN_PROC_PID:
			w.PID = ad.Uint32()
		case unix.NFTA_GEN_PROC_NAME:
			w.Name = ad.String()
		}
	}
	if ad.Err() != nil || w.PID == 0 {
		return nil
	}
	return w
}

// eventConn is what the readers of nf_tables events (Watch, WatchCommits,
// TraceListener) need of their socket: a *netlink.Conn joined to a
// multicast group, or the Fake's event queue.
type eventConn interface {
	Receive() ([]netlink.Message, error)
	SetReadDeadline(t time.Time) error
	Close() error
}

// dialMonitor opens a NETLINK_NETFILTER socket in the namespace netnsFd
// refers to (≤ 0: the caller's) subscribed to nf_tables events.
func dialMonitor(netnsFd, rcvbuf int) (*netlink.Conn, error) {
	return dialGroup(netnsFd, unix.NFNLGRP_NFTABLES, "nf_tables event", rcvbuf)
}

// dialGroup opens a NETLINK_NETFILTER socket in the namespace netnsFd
// refers to (≤ 0: the caller's), joined to the multicast group, with a
// receive buffer of rcvbuf bytes (a smaller one only overflows sooner).
func dialGroup(netnsFd int, group uint32, what string, rcvbuf int) (*netlink.Conn, error) {
	c, err := dialConn(netnsFd)
	if err != nil {
		return nil, err
	}
	if err := c.JoinGroup(group); err != nil {
		c.Close()
		return nil, fmt.Errorf("join the %s group: %w", what, err)
	}
	_ = c.SetReadBuffer(rcvbuf)
	return c, nil
}

// watchEvents reads events from c until ctx is done (nil) or the socket
// fails (the error). A commit that changed the table is reported through
// notify when its NEWGEN arrives (the kernel sends it after the commit's
// object events), with the process that committed it. An overflow is
// reported through notify too, without a process, and reading goes on: the
// socket stays subscribed. got tells whether any read succeeded.
//
// beforeReceive, when it holds a function, is called before each read
// (tests hold the reader there to make its buffer overflow).
func watchEvents(ctx context.Context, c eventConn, family uint8, table string, notify func(by *Writer), beforeReceive *atomic.Pointer[func()]) (got bool, err error) {
	// Close does not wait for Receive's lock: it interrupts a blocked read.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// concerned: a commit changed the table and its NEWGEN is still to
	// come.
	concerned := false
	for {
		if hold := beforeReceive.Load(); hold != nil {
			(*hold)()
		}
		msgs, err := c.Receive()
		if ctx.Err() != nil {
			return got, nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			concerned = false
			notify(nil)
			continue
		}
		if err != nil {
			return got, err
		}
		got = true
		for _, m := range msgs {
			switch {
			case eventConcerns(m, family, table):
				concerned = true
			case concerned && isNewGen(m):
				concerned = false
				notify(parseWriter(m.Data))
			}
		}
	}
}

// isNewGen reports whether m is the NEWGEN message that ends a commit.
func isNewGen(m netlink.Message) bool {
	return uint16(m.Header.Type) == unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWGEN
}

// eventConcerns reports whether the nf_tables event m is about the table
// family/name. Every object message (NEW/DEL/DESTROY of tables, chains,
// rules, sets, elements, objects, flowtables) carries the table's name as
// its attribute 1 (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, NFTA_RULE_TABLE,
// NFTA_SET_TABLE, NFTA_SET_ELEM_LIST_TABLE, NFTA_OBJ_TABLE,
// NFTA_FLOWTABLE_TABLE) and the family in its nfgenmsg; NEWGEN, sent after
// every commit, names no table.
func eventConcerns(m netlink.Message, family uint8, table string) bool {
	typ := uint16(m.Header.Type)
	if typ>>8 != unix.NFNL_SUBSYS_NFTABLES || typ&0xff == unix.NFT_MSG_NEWGEN {
		return false
	}
	if len(m.Data) < 4 || m.Data[0] != family {
		return false
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return false
	}
	for ad.Next() {
		if ad.Type() == 1 {
			return ad.String() == table
		}
	}
	return false
}
