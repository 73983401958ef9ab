package takeover

import (
	"errors"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Felix's iptables mode names its ipsets cali40<id> (IPv4) and cali60<id>
// (IPv6); while it rewrites one it uses a temporary cali4t/cali6t copy.
var ipsetPrefixes = []string{"cali40", "cali60", "cali4t", "cali6t"}

// ipsetErrBusy is IPSET_ERR_BUSY (linux/netfilter/ipset/ip_set.h), what
// the kernel answers when destroying a set something refers to.
const ipsetErrBusy = syscall.Errno(4100)

// isCalicoIPSet says whether an ipset is Felix's.
func isCalicoIPSet(name string) bool {
	for _, p := range ipsetPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// CleanIPSets destroys Calico's ipsets that nothing refers to, over netlink
// (ip_set's own protocol; the `ipset` tool is not needed), and records the
// ones something still refers to. The kernel refuses to destroy a set in
// use (EBUSY), and a rule removed by the transaction just before releases
// its reference only when the kernel has finished freeing it, a moment
// later: so a set that is busy but was referred to only by removed rules
// is tried again for a short while.
func (s *Sweeper) CleanIPSets() {
	c, err := dialIPSet(s.ns.Fd())
	if err != nil {
		s.log.Warn("cannot list ipsets", "error", err)
		return
	}
	defer c.Close()
	sets, err := c.list()
	if err != nil {
		if errors.Is(err, syscall.EPROTONOSUPPORT) || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EOPNOTSUPP) {
			return // no ip_set in this kernel: nothing to clean
		}
		s.log.Warn("cannot list ipsets", "error", err)
		return
	}
	var names []string
	for name := range sets {
		if isCalicoIPSet(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var kept []KeptIPSet
	removed := 0
	deadline := time.Now().Add(time.Second)
	for len(names) > 0 {
		var busy []string
		for _, n := range names {
			err := c.destroy(n)
			switch {
			case err == nil || errors.Is(err, syscall.ENOENT):
				removed++
			case errors.Is(err, syscall.EBUSY) || errors.Is(err, ipsetErrBusy):
				// Still in use.
				busy = append(busy, n)
			default:
				s.log.Warn("cannot remove Calico's ipset", "ipset", n, "error", err)
				kept = append(kept, KeptIPSet{Name: n, References: -1})
			}
		}
		names = busy
		if len(names) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, n := range names {
		refs := -1
		if now, err := c.list(); err == nil {
			if r, ok := now[n]; ok {
				refs = r
			}
		}
		kept = append(kept, KeptIPSet{Name: n, References: refs})
	}
	slices.SortFunc(kept, func(a, b KeptIPSet) int { return strings.Compare(a.Name, b.Name) })
	s.mu.Lock()
	s.report.RemovedIPSets += removed
	s.report.IPSetsKept = kept
	s.mu.Unlock()
	if removed > 0 {
		s.log.Info("removed Calico's ipsets nothing refers to", "ipsets", removed)
	}
	if len(kept) > 0 {
		ks := make([]string, len(kept))
		for i, k := range kept {
			ks[i] = k.Name
		}
		s.log.Warn("Calico's ipsets still in use are kept (iptables-legacy rules refer to them?); `ipset list -t` shows their references",
			"ipsets", strings.Join(ks, ","))
	}
}
