package nft

// Drift detection by event: the kernel multicasts every committed nf_tables
// change to the NFNLGRP_NFTABLES group of a NETLINK_NETFILTER socket in the
// same namespace (nf_tables_api.c's notifications, what `nft monitor`
// prints). Watch listens there and tells its caller when a change concerns
// the table, so that someone flushing our dispatch chain is repaired within
// moments instead of at the next periodic resync.

import (
	"context"
	"errors"
	"fmt"
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
		}
		// Changes made before the subscription, or while a failed one
		// was down, were not reported: notify once it is open.
		opened := func() {
			if t.tune.watchSubscribed != nil {
				t.tune.watchSubscribed()
			}
			notify()
		}
		got, err := t.tr.subscribe(ctx, t.family, t.cfg.Name, opened, notify)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = t.tune.watchBackoffMin
		}
		t.log.Warn("nftables event subscription failed; resubscribing", "table", t.describe(), "in", backoff, "error", err)
		notify()
		backoff = min(2*backoff, t.tune.watchBackoffMax)
	}
}

// dialMonitor opens a NETLINK_NETFILTER socket in the namespace netnsFd
// refers to (≤ 0: the caller's) subscribed to nf_tables events.
func dialMonitor(netnsFd, rcvbuf int) (*netlink.Conn, error) {
	cfg := &netlink.Config{}
	if netnsFd > 0 {
		cfg.NetNS = netnsFd
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	if err := c.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		c.Close()
		return nil, fmt.Errorf("join the nf_tables event group: %w", err)
	}
	_ = c.SetReadBuffer(rcvbuf) // a smaller buffer only overflows sooner
	return c, nil
}

// watchEvents reads events from c until ctx is done (nil) or the socket
// fails (the error). An overflow is reported through notify, and reading
// goes on: the socket stays subscribed. got tells whether any read
// succeeded.
//
// beforeReceive, when it holds a function, is called before each read
// (tests hold the reader there to make its buffer overflow).
func watchEvents(ctx context.Context, c *netlink.Conn, family uint8, table string, notify func(), beforeReceive *atomic.Pointer[func()]) (got bool, err error) {
	// Close does not wait for Receive's lock: it interrupts a blocked read.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	for {
		if hold := beforeReceive.Load(); hold != nil {
			(*hold)()
		}
		msgs, err := c.Receive()
		if ctx.Err() != nil {
			return got, nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			notify()
			continue
		}
		if err != nil {
			return got, err
		}
		got = true
		for _, m := range msgs {
			if eventConcerns(m, family, table) {
				notify()
				break
			}
		}
	}
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
