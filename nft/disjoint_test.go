package nft

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDisjointPrefixes(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		in, want []netip.Prefix
	}{
		{nil, nil},
		{[]netip.Prefix{p("10.0.0.0/8"), p("10.0.0.0/8")}, []netip.Prefix{p("10.0.0.0/8")}},
		{[]netip.Prefix{p("10.1.0.0/16"), p("10.0.0.0/8"), p("11.0.0.0/8")}, []netip.Prefix{p("10.0.0.0/8"), p("11.0.0.0/8")}},
		// Adjacent prefixes do not overlap: both stay.
		{[]netip.Prefix{p("10.0.0.128/25"), p("10.0.0.0/25")}, []netip.Prefix{p("10.0.0.0/25"), p("10.0.0.128/25")}},
		// Same address, different lengths: the shorter wins.
		{[]netip.Prefix{p("10.0.0.0/32"), p("10.0.0.0/24"), p("10.0.0.0/30")}, []netip.Prefix{p("10.0.0.0/24")}},
		// A contained prefix after an unrelated one in between.
		{[]netip.Prefix{p("10.0.0.0/16"), p("10.0.5.0/24"), p("10.0.200.1/32")}, []netip.Prefix{p("10.0.0.0/16")}},
		{[]netip.Prefix{p("::/0"), p("fd00::/8")}, []netip.Prefix{p("::/0")}},
	} {
		if diff := cmp.Diff(tc.want, DisjointPrefixes(tc.in), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("DisjointPrefixes(%v) (-want +got):\n%s", tc.in, diff)
		}
	}
}
