package takeover_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
)

// The recordings of what a real Felix left (testdata/felix/leftovers at the
// repository's root; see its README.md).
const (
	nftModeFile   = "felix-nft-mode.nft"
	ipsetFile     = "felix-iptables-nft.ipset-save"
	iptablesFile  = "felix-iptables-nft.iptables-save"
	ip6tablesFile = "felix-iptables-nft.ip6tables-save"
)

// leftover returns the path of a recording of testdata/felix/leftovers.
func leftover(t testing.TB, name string) string {
	t.Helper()
	return testutil.FelixRecording(t, "leftovers/"+name)
}

// needTools skips the test when a tool it loads state with is missing
// (.ci/run installs them), and fails it under CI.
func needTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (.ci/run installs it)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// legacyWarning is a line iptables-nft-save printed on stderr that the
// recording interleaved with its stdout, in the middle of a rule: it is cut
// out (rejoining the rule) before the file is restored.
var legacyWarning = regexp.MustCompile(`# Warning: ip6?tables-legacy tables present, use ip6?tables-legacy-save to see them\n`)

// restore feeds a file to a command in the namespace.
func restore(t testing.TB, ns *netnstest.NS, data []byte, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
}

// loadNFTMode loads what Felix's nftables mode left: `ip calico`,
// `ip6 calico`, `arp calico-arp`.
func loadNFTMode(t testing.TB, ns *netnstest.NS) {
	t.Helper()
	ns.Run(t, "nft", "-f", leftover(t, nftModeFile))
}

// loadIptablesMode loads what Felix's iptables mode over iptables-nft left:
// its ipsets, then its rules, added to what the tables hold (--noflush).
func loadIptablesMode(t testing.TB, ns *netnstest.NS) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(leftover(t, name))
		require.NoError(t, err)
		return legacyWarning.ReplaceAll(b, nil)
	}
	restore(t, ns, read(ipsetFile), "ipset", "restore")
	restore(t, ns, read(iptablesFile), "iptables-nft-restore", "--noflush")
	restore(t, ns, read(ip6tablesFile), "ip6tables-nft-restore", "--noflush")
}

// loadNeighbours loads the node's other tenants: kube-proxy's, firewalld's
// and a Tailscale-like table (testdata/neighbours.nft), Docker's chains and
// a user's rule in iptables-nft's tables (testdata/neighbours.iptables),
// and a Tailscale-style chain in `ip filter` that iptables cannot show.
func loadNeighbours(t testing.TB, ns *netnstest.NS) {
	t.Helper()
	ns.Run(t, "nft", "-f", "testdata/neighbours.nft")
	b, err := os.ReadFile("testdata/neighbours.iptables")
	require.NoError(t, err)
	restore(t, ns, b, "iptables-nft-restore", "--noflush")
	ns.Run(t, "nft", "add", "chain", "ip", "filter", "ts-input")
	ns.Run(t, "nft", "add", "rule", "ip", "filter", "ts-input", "ip", "saddr", "{ 100.64.0.0/10 }", "accept")
}

// tableListings returns `nft -a -s list table` of every table of the
// namespace, by "family name": with handles, without counters (traffic
// changes those).
func tableListings(t testing.TB, ns *netnstest.NS) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(ns.Run(t, "nft", "list", "tables")), "\n") {
		f := strings.Fields(l) // table <family> <name>
		if len(f) != 3 {
			continue
		}
		out[f[1]+" "+f[2]] = ns.Run(t, "nft", "-a", "-s", "list", "table", f[1], f[2])
	}
	return out
}

// ipsets lists the namespace's ipsets, sorted.
func ipsets(t testing.TB, ns *netnstest.NS) []string {
	t.Helper()
	out := strings.Fields(ns.Run(t, "ipset", "list", "-n"))
	sort.Strings(out)
	return out
}
