package takeover_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/takeover"
)

// sweeperFor opens the test namespace for a Sweeper.
func sweeperFor(t testing.TB, node *netnstest.NS) *takeover.Sweeper {
	t.Helper()
	ns, err := netnsutil.Open(node.Name)
	require.NoError(t, err)
	t.Cleanup(func() { ns.Close() })
	return takeover.New(ns, nil)
}

// TestKernelSweepRemovesLeftoversOnly loads both of a real Felix's
// leftovers (nftables mode's tables; iptables mode's chains, rules and
// ipsets over iptables-nft) into a namespace that also holds kube-proxy's,
// firewalld's, Docker's, a user's and a Tailscale-like table's objects, and
// sweeps once: Calico's objects are gone, every other table reads back
// byte for byte as before Calico's were loaded (handles included), and no
// Calico ipset is left.
func TestKernelSweepRemovesLeftoversOnly(t *testing.T) {
	needTools(t, "nft", "ipset", "iptables-nft-restore", "ip6tables-nft-restore")
	node := netnstest.New(t)
	loadNeighbours(t, node)
	before := tableListings(t, node)
	loadNFTMode(t, node)
	loadIptablesMode(t, node)
	loaded := tableListings(t, node)
	for _, tbl := range []string{"ip calico", "ip6 calico", "arp calico-arp"} {
		require.Contains(t, loaded, tbl)
	}
	require.Contains(t, loaded["ip filter"], "jump cali-INPUT")
	require.NotEmpty(t, ipsets(t, node))

	s := sweeperFor(t, node)
	ctx := context.Background()
	f, err := s.Sweep(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"ip calico", "ip6 calico", "arp calico-arp"}, f.Tables)
	assert.NotEmpty(t, f.Chains)
	// FORWARD's jump, its mark accept and its mark set (those two jump
	// nowhere: found by their "cali:" comment), and one jump per other
	// base chain Felix used, in both families.
	assert.GreaterOrEqual(t, f.Rules, 2*(3+2+2+4))
	t.Logf("removed: %s", f)

	after := tableListings(t, node)
	for tbl, want := range before {
		assert.Equal(t, want, after[tbl], "table %s changed", tbl)
	}
	for tbl, got := range after {
		if _, ok := before[tbl]; ok {
			continue
		}
		// iptables-nft's tables that Calico's restore created stay, with
		// their (now empty) base chains: they are iptables-nft's.
		assert.NotContains(t, []string{"ip calico", "ip6 calico", "arp calico-arp"}, tbl)
		assert.NotContains(t, got, "cali", "table %s", tbl)
	}
	assert.Empty(t, ipsets(t, node), "ipset list shows Calico's sets")
	r := s.Report()
	assert.Equal(t, 3, r.RemovedTables)
	assert.Equal(t, 10, r.RemovedIPSets)
	assert.Empty(t, r.IPSetsKept)

	again, err := s.Find(ctx)
	require.NoError(t, err)
	assert.True(t, again.Empty(), "left after the sweep: %v", again.Ops)
}

// TestKernelLegacyReportedAndReferencedIPSetKept puts Calico-like rules in
// iptables-legacy (x_tables), one of them matching a Calico ipset: the
// table is reported with its counts and commands, the ipset is kept with
// its reference, and the documented command removes Calico's chains and
// rules from the legacy table and nothing else.
func TestKernelLegacyReportedAndReferencedIPSetKept(t *testing.T) {
	needTools(t, "ipset", "iptables-legacy", "ip6tables-legacy", "iptables-legacy-save", "iptables-legacy-restore")
	node := netnstest.New(t)
	node.Run(t, "ipset", "create", "cali40s:stale", "hash:net")
	node.Run(t, "ipset", "create", "cali40unused", "hash:ip")
	node.Run(t, "iptables-legacy", "-N", "cali-INPUT")
	node.Run(t, "iptables-legacy", "-A", "INPUT", "-m", "comment", "--comment", "cali:Cz_u1IQiXIMmKD4c", "-j", "cali-INPUT")
	node.Run(t, "iptables-legacy", "-A", "cali-INPUT", "-m", "set", "--match-set", "cali40s:stale", "src", "-j", "DROP")
	node.Run(t, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "--dport", "2222", "-j", "DROP")
	node.Run(t, "ip6tables-legacy", "-N", "cali-FORWARD")
	node.Run(t, "ip6tables-legacy", "-A", "FORWARD", "-j", "cali-FORWARD")
	node.Run(t, "ip6tables-legacy", "-N", "user-chain")
	node.Run(t, "ip6tables-legacy", "-t", "mangle", "-N", "empty") // no rule: not reported

	s := sweeperFor(t, node)
	tables, err := s.CheckLegacy()
	require.NoError(t, err)
	require.Len(t, tables, 2)
	assert.Equal(t, takeover.LegacyTable{Family: "ipv6", Table: "filter", Rules: 1, CalicoChains: 1,
		Inspect: "ip6tables-legacy-save -t filter",
		Remove:  `ip6tables-legacy-save -t filter | grep -v -e '^:cali-' -e '^-A cali-' -e ' -[jg] cali-' -e '"cali:' | ip6tables-legacy-restore -T filter`}, tables[1])
	lt := tables[0]
	assert.Equal(t, "ipv4", lt.Family)
	assert.Equal(t, "filter", lt.Table)
	assert.Equal(t, 3, lt.Rules)
	assert.Equal(t, 1, lt.CalicoChains)
	assert.Equal(t, "iptables-legacy-save -t filter", lt.Inspect)

	s.CleanIPSets()
	r := s.Report()
	assert.Equal(t, 1, r.RemovedIPSets)
	assert.Equal(t, []takeover.KeptIPSet{{Name: "cali40s:stale", References: 1}}, r.IPSetsKept)
	assert.Equal(t, []string{"cali40s:stale"}, ipsets(t, node))
	require.Len(t, r.Legacy, 2)

	// The documented removal: Calico's chain and rules go, the user's
	// rule stays, and then the ipset is free.
	node.Run(t, "sh", "-c", lt.Remove)
	save := node.Run(t, "iptables-legacy-save", "-t", "filter")
	assert.NotContains(t, save, "cali")
	assert.Contains(t, save, "--dport 2222 -j DROP")
	tables, err = s.CheckLegacy()
	require.NoError(t, err)
	require.Len(t, tables, 2)
	assert.Equal(t, 1, tables[0].Rules)
	assert.Equal(t, 0, tables[0].CalicoChains)
	s.CleanIPSets()
	assert.Empty(t, ipsets(t, node))
	assert.Empty(t, s.Report().IPSetsKept)
}

// TestKernelKeepRemovesReaddedLeftovers runs Keep and re-adds Felix's
// nftables-mode tables (as a restarted Felix would) and an iptables-mode
// jump into `ip filter`, again and again: each is gone within a second. The
// time from the commit that added them to the one that removed them is
// measured from the namespace's commit notifications.
func TestKernelKeepRemovesReaddedLeftovers(t *testing.T) {
	needTools(t, "nft", "iptables-nft")
	node := netnstest.New(t)
	loadNeighbours(t, node)
	before := tableListings(t, node)
	s := sweeperFor(t, node)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu      sync.Mutex
		commits []nft.Commit
	)
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = nft.WatchCommits(watchCtx, node.Fd(), func(c nft.Commit) {
			mu.Lock()
			commits = append(commits, c)
			mu.Unlock()
		})
	})
	wg.Go(func() { s.Keep(ctx) })
	time.Sleep(200 * time.Millisecond) // both subscribed

	const rounds = 10
	var lat []time.Duration
	for i := 0; i < rounds; i++ {
		mu.Lock()
		commits = nil
		mu.Unlock()
		if i%2 == 0 {
			loadNFTMode(t, node)
		} else {
			// One commit, as Felix's iptables-restore makes it.
			restore(t, node, []byte("*filter\n:cali-INPUT - [0:0]\n-I INPUT -m comment --comment \"cali:Cz_u1IQiXIMmKD4c\" -j cali-INPUT\n-A cali-INPUT -j DROP\nCOMMIT\n"),
				"iptables-nft-restore", "--noflush")
		}
		var added, removed time.Time
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range commits {
				self := c.Writer != nil && c.Writer.Self()
				if !self && added.IsZero() {
					added = c.At
				}
				if self && !added.IsZero() {
					removed = c.At
					return true
				}
			}
			return false
		}, 2*time.Second, 5*time.Millisecond, "round %d: leftovers not removed", i)
		lat = append(lat, removed.Sub(added))
		f, err := s.Find(ctx)
		require.NoError(t, err)
		require.True(t, f.Empty(), "round %d: still there: %v", i, f.Ops)
	}
	cancel()
	stopWatch()
	wg.Wait()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("re-added leftovers removed after: p50 %v, max %v (%d rounds)", lat[len(lat)/2], lat[len(lat)-1], rounds)
	assert.Less(t, lat[len(lat)-1], time.Second)

	after := tableListings(t, node)
	for tbl, want := range before {
		assert.Equal(t, want, after[tbl], "table %s changed", tbl)
	}
	assert.Equal(t, rounds, s.Report().Sweeps)
}

// TestKernelReadForeignSeesComments checks the reader on iptables-nft's
// encodings: a rule's comment match (xt "comment") and its jump target.
func TestKernelReadForeignSeesComments(t *testing.T) {
	needTools(t, "iptables-nft")
	node := netnstest.New(t)
	node.Run(t, "iptables-nft", "-N", "cali-FORWARD")
	node.Run(t, "iptables-nft", "-A", "FORWARD", "-m", "comment", "--comment", "cali:abc", "-m", "comment", "--comment", "second", "-j", "cali-FORWARD")
	tables, err := nft.ReadForeign(context.Background(), node.Fd(), func(f nft.Family, n string) bool { return n == "filter" }, true)
	require.NoError(t, err)
	require.Len(t, tables, 1)
	fwd := tables[0].Chain("FORWARD")
	require.NotNil(t, fwd)
	require.True(t, fwd.Base)
	require.Len(t, fwd.Rules, 1)
	assert.Equal(t, []string{"cali-FORWARD"}, fwd.Rules[0].Targets)
	assert.True(t, slices.ContainsFunc(fwd.Rules[0].Comments, func(c string) bool { return strings.HasPrefix(c, "cali:") }), "comments: %q", fwd.Rules[0].Comments)
}
