package nft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Commit is one committed nf_tables transaction, as the kernel announces it
// to NFNLGRP_NFTABLES listeners: the objects it changed, then a NEWGEN.
type Commit struct {
	// Generation is the ruleset generation the commit produced.
	Generation uint32
	// Writer is the process that committed it; nil if the kernel did not
	// say.
	Writer *Writer
	// Tables are the tables it changed, "family name" ("inet nftep"),
	// sorted.
	Tables []string
	// At is when its NEWGEN was received.
	At time.Time
}

// Touches says whether the commit changed table family/name.
func (c Commit) Touches(family Family, name string) bool {
	for _, t := range c.Tables {
		if t == string(family)+" "+name {
			return true
		}
	}
	return false
}

// WatchCommits calls fn for every commit in the namespace netnsFd refers
// to (≤ 0: the caller's), from its own goroutine, until ctx is done. It is
// for measuring and auditing (how long after a change a repair committed;
// who changed what): Table.Watch is what repairs. Events lost to a full
// receive buffer end it with an error.
func WatchCommits(ctx context.Context, netnsFd int, fn func(Commit)) error {
	// Room for the events of a large commit (a repair that re-adds tens of
	// thousands of rules makes an event for each).
	c, err := dialMonitor(netnsFd, 64<<20)
	if err != nil {
		return err
	}
	defer c.Close()
	return watchCommits(ctx, c, fn)
}

// watchCommits reads c's events and calls fn for each commit (the tables
// its object events named, then its NEWGEN), until ctx is done (nil) or c
// fails.
func watchCommits(ctx context.Context, c eventConn, fn func(Commit)) error {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	tables := map[string]bool{}
	for {
		msgs, err := c.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			return fmt.Errorf("nf_tables events lost: %w", err)
		}
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if isNewGen(m) {
				cm := Commit{Generation: parseGenID(m.Data), Writer: parseWriter(m.Data), At: time.Now()}
				for t := range tables {
					cm.Tables = append(cm.Tables, t)
				}
				sort.Strings(cm.Tables)
				clear(tables)
				fn(cm)
				continue
			}
			if t := eventTable(m); t != "" {
				tables[t] = true
			}
		}
	}
}

// eventTable is the "family name" of the table an object event is about,
// or "".
func eventTable(m netlink.Message) string {
	if uint16(m.Header.Type)>>8 != unix.NFNL_SUBSYS_NFTABLES || isNewGen(m) || len(m.Data) < 4 {
		return ""
	}
	fam, ok := familyNames[m.Data[0]]
	if !ok {
		fam = fmt.Sprintf("family%d", m.Data[0])
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return ""
	}
	for ad.Next() {
		if ad.Type() == 1 {
			return fam + " " + ad.String()
		}
	}
	return ""
}

// familyNames are nft's names of the table families.
var familyNames = map[uint8]string{
	unix.NFPROTO_INET: "inet", unix.NFPROTO_IPV4: "ip", unix.NFPROTO_IPV6: "ip6",
	unix.NFPROTO_ARP: "arp", unix.NFPROTO_BRIDGE: "bridge", unix.NFPROTO_NETDEV: "netdev",
}

// parseGenID reads NFTA_GEN_ID from a NEWGEN message.
func parseGenID(data []byte) uint32 {
	if len(data) < 4 {
		return 0
	}
	ad, err := netlink.NewAttributeDecoder(data[4:])
	if err != nil {
		return 0
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		if ad.Type() == unix.NFTA_GEN_ID {
			return ad.Uint32()
		}
	}
	return 0
}
