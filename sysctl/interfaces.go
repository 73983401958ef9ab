package sysctl

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ErrInterfaceGone is wrapped into a configuration error when the interface's
// /proc/sys/net/ipv{4,6}/conf/<if> directory does not exist: the interface was
// removed (or not created yet) and the error is expected, not a fault.
var ErrInterfaceGone = errors.New("interface does not exist")

// DefaultRPFilterPath is read once by NewInterfaces for the rp_filter value
// of workload interfaces that do not allow spoofing, as Felix does.
const DefaultRPFilterPath = "/proc/sys/net/ipv4/conf/default/rp_filter"

// Options configures Interfaces.
type Options struct {
	// IPv4 enables the IPv4 settings (route_localnet, proxy_delay,
	// proxy_arp, forwarding, rp_filter).
	IPv4 bool
	// IPv6 enables the IPv6 settings (proxy_ndp, forwarding). accept_ra=0 is
	// written whenever either family is enabled, as Felix's IPv4 manager
	// also writes it.
	IPv6 bool
	// DefaultRPFilter is written to rp_filter on interfaces that do not allow
	// spoofed source prefixes. Empty means: read DefaultRPFilterPath at
	// NewInterfaces, falling back to "1" if it cannot be read.
	DefaultRPFilter string
	// Logger receives non-fatal write failures and retries; nil discards.
	Logger *slog.Logger
}

// Interfaces configures the sysctls of workload interfaces (configureInterface
// in Felix's felix/dataplane/linux/endpoint_mgr.go; acceptance case 23 in
// docs/acceptance-cases.md lists the writes).
//
// An interface is (re)configured when it is added, when its spoofing setting
// changes, and every time it comes up; only while it is up; and until every
// write succeeded: a failing interface stays pending and is retried by each
// Apply. Interfaces is not safe for concurrent use; the endpoint manager owns it.
type Interfaces struct {
	w        Writer
	opts     Options
	log      *slog.Logger
	rpFilter string

	// wanted holds every workload interface to configure and whether it
	// allows spoofed source prefixes.
	wanted map[string]bool
	// up holds every interface reported up, workload or not.
	up map[string]bool
	// pending holds the wanted interfaces whose settings are not (yet)
	// known to be written; ready those of them that are up, which Apply
	// writes. Apply walks ready alone: a node where thousands of wanted
	// interfaces are not there yet (or not up) does not look at each of
	// them at every change.
	pending map[string]bool
	ready   map[string]bool
	// verifyNext is where the next VerifySome starts reading (see there).
	verifyNext string
	// names is wanted's names in order, for VerifySome; nil after a name
	// came or went. Sorting 10,000 names at every read-back would cost
	// more than the slice of reads it serves.
	names []string
}

// NewInterfaces returns an Interfaces that writes through w.
func NewInterfaces(w Writer, opts Options) *Interfaces {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Interfaces{
		w:        w,
		opts:     opts,
		log:      log,
		rpFilter: opts.DefaultRPFilter,
		wanted:   map[string]bool{},
		up:       map[string]bool{},
		pending:  map[string]bool{},
		ready:    map[string]bool{},
	}
	if s.rpFilter == "" && opts.IPv4 {
		s.rpFilter = "1"
		if v, err := w.Get(DefaultRPFilterPath); err != nil {
			log.Warn("cannot read the default rp_filter, using 1", "error", err)
		} else if v = strings.TrimSpace(v); v != "" {
			// Trimmed, unlike Felix (quirk 13.12 in
			// docs/felix-differences.md), so the value we write is
			// exactly the one we report.
			s.rpFilter = v
		}
	}
	return s
}

// SetInterface declares name a workload interface to configure. With
// allowSpoofing, rp_filter is 0 (the endpoint has allowed spoofed source
// prefixes, and nftables does the reverse-path check instead); otherwise it is
// the default value. The interface is queued if it is new or the setting changed.
func (s *Interfaces) SetInterface(name string, allowSpoofing bool) {
	old, ok := s.wanted[name]
	if ok && old == allowSpoofing {
		return
	}
	if !ok {
		s.names = nil
	}
	s.wanted[name] = allowSpoofing
	s.markPending(name)
}

// RemoveInterface forgets name; nothing is written back (the interface is
// usually being deleted).
func (s *Interfaces) RemoveInterface(name string) {
	if _, ok := s.wanted[name]; ok {
		s.names = nil
	}
	delete(s.wanted, name)
	s.unmarkPending(name)
}

// OnIfaceStateChanged records whether name is up. Coming up queues a wanted
// interface again: a flapping or re-created interface loses its settings.
func (s *Interfaces) OnIfaceStateChanged(name string, up bool) {
	if !up {
		delete(s.up, name)
		delete(s.ready, name)
		return
	}
	if !s.up[name] {
		s.up[name] = true
		if _, ok := s.wanted[name]; ok {
			s.markPending(name)
		}
	}
}

// markPending queues name (a wanted interface) for the next Apply, which
// writes it once it is up.
func (s *Interfaces) markPending(name string) {
	s.pending[name] = true
	if s.up[name] {
		s.ready[name] = true
	}
}

// unmarkPending takes name off the queue.
func (s *Interfaces) unmarkPending(name string) {
	delete(s.pending, name)
	delete(s.ready, name)
}

// Pending reports whether name is wanted and its settings have not all been
// written yet (for example because it is down or a write failed). The
// endpoint manager reports such an endpoint as down.
func (s *Interfaces) Pending(name string) bool { return s.pending[name] }

// PendingUp yields the interfaces that are up and pending (those the next
// Apply writes): every interface reported up for which Pending is true.
func (s *Interfaces) PendingUp() iter.Seq[string] { return maps.Keys(s.ready) }

// Apply configures every pending interface that is up, in name order. It
// returns the failures by interface name, or nil; failed interfaces stay
// pending and are retried by the next Apply. Interfaces that are not up stay
// pending without an error: they are configured when they come up.
func (s *Interfaces) Apply() map[string]error {
	if len(s.ready) == 0 {
		return nil // nothing to write: not even a switch into the namespace
	}
	var errs map[string]error
	err := s.batch(func(w Writer) {
		names := slices.Sorted(maps.Keys(s.ready))
		for _, name := range names {
			if err := s.configure(w, name, s.wanted[name]); err != nil {
				if errs == nil {
					errs = map[string]error{}
				}
				errs[name] = err
				continue
			}
			s.unmarkPending(name)
		}
	})
	if err != nil {
		// Entering the namespace failed: nothing was written, every
		// interface stays pending.
		errs = map[string]error{}
		for name := range s.ready {
			errs[name] = err
		}
	}
	return errs
}

// batch runs fn with a Writer for many operations: inside one switch into
// the namespace when the Writer can do that (Batcher), so that thousands of
// interfaces do not cost two setns calls per file. The error is the
// switch's; fn's failures are its own to record.
func (s *Interfaces) batch(fn func(w Writer)) error {
	if b, ok := s.w.(Batcher); ok {
		return b.Batch(func(w Writer) error { fn(w); return nil })
	}
	fn(s.w)
	return nil
}

// Verify reads back the settings of every configured interface that is up
// and queues again those someone changed, logging what was found; the next
// Apply writes them. A sysctl write makes no event, so this is polled. It
// returns the interfaces queued, in name order.
func (s *Interfaces) Verify() []string {
	return s.VerifySome(len(s.wanted))
}

// VerifySome is Verify for at most n interfaces that are up: those after
// the last one the previous call read, in name order, wrapping around. The
// dataplane calls it with each periodic refresh, so that a large node's
// reads are spread over several refreshes: 80,000 reads at 10,000
// workloads cost most of a CPU second and hundreds of wakeups at once.
func (s *Interfaces) VerifySome(n int) []string {
	var changed []string
	if n <= 0 || len(s.wanted) == 0 {
		return nil
	}
	if s.names == nil {
		s.names = slices.Sorted(maps.Keys(s.wanted))
	}
	names := s.names
	start, _ := slices.BinarySearch(names, s.verifyNext)
	if s.verifyNext == "" || start == len(names) {
		start = 0
	}
	err := s.batch(func(w Writer) {
		yielded := time.Now()
		read := 0
		for i := range names {
			if read == n {
				s.verifyNext = names[(start+i)%len(names)]
				return
			}
			name := names[(start+i)%len(names)]
			if !s.up[name] || s.pending[name] {
				continue
			}
			read++
			// Tens of thousands of reads on a large node, each mostly a
			// system call: without a yield now and then, the runtime's
			// monitor finds this goroutine in a system call on the same
			// time slice after 10 ms, takes its processor away, and then
			// watches every 20 µs, thousands of wakeups a second of
			// the check. A yield every few milliseconds starts a new
			// slice and keeps the monitor asleep.
			if time.Since(yielded) > yieldEvery {
				runtime.Gosched()
				yielded = time.Now()
			}
			for _, st := range steps(name, s.opts.IPv4, s.opts.IPv6, s.wanted[name], s.rpFilter) {
				v, err := w.Get(st.path)
				if err != nil || strings.TrimSpace(v) == st.value {
					continue // unreadable (IPv6 off, say): nothing to compare
				}
				s.log.Info("interface sysctl changed by someone else; rewriting it", "iface", name, "path", st.path, "found", strings.TrimSpace(v), "want", st.value)
				s.markPending(name)
				changed = append(changed, name)
				break
			}
		}
		s.verifyNext = names[start] // a whole round: the next starts here again
	})
	if err != nil {
		s.log.Warn("cannot read interface sysctls back", "error", err)
	}
	slices.Sort(changed)
	return changed
}

// yieldEvery is how long Verify reads before it yields (see Verify): well
// under the runtime's 10 ms time slice.
const yieldEvery = 4 * time.Millisecond

// step is one sysctl write of the interface configuration.
type step struct {
	path, value string
	// fatal: a failure leaves the interface pending. Felix tolerates
	// failures of accept_ra (IPv6 may be disabled) and proxy_delay.
	fatal bool
	// family is the address family whose conf directory tells whether the
	// interface still exists.
	family int
}

// Steps returns, in order, the writes that configure workload interface name,
// with the paths and values of acceptance case 23 (docs/acceptance-cases.md):
// accept_ra 0 always; for IPv4 route_localnet 1, proxy_delay 0, proxy_arp 1,
// forwarding 1 and rp_filter; for IPv6 proxy_ndp 1 and forwarding 1. It is
// exported for tests and for `nftep` to show what it would write.
func Steps(name string, ipv4, ipv6, allowSpoofing bool, defaultRPFilter string) []Write {
	var out []Write
	for _, st := range steps(name, ipv4, ipv6, allowSpoofing, defaultRPFilter) {
		out = append(out, Write{Path: st.path, Value: st.value})
	}
	return out
}

func steps(name string, ipv4, ipv6, allowSpoofing bool, defaultRPFilter string) []step {
	if !ipv4 && !ipv6 {
		return nil
	}
	v4 := "/proc/sys/net/ipv4/conf/" + name + "/"
	v6 := "/proc/sys/net/ipv6/conf/" + name + "/"
	// Written even for an IPv4-only node, and allowed to fail there: a
	// workload must never autoconfigure from router advertisements.
	out := []step{{v6 + "accept_ra", "0", false, 6}}
	if ipv4 {
		rp := defaultRPFilter
		if allowSpoofing {
			rp = "0"
		}
		out = append(out,
			step{v4 + "route_localnet", "1", true, 4},
			step{"/proc/sys/net/ipv4/neigh/" + name + "/proxy_delay", "0", false, 4},
			step{v4 + "proxy_arp", "1", true, 4},
			step{v4 + "forwarding", "1", true, 4},
			step{v4 + "rp_filter", rp, true, 4},
		)
	}
	if ipv6 {
		out = append(out,
			step{v6 + "proxy_ndp", "1", true, 6},
			step{v6 + "forwarding", "1", true, 6},
		)
	}
	return out
}

// configure writes the steps for one interface and stops at the first fatal
// failure; the rest is written on the retry.
func (s *Interfaces) configure(w Writer, name string, allowSpoofing bool) error {
	for _, st := range steps(name, s.opts.IPv4, s.opts.IPv6, allowSpoofing, s.rpFilter) {
		err := w.Set(st.path, st.value)
		if err == nil {
			continue
		}
		gone := interfaceGone(w, name, st.family)
		if gone {
			err = fmt.Errorf("interface %q: %w: %w", name, ErrInterfaceGone, err)
		}
		level := slog.LevelWarn
		if gone {
			level = slog.LevelDebug
		}
		if !st.fatal {
			s.log.Log(context.Background(), level, "optional sysctl write failed", "iface", name, "error", err)
			continue
		}
		s.log.Log(context.Background(), level, "sysctl write failed, will retry", "iface", name, "error", err)
		return err
	}
	return nil
}

// interfaceGone reports whether /proc/sys/net/ipv{4,6}/conf/<name> is missing.
func interfaceGone(w Writer, name string, family int) bool {
	ok, err := w.Exists(fmt.Sprintf("/proc/sys/net/ipv%d/conf/%s", family, name))
	return err == nil && !ok
}
