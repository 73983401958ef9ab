package render

import (
	"fmt"
	"math/bits"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
)

// Action values of the Felix settings, spelled as Felix spells them.
const (
	ActionAccept = "ACCEPT" // accept the packet
	ActionReturn = "RETURN" // return to the caller (leave the verdict to later rules)
	ActionDrop   = "DROP"   // drop silently
	ActionReject = "REJECT" // drop and tell the sender
)

// Felix configuration keys render honours (matched case-insensitively), and
// nftep's own keys (prefixed "Nftep" so they never clash with Felix's).
const (
	// KeyInterfacePrefix lists the workload interface prefixes, comma-separated.
	KeyInterfacePrefix = "InterfacePrefix"
	// KeyDefaultEndpointToHostAction is DROP, RETURN or ACCEPT.
	KeyDefaultEndpointToHostAction = "DefaultEndpointToHostAction"
	// KeyFailsafeInboundHostPorts lists the inbound failsafe entries.
	KeyFailsafeInboundHostPorts = "FailsafeInboundHostPorts"
	// KeyFailsafeOutboundHostPorts lists the outbound failsafe entries.
	KeyFailsafeOutboundHostPorts = "FailsafeOutboundHostPorts"
	// KeyNftablesMarkMask is the mark bits nftep may use.
	KeyNftablesMarkMask = "NftablesMarkMask"
	// KeyIptablesMarkMask is read when KeyNftablesMarkMask is absent.
	KeyIptablesMarkMask = "IptablesMarkMask"
	// KeyNftablesFilterAllowAction is ACCEPT or RETURN.
	KeyNftablesFilterAllowAction = "NftablesFilterAllowAction"
	// KeyNftablesMangleAllowAction is ACCEPT or RETURN.
	KeyNftablesMangleAllowAction = "NftablesMangleAllowAction"
	// KeyNftablesFilterDenyAction is DROP or REJECT.
	KeyNftablesFilterDenyAction = "NftablesFilterDenyAction"
	// KeyDisableConntrackInvalidCheck drops the ct state invalid deny.
	KeyDisableConntrackInvalidCheck = "DisableConntrackInvalidCheck"
	// KeyAllowVXLANPacketsFromWorkloads drops the workload VXLAN deny.
	KeyAllowVXLANPacketsFromWorkloads = "AllowVXLANPacketsFromWorkloads"
	// KeyAllowIPIPPacketsFromWorkloads drops the workload IPIP deny.
	KeyAllowIPIPPacketsFromWorkloads = "AllowIPIPPacketsFromWorkloads"
	// KeyVXLANPort is the VXLAN UDP port.
	KeyVXLANPort = "VXLANPort"
	// KeyIpv6Support turns IPv6 on (default true); off, nothing is
	// rendered for IPv6.
	KeyIpv6Support = "Ipv6Support"
	// KeyKubeNodePortRanges lists the Kubernetes NodePort ranges,
	// comma-separated "first:last" (or a single port).
	KeyKubeNodePortRanges = "KubeNodePortRanges"

	// KeyNATOutgoingAddress is the IPv4 address natOutgoing traffic is
	// SNATed to instead of masqueraded (IPv6 always masquerades).
	KeyNATOutgoingAddress = "NATOutgoingAddress"
	// KeyNATPortRange is "first:last", the source ports natOutgoing may use.
	KeyNATPortRange = "NATPortRange"
	// KeyNATOutgoingExclusions is IPPoolsOnly or IPPoolsAndHostIPs.
	KeyNATOutgoingExclusions = "NATOutgoingExclusions"
	// KeyNATOutgoingInterfaceFilter limits natOutgoing to one output
	// interface; a trailing "+" is a prefix (iptables' wildcard).
	KeyNATOutgoingInterfaceFilter = "IptablesNATOutgoingInterfaceFilter"
	// KeyExternalNodesCIDRList lists non-Calico hosts whose tunnel traffic
	// is accepted, comma-separated CIDRs.
	KeyExternalNodesCIDRList = "ExternalNodesCIDRList"
	// KeyIpInIpTunnelAddr, KeyIPv4VXLANTunnelAddr and KeyIPv6VXLANTunnelAddr
	// are this node's tunnel addresses: each turns on the tunnel-source
	// masquerade rules of its device.
	KeyIpInIpTunnelAddr    = "IpInIpTunnelAddr"
	KeyIPv4VXLANTunnelAddr = "IPv4VXLANTunnelAddr"
	KeyIPv6VXLANTunnelAddr = "IPv6VXLANTunnelAddr"

	// KeyTableName names nftep's tables (default "nftep").
	KeyTableName = "NftepTableName"
	// KeyEndpointMarks turns endpoint marks on (default false).
	KeyEndpointMarks = "NftepEndpointMarks"
	// KeyARPSuppression turns the arp table on (default true).
	KeyARPSuppression = "NftepARPSuppression"
	// KeySharedEndpointChains turns chain sharing on (default false).
	KeySharedEndpointChains = "NftepSharedEndpointChains"
	// KeyFlowLogs turns the nflog rules on (default false).
	KeyFlowLogs = "NftepFlowLogs"
	// KeyNATFullyRandom adds fully-random to every masquerade and snat
	// (default true; see Config.NATFullyRandom).
	KeyNATFullyRandom = "NftepNATFullyRandom"
)

// The values of NATOutgoingExclusions.
const (
	NATExcludePools        = "IPPoolsOnly"
	NATExcludePoolsAndHost = "IPPoolsAndHostIPs"
)

// Felix's defaults (felix/config/config_params.go), and nftep's table name.
const (
	DefaultTableName       = "nftep"    // inet and arp table name
	DefaultInterfacePrefix = "cali"     // workload interface prefix
	DefaultMarkMask        = 0xffff0000 // NftablesMarkMask
	DefaultVXLANPort       = 4789       // IANA VXLAN port
	// DefaultNodePortRanges is KubeNodePortRanges' default, Kubernetes'
	// own default NodePort range.
	DefaultNodePortRanges = "30000:32767"
	// DefaultFailsafeInbound is FailsafeInboundHostPorts' default.
	DefaultFailsafeInbound = "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
	// DefaultFailsafeOutbound is FailsafeOutboundHostPorts' default.
	DefaultFailsafeOutbound  = "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
	defaultEndpointToHostAct = ActionDrop
)

// Config is what render needs to know about the node's configuration. Build
// it with DefaultConfig or ParseConfig; the zero value is not usable.
type Config struct {
	// TableName names the inet table and the arp table (default "nftep").
	TableName string
	// InterfacePrefixes are the workload interface prefixes (InterfacePrefix,
	// comma-separated, default "cali"). Dispatch defaults and the
	// unknown-interface drop cover each.
	InterfacePrefixes []string
	// DefaultEndpointToHostAction is ActionDrop, ActionReturn or
	// ActionAccept: what happens to workload→host traffic that the
	// workload's egress policy allowed.
	DefaultEndpointToHostAction string
	// FailsafeInbound and FailsafeOutbound are always allowed into and out
	// of host endpoints.
	FailsafeInbound, FailsafeOutbound []ProtoPort
	// MarkMask is the mark bits nftep may use (NftablesMarkMask).
	MarkMask uint32
	// Marks are the bits carved from MarkMask (see NewMarks).
	Marks Marks
	// FilterAllowAction and MangleAllowAction are ActionAccept or
	// ActionReturn; FilterDenyAction is ActionDrop or ActionReject.
	FilterAllowAction, MangleAllowAction, FilterDenyAction string
	// DisableConntrackInvalidCheck drops the `ct state invalid` deny.
	DisableConntrackInvalidCheck bool
	// AllowVXLANFromWorkloads and AllowIPIPFromWorkloads drop the encap
	// denies of workload egress chains.
	AllowVXLANFromWorkloads, AllowIPIPFromWorkloads bool
	// VXLANPort is the VXLAN UDP port (default 4789).
	VXLANPort uint16
	// IPv6 is Felix's Ipv6Support (default true). Off, nothing is rendered
	// for IPv6: no IPv6 rule variants, IP sets or RPF-skip set, no
	// ICMPv6 neighbour-discovery allowance, no failsafe entry with an
	// IPv6 net. The table still sees IPv6 packets (it is inet): at a
	// workload only family-agnostic rules can allow them, so they meet
	// the end-of-tier and profile drops (fail closed).
	IPv6 bool
	// NodePortRanges are the Kubernetes NodePort ranges (KubeNodePortRanges,
	// default 30000-32767), sorted, with overlapping and adjacent ranges
	// merged. The endpoint-mark chains look for IPVS NodePort traffic there.
	NodePortRanges []nft.PortRange

	// EndpointMarks turns on endpoint marks for kube-proxy in IPVS mode
	// (off by default).
	EndpointMarks bool
	// ARPSuppression renders the arp table (on by default).
	ARPSuppression bool
	// SharedEndpointChains makes endpoints with identical chain bodies share
	// one content-addressed chain (off by default).
	SharedEndpointChains bool
	// FlowLogs adds Felix's nflog rules at end of tier and profiles.
	FlowLogs bool

	// NATOutgoingAddress, when valid, is the IPv4 address natOutgoing
	// traffic is SNATed to (NATOutgoingAddress); IPv6 always masquerades.
	NATOutgoingAddress netip.Addr
	// NATPortRange, when set, is the source port range of natOutgoing TCP
	// and UDP (NATPortRange "first:last"): Felix's five-rule form.
	NATPortRange *nft.PortRange
	// NATExcludeHosts is NATOutgoingExclusions=IPPoolsAndHostIPs: traffic
	// to a Calico host's address keeps the pod's address.
	NATExcludeHosts bool
	// NATInterface limits natOutgoing to traffic leaving this interface
	// (IptablesNATOutgoingInterfaceFilter); NATInterfaceWildcard when the
	// setting ended in "+" (iptables' prefix wildcard, nft's "*").
	NATInterface         string
	NATInterfaceWildcard bool
	// NATFullyRandom adds fully-random to every masquerade and snat
	// (NftepNATFullyRandom, default true). Felix decides it from the
	// version of the iptables binary, even in nft mode; nftep decides it
	// from configuration only. Every kernel nftep supports (inet nat: 5.2)
	// has it (3.14).
	NATFullyRandom bool
	// ExternalNodes are ExternalNodesCIDRList: non-Calico hosts whose IPIP
	// and VXLAN traffic is accepted, by family.
	ExternalNodes []netip.Prefix
	// TunnelAddrIPIP, TunnelAddrVXLAN and TunnelAddrVXLANV6 are this
	// node's tunnel addresses (IpInIpTunnelAddr, IPv4VXLANTunnelAddr,
	// IPv6VXLANTunnelAddr): each, with its encapsulation on, turns on the
	// tunnel-source masquerade of its device.
	TunnelAddrIPIP, TunnelAddrVXLAN, TunnelAddrVXLANV6 netip.Addr
}

// Marks are the mark bits render uses, carved from Config.MarkMask in
// Felix's order: accept, pass, drop (reserved, unused), scratch0, scratch1,
// then every remaining bit for the endpoint-mark field. Keeping Felix's order
// makes the values match Felix's own ruleset (accept 0x10000, scratch0
// 0x80000 with the default mask), so dumps read the same to operators.
type Marks struct {
	// Accept is set by a policy or profile chain that allowed the packet,
	// and tells later layers the packet was already accepted.
	Accept uint32
	// Pass is set by a policy whose rule said "pass to next tier".
	Pass uint32
	// Drop is allocated for compatibility with Felix's layout; unused.
	Drop uint32
	// Scratch0 marks "came from a workload" in raw prerouting.
	Scratch0 uint32
	// Scratch1 is cleared with the others; unused by endpoint chains.
	Scratch1 uint32
	// Endpoint is the multi-bit field holding endpoint marks (may be 0).
	Endpoint uint32
	// NonCali is the value inside Endpoint meaning "not a Calico endpoint":
	// its lowest bit.
	NonCali uint32
}

// All returns accept|pass|scratch0|scratch1: the bits cleared on entry to
// each top-level chain.
func (m Marks) All() uint32 { return m.Accept | m.Pass | m.Scratch0 | m.Scratch1 }

// NewMarks carves Marks from mask. It needs at least five bits (four with
// the drop bit); the rest, if any, form the endpoint field.
func NewMarks(mask uint32) (Marks, error) {
	if bits.OnesCount32(mask) < 5 {
		return Marks{}, fmt.Errorf("mark mask %#x: need at least 5 bits, have %d", mask, bits.OnesCount32(mask))
	}
	var m Marks
	rest := mask
	take := func() uint32 {
		b := rest & -rest
		rest &^= b
		return b
	}
	m.Accept, m.Pass, m.Drop, m.Scratch0, m.Scratch1 = take(), take(), take(), take(), take()
	m.Endpoint = rest
	m.NonCali = rest & -rest
	return m, nil
}

// Families returns the IP families rules and sets are rendered for: IPv4,
// and IPv6 unless Config.IPv6 is off.
func (cfg Config) Families() []nft.IPFamily {
	if cfg.IPv6 {
		return []nft.IPFamily{nft.IPv4, nft.IPv6}
	}
	return []nft.IPFamily{nft.IPv4}
}

// DefaultConfig returns the configuration with every setting at its default.
func DefaultConfig() Config {
	cfg, err := ParseConfig(nil)
	if err != nil {
		panic("render: defaults do not parse: " + err.Error())
	}
	return cfg
}

// ParseConfig reads the settings render honours from Felix's config map
// (keys matched case-insensitively), applying Felix's defaults to the keys
// that are absent. Unknown keys are ignored: the map holds every Felix
// setting.
func ParseConfig(kv map[string]string) (Config, error) {
	c := felix.NewConfig(kv)
	cfg := ParseFelixConfig(c)
	return cfg, c.Err()
}

// ParseFelixConfig reads the settings render honours from c (see
// ParseConfig); malformed values are recorded in c.
func ParseFelixConfig(c *felix.Config) Config {
	get := c.String
	parseBool := c.Bool
	oneOf := c.OneOf
	var errs []error
	cfg := Config{
		TableName:                    get(KeyTableName, DefaultTableName),
		DefaultEndpointToHostAction:  oneOf(KeyDefaultEndpointToHostAction, defaultEndpointToHostAct, ActionDrop, ActionReturn, ActionAccept),
		FilterAllowAction:            oneOf(KeyNftablesFilterAllowAction, ActionAccept, ActionAccept, ActionReturn),
		MangleAllowAction:            oneOf(KeyNftablesMangleAllowAction, ActionAccept, ActionAccept, ActionReturn),
		FilterDenyAction:             oneOf(KeyNftablesFilterDenyAction, ActionDrop, ActionDrop, ActionReject),
		DisableConntrackInvalidCheck: parseBool(KeyDisableConntrackInvalidCheck, false),
		AllowVXLANFromWorkloads:      parseBool(KeyAllowVXLANPacketsFromWorkloads, false),
		AllowIPIPFromWorkloads:       parseBool(KeyAllowIPIPPacketsFromWorkloads, false),
		EndpointMarks:                parseBool(KeyEndpointMarks, false),
		ARPSuppression:               parseBool(KeyARPSuppression, true),
		SharedEndpointChains:         parseBool(KeySharedEndpointChains, false),
		FlowLogs:                     parseBool(KeyFlowLogs, false),
		IPv6:                         parseBool(KeyIpv6Support, true),
	}
	if cfg.TableName == "" || !isPlainName(cfg.TableName) {
		errs = append(errs, fmt.Errorf("%s=%q: not a valid table name", KeyTableName, cfg.TableName))
		cfg.TableName = DefaultTableName
	}
	for _, p := range strings.Split(get(KeyInterfacePrefix, DefaultInterfacePrefix), ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if len(p) > 15 || !isPlainName(p) {
			errs = append(errs, fmt.Errorf("%s: prefix %q is not an interface name prefix", KeyInterfacePrefix, p))
			continue
		}
		cfg.InterfacePrefixes = append(cfg.InterfacePrefixes, p)
	}
	if len(cfg.InterfacePrefixes) == 0 {
		cfg.InterfacePrefixes = []string{DefaultInterfacePrefix}
	}

	var err error
	if cfg.FailsafeInbound, err = ParseFailsafe(get(KeyFailsafeInboundHostPorts, DefaultFailsafeInbound)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", KeyFailsafeInboundHostPorts, err))
	}
	if cfg.FailsafeOutbound, err = ParseFailsafe(get(KeyFailsafeOutboundHostPorts, DefaultFailsafeOutbound)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", KeyFailsafeOutboundHostPorts, err))
	}

	// The mask comes from NftablesMarkMask, else IptablesMarkMask: an error
	// names the key the value came from.
	maskKey := KeyNftablesMarkMask
	maskStr := get(KeyNftablesMarkMask, "")
	if maskStr == "" {
		maskKey, maskStr = KeyIptablesMarkMask, get(KeyIptablesMarkMask, "")
	}
	cfg.MarkMask = DefaultMarkMask
	if maskStr != "" {
		v, perr := strconv.ParseUint(maskStr, 0, 32)
		if perr != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a 32-bit number", maskKey, maskStr))
		} else {
			cfg.MarkMask = uint32(v)
		}
	}
	if cfg.Marks, err = NewMarks(cfg.MarkMask); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", maskKey, err))
		cfg.MarkMask = DefaultMarkMask
		cfg.Marks, _ = NewMarks(DefaultMarkMask)
	}
	if cfg.EndpointMarks && cfg.Marks.Endpoint == 0 {
		errs = append(errs, fmt.Errorf("%s=true: mark mask %#x leaves no bits for endpoint marks", KeyEndpointMarks, cfg.MarkMask))
		cfg.EndpointMarks = false
	}

	cfg.VXLANPort = DefaultVXLANPort
	if s := get(KeyVXLANPort, ""); s != "" {
		v, perr := strconv.ParseUint(s, 10, 16)
		if perr != nil || v == 0 {
			errs = append(errs, fmt.Errorf("%s=%q: not a port", KeyVXLANPort, s))
		} else {
			cfg.VXLANPort = uint16(v)
		}
	}
	errs = append(errs, parseNATConfig(c, &cfg)...)
	if cfg.NodePortRanges, err = ParsePortRanges(get(KeyKubeNodePortRanges, DefaultNodePortRanges)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", KeyKubeNodePortRanges, err))
		cfg.NodePortRanges, _ = ParsePortRanges(DefaultNodePortRanges)
	}
	for _, err := range errs {
		c.AddError(err)
	}
	return cfg
}

// ParsePortRanges parses Felix's port range list: comma-separated entries
// "first:last" or a single port ("" means the default list). The result is
// sorted, with overlapping and adjacent ranges merged, since one nft
// interval set holds them all and refuses overlaps.
func ParsePortRanges(s string) ([]nft.PortRange, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = DefaultNodePortRanges
	}
	var rs []nft.PortRange
	for _, ent := range strings.Split(s, ",") {
		ent = strings.TrimSpace(ent)
		if ent == "" {
			continue
		}
		firstStr, lastStr, isRange := strings.Cut(ent, ":")
		if !isRange {
			lastStr = firstStr
		}
		first, err1 := strconv.ParseUint(strings.TrimSpace(firstStr), 10, 16)
		last, err2 := strconv.ParseUint(strings.TrimSpace(lastStr), 10, 16)
		if err1 != nil || err2 != nil || first == 0 {
			return nil, fmt.Errorf("entry %q: want a port (1-65535) or a range \"first:last\"", ent)
		}
		if first > last {
			return nil, fmt.Errorf("entry %q: range runs backwards", ent)
		}
		rs = append(rs, nft.PortRange{First: uint16(first), Last: uint16(last)})
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%q: no port range", s)
	}
	slices.SortFunc(rs, func(a, b nft.PortRange) int { return int(a.First) - int(b.First) })
	merged := rs[:1]
	for _, r := range rs[1:] {
		last := &merged[len(merged)-1]
		if int(r.First) <= int(last.Last)+1 {
			last.Last = max(last.Last, r.Last)
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// ParseFailsafe parses Felix's failsafe port list: comma-separated entries
// "<proto>:<port>" or "<proto>:<net>:<port>" (an IPv6 net in brackets,
// "tcp:[fd00::/8]:22"), or "none" for an empty list. A bare port means tcp.
func ParseFailsafe(s string) ([]ProtoPort, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "none") {
		return nil, nil
	}
	var out []ProtoPort
	for _, ent := range strings.Split(s, ",") {
		ent = strings.TrimSpace(ent)
		if ent == "" {
			continue
		}
		pp := ProtoPort{Proto: "tcp"}
		portStr := ent
		if i := strings.IndexByte(ent, ':'); i >= 0 {
			pp.Proto = strings.ToLower(ent[:i])
			rest := ent[i+1:]
			if j := strings.LastIndexByte(rest, ':'); j >= 0 {
				netStr := strings.TrimSuffix(strings.TrimPrefix(rest[:j], "["), "]")
				pfx, err := felix.ParseNet(netStr)
				if err != nil {
					return nil, fmt.Errorf("entry %q: bad net %q", ent, netStr)
				}
				pp.Net = pfx
				rest = rest[j+1:]
			}
			portStr = rest
		}
		if pp.Proto != "tcp" && pp.Proto != "udp" {
			return nil, fmt.Errorf("entry %q: protocol %q is not tcp or udp", ent, pp.Proto)
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("entry %q: bad port %q", ent, portStr)
		}
		pp.Port = uint16(port)
		out = append(out, pp)
	}
	return out, nil
}

// isPlainName reports whether s uses only characters nft prints unquoted in
// names: letters, digits, '-', '_', '.', '/'.
func isPlainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '.', c == '/':
		default:
			return false
		}
	}
	return true
}

// natInterfacePattern is what Felix accepts for
// IptablesNATOutgoingInterfaceFilter (felix/config/config_params.go).
var natInterfacePattern = regexp.MustCompile(`^[a-zA-Z0-9:._+-]{1,15}$`)

// parseNATConfig reads the natOutgoing and tunnel keys into cfg and returns
// what was wrong, each error naming its key and value.
func parseNATConfig(c *felix.Config, cfg *Config) []error {
	var errs []error
	cfg.NATFullyRandom = c.Bool(KeyNATFullyRandom, true)
	// OneOf compares in upper case; Felix's values are mixed case.
	cfg.NATExcludeHosts = c.OneOf(KeyNATOutgoingExclusions, NATExcludePools,
		strings.ToUpper(NATExcludePools), strings.ToUpper(NATExcludePoolsAndHost)) == strings.ToUpper(NATExcludePoolsAndHost)
	if s := strings.TrimSpace(c.String(KeyNATOutgoingAddress, "")); s != "" {
		a, err := felix.ParseAddr(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q: not an IP address", KeyNATOutgoingAddress, s))
		case !a.Is4():
			errs = append(errs, fmt.Errorf("%s=%q: must be an IPv4 address (IPv6 natOutgoing masquerades)", KeyNATOutgoingAddress, s))
		default:
			cfg.NATOutgoingAddress = a
		}
	}
	if s := strings.TrimSpace(c.String(KeyNATPortRange, "")); s != "" {
		r, err := parseNATPortRange(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", KeyNATPortRange, s, err))
		} else {
			cfg.NATPortRange = r
		}
	}
	if s := strings.TrimSpace(c.String(KeyNATOutgoingInterfaceFilter, "")); s != "" {
		if !natInterfacePattern.MatchString(s) {
			errs = append(errs, fmt.Errorf("%s=%q: not an interface name (1-15 of a-z A-Z 0-9 : . _ + -)", KeyNATOutgoingInterfaceFilter, s))
		} else if name, ok := strings.CutSuffix(s, "+"); ok {
			cfg.NATInterface, cfg.NATInterfaceWildcard = name, true
		} else {
			cfg.NATInterface = s
		}
	}
	if s := strings.TrimSpace(c.String(KeyExternalNodesCIDRList, "")); s != "" {
		for _, f := range strings.Split(s, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			p, err := felix.ParseNet(f)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", KeyExternalNodesCIDRList, err))
				continue
			}
			cfg.ExternalNodes = append(cfg.ExternalNodes, p)
		}
	}
	for _, k := range []struct {
		key  string
		dst  *netip.Addr
		want felix.Family
	}{
		{KeyIpInIpTunnelAddr, &cfg.TunnelAddrIPIP, felix.IPv4},
		{KeyIPv4VXLANTunnelAddr, &cfg.TunnelAddrVXLAN, felix.IPv4},
		{KeyIPv6VXLANTunnelAddr, &cfg.TunnelAddrVXLANV6, felix.IPv6},
	} {
		s := strings.TrimSpace(c.String(k.key, ""))
		if s == "" {
			continue
		}
		// Felix accepts the address or a CIDR and takes the address.
		p, err := felix.ParseCIDR(s)
		if err != nil || felix.FamilyOf(p.Addr()) != k.want {
			errs = append(errs, fmt.Errorf("%s=%q: not an %s address", k.key, s, k.want))
			continue
		}
		*k.dst = p.Addr()
	}
	return errs
}

// parseNATPortRange parses NATPortRange: "first:last" (Felix's form) or
// "first-last", with 1 <= first < last.
func parseNATPortRange(s string) (*nft.PortRange, error) {
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		lo, hi, ok = strings.Cut(s, "-")
	}
	if !ok {
		return nil, fmt.Errorf("want first:last")
	}
	a, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	b, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 16)
	if err1 != nil || err2 != nil || a == 0 || a >= b {
		return nil, fmt.Errorf("want first:last, ports with 1 <= first < last <= 65535")
	}
	return &nft.PortRange{First: uint16(a), Last: uint16(b)}, nil
}
