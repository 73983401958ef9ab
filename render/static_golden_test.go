package render

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
)

// staticModel is the inet table with no endpoints: Static alone.
func staticModel(cfg Config) *nft.Model {
	m := nft.NewModel(nft.FamilyINet, cfg.TableName)
	chains, sets := Static(cfg)
	for _, s := range sets {
		m.SetSet(s)
	}
	for _, c := range chains {
		m.SetChain(c)
	}
	return m
}

// TestStaticGolden pins the whole table of a node without endpoints
// (acceptance case 1 in docs/acceptance-cases.md): base chains and wiring,
// dispatch chains with their defaults, empty maps and sets, failsafe and
// workload-to-host chains.
func TestStaticGolden(t *testing.T) {
	cfg := DefaultConfig()
	testutil.Golden(t, staticGolden, staticModel(cfg).String()+buildARPModel(cfg).String())
}

// staticGolden holds the nft text of TestStaticGolden.
const staticGolden = "testdata/static.nft"

// TestStaticGoldenIPv6Off pins the table of a node without endpoints when
// Ipv6Support is false as the lines it loses against TestStaticGolden's: the
// IPv6 RPF-skip set, the rule that looks it up, and the ICMPv6 neighbour
// discovery and MLD allowances. Nothing else changes, and nothing is added.
func TestStaticGoldenIPv6Off(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IPv6 = false
	off := strings.Split(staticModel(cfg).String()+buildARPModel(cfg).String(), "\n")
	golden, err := os.ReadFile(staticGolden)
	if err != nil {
		t.Fatal(err)
	}
	on := strings.Split(string(golden), "\n")
	// off must be on with some lines removed: walk on, matching off in
	// order, and collect what is left over.
	var removed []string
	j := 0
	for _, l := range on {
		if j < len(off) && l == off[j] {
			j++
			continue
		}
		removed = append(removed, strings.TrimLeft(l, "\t"))
	}
	if j != len(off) {
		t.Fatalf("IPv6 off changed or added lines; first unmatched: %q", off[j])
	}
	want := []string{
		"set raw-rpf-skip-v6 {",
		"type ifname . ipv6_addr",
		"flags interval",
		`comment "workload interface . allowed spoofed IPv6 source"`,
		"}",
		"",
		`meta nfproto ipv6 icmpv6 type mld-listener-query accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type mld-listener-report accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type mld-listener-done accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type nd-router-solicit accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type nd-neighbor-solicit accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type nd-neighbor-advert accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta mark & 0x00080000 == 0x00080000 iifname . ip6 saddr @raw-rpf-skip-v6 accept comment "Allowed spoofed IPv6 source"`,
	}
	if d := cmp.Diff(want, removed); d != "" {
		t.Errorf("lines IPv6 off removes (-want +got):\n%s", d)
	}
	for _, l := range off {
		if s := strings.ToLower(l); strings.Contains(s, "ip6") || strings.Contains(s, "ipv6") || strings.Contains(s, "-v6") {
			t.Errorf("IPv6 off: the static table still has %q", strings.TrimSpace(l))
		}
	}
}
