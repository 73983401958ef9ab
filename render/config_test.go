package render

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// TestDefaultConfig pins Felix's defaults (felix/config/config_params.go)
// and nftep's own.
func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	want := Marks{Accept: 0x10000, Pass: 0x20000, Drop: 0x40000, Scratch0: 0x80000, Scratch1: 0x100000,
		Endpoint: 0xffe00000, NonCali: 0x200000}
	if d := cmp.Diff(want, cfg.Marks); d != "" {
		t.Errorf("marks (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"TableName", cfg.TableName, "nftep"},
		{"InterfacePrefixes", cfg.InterfacePrefixes, []string{"cali"}},
		{"DefaultEndpointToHostAction", cfg.DefaultEndpointToHostAction, "DROP"},
		{"FilterAllowAction", cfg.FilterAllowAction, "ACCEPT"},
		{"MangleAllowAction", cfg.MangleAllowAction, "ACCEPT"},
		{"FilterDenyAction", cfg.FilterDenyAction, "DROP"},
		{"VXLANPort", cfg.VXLANPort, uint16(4789)},
		{"EndpointMarks", cfg.EndpointMarks, false},
		{"ARPSuppression", cfg.ARPSuppression, true},
		{"SharedEndpointChains", cfg.SharedEndpointChains, false},
		{"FlowLogs", cfg.FlowLogs, false},
		{"IPv6", cfg.IPv6, true},
		{"NodePortRanges", cfg.NodePortRanges, []nft.PortRange{{First: 30000, Last: 32767}}},
		{"DisableConntrackInvalidCheck", cfg.DisableConntrackInvalidCheck, false},
		{"AllowVXLANFromWorkloads", cfg.AllowVXLANFromWorkloads, false},
		{"AllowIPIPFromWorkloads", cfg.AllowIPIPFromWorkloads, false},
		{"FailsafeInbound", ppStrings(cfg.FailsafeInbound), DefaultFailsafeInbound},
		{"FailsafeOutbound", ppStrings(cfg.FailsafeOutbound), DefaultFailsafeOutbound},
	} {
		if d := cmp.Diff(c.want, c.got); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}

func ppStrings(pps []ProtoPort) string {
	var s []string
	for _, p := range pps {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}

// TestParseConfig covers parsing, case-insensitive keys and errors.
func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{
		"interfaceprefix":                "cali,tap",
		"DefaultEndpointToHostAction":    "accept",
		"FailsafeInboundHostPorts":       "tcp:22, udp:10.0.0.0/8:68, tcp:[fd00::/8]:443",
		"FailsafeOutboundHostPorts":      "none",
		"IptablesMarkMask":               "0xff",
		"NftablesFilterDenyAction":       "REJECT",
		"DisableConntrackInvalidCheck":   "true",
		"AllowVXLANPacketsFromWorkloads": "true",
		"VXLANPort":                      "8472",
		"NftepSharedEndpointChains":      "true",
		"ipv6support":                    "FALSE",
		"SomethingElse":                  "ignored",
	})
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if d := cmp.Diff([]string{"cali", "tap"}, cfg.InterfacePrefixes); d != "" {
		t.Errorf("prefixes: %s", d)
	}
	wantIn := []ProtoPort{
		{Proto: "tcp", Port: 22},
		{Proto: "udp", Port: 68, Net: netip.MustParsePrefix("10.0.0.0/8")},
		{Proto: "tcp", Port: 443, Net: netip.MustParsePrefix("fd00::/8")},
	}
	if d := cmp.Diff(wantIn, cfg.FailsafeInbound, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("failsafe in (-want +got):\n%s", d)
	}
	if len(cfg.FailsafeOutbound) != 0 {
		t.Errorf("failsafe out %v, want none", cfg.FailsafeOutbound)
	}
	if cfg.Marks.Accept != 0x1 || cfg.Marks.Scratch1 != 0x10 || cfg.Marks.Endpoint != 0xe0 {
		t.Errorf("marks from mask 0xff: %+v", cfg.Marks)
	}
	if cfg.DefaultEndpointToHostAction != ActionAccept || cfg.FilterDenyAction != ActionReject ||
		!cfg.DisableConntrackInvalidCheck || !cfg.AllowVXLANFromWorkloads || cfg.VXLANPort != 8472 || !cfg.SharedEndpointChains || cfg.IPv6 {
		t.Errorf("parsed config wrong: %+v", cfg)
	}

	for _, bad := range []map[string]string{
		{"DefaultEndpointToHostAction": "MAYBE"},
		{"NftablesMarkMask": "0xf"},
		{"NftablesMarkMask": "banana"},
		{"FailsafeInboundHostPorts": "sctp:22"},
		{"FailsafeInboundHostPorts": "tcp:99999"},
		{"VXLANPort": "0"},
		{"NftepEndpointMarks": "true", "NftablesMarkMask": "0x1f"},
		{"DisableConntrackInvalidCheck": "perhaps"},
		{"Ipv6Support": "maybe"},
	} {
		if _, err := ParseConfig(bad); err == nil {
			t.Errorf("ParseConfig(%v) succeeded", bad)
		}
	}
}

// TestParseConfigErrorNamesItsKey: the mark mask may come from either of
// two keys; its errors name the one the value came from (found by
// FuzzConfig in package dataplane).
func TestParseConfigErrorNamesItsKey(t *testing.T) {
	for _, tc := range []struct {
		kv   map[string]string
		want string
	}{
		{map[string]string{"IptablesMarkMask": "0x1n"}, `IptablesMarkMask="0x1n": not a 32-bit number`},
		{map[string]string{"IptablesMarkMask": "0xf"}, `IptablesMarkMask: mark mask 0xf: need at least 5 bits, have 4`},
		{map[string]string{"NftablesMarkMask": "banana", "IptablesMarkMask": "0xff"}, `NftablesMarkMask="banana": not a 32-bit number`},
		{map[string]string{"NftablesMarkMask": "0x3"}, `NftablesMarkMask: mark mask 0x3: need at least 5 bits, have 2`},
	} {
		if _, err := ParseConfig(tc.kv); err == nil || err.Error() != tc.want {
			t.Errorf("ParseConfig(%v): %v, want %q", tc.kv, err, tc.want)
		}
	}
}

// TestNames pins the naming functions.
func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{EndpointChainName(LayerFilter, KindToWorkload, "cali12ab"), "filter-tw-cali12ab"},
		{EndpointChainName(LayerMangle, KindFromHost, AnyInterface), "mangle-fh-any-interface-at-all"},
		{EndpointChainName(LayerFilter, KindToWorkload, "weird@if"), "filter-tw-_" + hashedSuffix("weird@if")[1:]},
		{PolicyChainName(LayerFilter, Ingress, "default", gnp("deny")), "filter-pi-default.deny"},
		{PolicyChainName(LayerRaw, Egress, "t1", &proto.PolicyID{Name: "p", Namespace: "ns", Kind: "NetworkPolicy"}), "raw-po-t1.ns/p"},
		{PolicyChainName(LayerFilter, Ingress, "default", &proto.PolicyID{Name: "p", Namespace: "ns", Kind: "KubernetesNetworkPolicy"}), "filter-pi-default.knp_ns/p"},
		{PolicyChainName(LayerFilter, Ingress, "default", staged("p")), "filter-pi-default.sgnp_p"},
		{ProfileChainName(LayerFilter, Egress, "kns.default"), "filter-pro-kns.default"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	long := strings.Repeat("x", 300)
	if n := PolicyChainName(LayerFilter, Ingress, "default", gnp(long)); len(n) > maxNameLen || !strings.HasPrefix(n, "filter-pi-_") {
		t.Errorf("long policy name not hashed: %q", n)
	}
	if !IsStaged(staged("x")) || IsStaged(gnp("x")) {
		t.Errorf("IsStaged wrong")
	}
}
