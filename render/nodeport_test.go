package render

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nftep/nftep/nft"
)

// TestParsePortRanges covers KubeNodePortRanges: Felix's "first:last" list,
// single ports, sorting and merging, and errors that name the key.
func TestParsePortRanges(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []nft.PortRange
	}{
		{"", []nft.PortRange{{First: 30000, Last: 32767}}},
		{"30000:32767", []nft.PortRange{{First: 30000, Last: 32767}}},
		{" 40000:41000 , 8080 ,30000:32767", []nft.PortRange{{First: 8080, Last: 8080}, {First: 30000, Last: 32767}, {First: 40000, Last: 41000}}},
		{"30000:31000,30500:32000,32001:32767", []nft.PortRange{{First: 30000, Last: 32767}}},
		{"1:65535", []nft.PortRange{{First: 1, Last: 65535}}},
	} {
		got, err := ParsePortRanges(c.in)
		if err != nil {
			t.Errorf("ParsePortRanges(%q): %v", c.in, err)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("ParsePortRanges(%q) (-want +got):\n%s", c.in, d)
		}
	}

	for _, bad := range []string{"32767:30000", "30000-32767", "0:100", "1:65536", "x", ",", "30000:"} {
		_, err := ParseConfig(map[string]string{"kubenodeportranges": bad})
		if err == nil || !strings.Contains(err.Error(), KeyKubeNodePortRanges) {
			t.Errorf("KubeNodePortRanges=%q: error %v, want one naming the key", bad, err)
		}
	}
}

// TestNodePortRangesRendered checks that filter-forward-check matches every
// configured NodePort range, for TCP and UDP.
func TestNodePortRangesRendered(t *testing.T) {
	for _, c := range []struct {
		ranges, want string
	}{
		{"", "30000-32767"},
		{"30000:32767,40000,35000:36000", "{ 30000-32767, 35000-36000, 40000 }"},
	} {
		cfg, err := ParseConfig(map[string]string{KeyEndpointMarks: "true", KeyKubeNodePortRanges: c.ranges})
		if err != nil {
			t.Fatalf("ParseConfig: %v", err)
		}
		chains, _ := Static(cfg)
		var check *nft.Chain
		for _, ch := range chains {
			if ch.Name == ChainForwardCheck {
				check = ch
			}
		}
		if check == nil {
			t.Fatalf("no chain %s with endpoint marks on", ChainForwardCheck)
		}
		got := check.String()
		for _, proto := range []string{"tcp", "udp"} {
			want := proto + " dport " + c.want + " goto " + ChainSetEndpointMark
			if !strings.Contains(got, want) {
				t.Errorf("KubeNodePortRanges=%q: chain lacks %q:\n%s", c.ranges, want, got)
			}
		}
	}
}
