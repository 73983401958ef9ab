package routes

import (
	"log/slog"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
)

// ctCleaner deletes the conntrack entries of addresses whose route went
// away or moved (B10), in the background, as Felix does.
//
// Why in the background: the kernel has no "delete by address"; the only
// way is to dump the conntrack table and delete what matches, and a dump
// walks the whole conntrack hash, which all namespaces share (262,144
// buckets here: ~10 ms even when empty). Apply must not pay that for every
// removal. Addresses queued while a dump runs are batched into the next one.
//
// Ordering: a route that adds an address with a pending cleanup waits for
// it (busy, then waitAll), so the cleanup can never cut the new route's
// flows. Apply does that wait without holding the table's lock.
type ctCleaner struct {
	dp  dataplane
	log *slog.Logger

	mu   sync.Mutex
	cond *sync.Cond
	// pending addresses wait for the next batch; running ones are in the
	// batch being cleaned.
	pending map[netip.Addr]struct{}
	running map[netip.Addr]struct{}
	working bool
	warned  bool
	// waiters counts callers blocked in waitAll (tests watch it).
	waiters int
}

func newCTCleaner(dp dataplane, log *slog.Logger) *ctCleaner {
	c := &ctCleaner{dp: dp, log: log, pending: map[netip.Addr]struct{}{}}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// queue schedules the cleanup of addrs, starting a worker if none runs.
// The worker exits when nothing is left, so an idle table has no goroutine.
func (c *ctCleaner) queue(addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range addrs {
		c.pending[a] = struct{}{}
	}
	if !c.working {
		c.working = true
		go c.work()
	}
}

// busy reports whether addr has a pending or running cleanup.
func (c *ctCleaner) busy(addr netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busyWith(addr)
}

// waitAll blocks until none of addrs has a pending or running cleanup.
func (c *ctCleaner) waitAll(addrs []netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiters++
	defer func() { c.waiters-- }()
	for _, a := range addrs {
		for c.busyWith(a) {
			c.cond.Wait()
		}
	}
}

// waiting returns how many callers are blocked in waitAll.
func (c *ctCleaner) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiters
}

// waitIdle blocks until every queued cleanup is done (tests use it).
func (c *ctCleaner) waitIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.working {
		c.cond.Wait()
	}
}

func (c *ctCleaner) busyWith(addr netip.Addr) bool {
	_, p := c.pending[addr]
	_, r := c.running[addr]
	return p || r
}

func (c *ctCleaner) work() {
	c.mu.Lock()
	for len(c.pending) > 0 {
		c.running, c.pending = c.pending, map[netip.Addr]struct{}{}
		batch := c.running
		c.mu.Unlock()
		c.clean(batch)
		c.mu.Lock()
		c.running = nil
		c.cond.Broadcast()
	}
	c.working = false
	c.cond.Broadcast()
	c.mu.Unlock()
}

// clean runs one conntrack dump per family for the batch:
//
//	conntrack -D -s <ip>; conntrack -D -d <ip>; conntrack -D -r <ip>; conntrack -D -q <ip>
//
// Failures are logged only: the routes are right, and stale flows time out.
func (c *ctCleaner) clean(batch map[netip.Addr]struct{}) {
	byFamily := map[int]ipSetFilter{}
	for a := range batch {
		fam := netlink.FAMILY_V6
		if a.Is4() {
			fam = netlink.FAMILY_V4
		}
		if byFamily[fam] == nil {
			byFamily[fam] = ipSetFilter{}
		}
		byFamily[fam][a] = struct{}{}
	}
	for fam, ips := range byFamily {
		n, err := c.dp.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(fam), ips)
		switch {
		case err == nil:
			c.log.Debug("deleted conntrack entries", "family", familyName(fam), "addresses", len(ips), "entries", n)
		case isConntrackUnavailable(err):
			c.mu.Lock()
			warn := !c.warned
			c.warned = true
			c.mu.Unlock()
			if warn {
				c.log.Warn("conntrack netlink unavailable: entries of removed routes are not cleaned", "error", err)
			}
		default:
			c.log.Warn("conntrack cleanup failed", "family", familyName(fam), "addresses", len(ips), "error", err)
		}
	}
}
