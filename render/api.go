// Package render turns endpoint and policy-reference data into nft model
// objects: the chains, verdict-map elements and set elements of nftep's one
// inet table (and of the small arp table for ARP reply suppression).
//
// render is pure: no I/O, no clocks, no state, so every rule nftep programs can
// be read in a golden test. The one exception is MarkMapper, which allocates
// endpoint marks and must remember them; it lives here because its golden
// values are part of the rendered output.
//
// The rule semantics are Felix's (the mark protocol, tiers, profiles,
// failsafes); the table shape is nftep's: one inet table, layer-prefixed
// names, dispatch by verdict map everywhere.
//
// # The table a user sees
//
// Each base chain jumps to one top-level chain, which sends traffic to the
// dispatch chains in Felix's order; each dispatch chain is one verdict-map
// lookup plus its default:
//
//	raw-prerouting     → raw-ep-prerouting     mark workload traffic, RPF skip set / fib drop,
//	                                           raw-from-hep-dispatch (untracked)
//	raw-output         → raw-ep-output         raw-to-hep-dispatch (untracked)
//	mangle-prerouting  → mangle-ep-prerouting  mangle-from-hep-dispatch (pre-DNAT)
//	filter-input       → filter-ep-input       cali* → filter-wl-to-host → filter-from-wl-dispatch;
//	                                           filter-from-hep-dispatch
//	filter-forward     → filter-ep-forward     cali* not in filter-wl-ifaces: drop;
//	                                           filter-from-hep-fwd-dispatch, filter-from-wl-dispatch,
//	                                           filter-to-wl-dispatch, filter-to-hep-fwd-dispatch
//	filter-output      → filter-ep-output      cali* return; filter-to-hep-dispatch
//	mangle-postrouting → mangle-ep-postrouting mangle-to-hep-dispatch (host egress of DNAT'd traffic)
//
// `iifname vmap @filter-from-wl` sends a packet from cali12ab to
// filter-fw-cali12ab; an interface with a workload prefix that is not in the
// map is dropped ("Unknown interface"); in forward such an interface is
// dropped before host forward policy, whose established accept would let a
// removed workload's flows through. Every rule's comment says why it is
// there, and every map element names its endpoint.
//
// # Ownership and refcounting
//
// Rendered chains come in two kinds, and the caller (the endpoint manager)
// treats them differently:
//
//   - Owned chains (Output.Chains) belong to one endpoint: they are named
//     after its interface and are deleted when the endpoint goes.
//   - Shared chains (Output.Shared) may be referenced by several endpoints:
//     policy-group chains and, with Config.SharedEndpointChains, the
//     content-addressed endpoint chains. Their names are derived from their
//     content, so equal name ⇒ equal content: the caller refcounts them by
//     name, adds one when the count goes 0→1 and deletes it on 1→0.
package render

import (
	"net/netip"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// Layer is one of the iptables tables nftep simulates inside its inet table.
// Every chain, map and set name starts with "<layer>-".
type Layer string

// The layers, in the order a packet meets them on a hook.
const (
	// LayerRaw holds untracked (DoNotTrack) host policy and the RPF check.
	LayerRaw Layer = "raw"
	// LayerMangle holds pre-DNAT host policy and host egress for DNAT'd traffic.
	LayerMangle Layer = "mangle"
	// LayerFilter holds workload policy and normal and forward host policy.
	LayerFilter Layer = "filter"
)

// Dir is a policy direction, from the endpoint's point of view.
type Dir uint8

const (
	// Ingress is traffic towards the endpoint: workload "tw" chains, host
	// "fh" chains, inbound policies ("pi") and profiles ("pri").
	Ingress Dir = iota
	// Egress is traffic from the endpoint: workload "fw" chains, host "th"
	// chains, outbound policies ("po") and profiles ("pro").
	Egress
)

// AnyInterface is the pseudo interface name of the "*" host endpoint. It is
// longer than IFNAMSIZ, so it can never collide with a real interface.
const AnyInterface = "any-interface-at-all"

// Base chains of the inet table (hook and priority in BaseChains).
const (
	ChainRawPrerouting     = "raw-prerouting"     // prerouting, priority raw (-300)
	ChainRawOutput         = "raw-output"         // output, priority raw (-300)
	ChainManglePrerouting  = "mangle-prerouting"  // prerouting, priority mangle (-150)
	ChainManglePostrouting = "mangle-postrouting" // postrouting, priority mangle (-150)
	ChainFilterInput       = "filter-input"       // input, priority filter (0)
	ChainFilterForward     = "filter-forward"     // forward, priority filter (0)
	ChainFilterOutput      = "filter-output"      // output, priority filter (0)
)

// Top-level regular chains: each base chain jumps to one of these, which
// holds Felix's cali-INPUT/FORWARD/… sequence. Keeping the sequence in a
// regular chain lets it `return` to the base chain, whose trailing rules turn
// the accept mark into a verdict.
const (
	ChainRawPreroutingEP     = "raw-ep-prerouting"     // RPF check, untracked host ingress
	ChainRawOutputEP         = "raw-ep-output"         // untracked host egress
	ChainManglePreroutingEP  = "mangle-ep-prerouting"  // pre-DNAT host ingress
	ChainManglePostroutingEP = "mangle-ep-postrouting" // host egress of DNAT'd traffic
	ChainFilterInputEP       = "filter-ep-input"       // workload→host, host ingress
	ChainFilterForwardEP     = "filter-ep-forward"     // workload policy, forward host policy
	ChainFilterOutputEP      = "filter-ep-output"      // host egress
)

// Helper chains of the static wiring.
const (
	// ChainWorkloadToHost applies DefaultEndpointToHostAction to traffic from
	// a workload to the host, after the workload's egress policy.
	ChainWorkloadToHost = "filter-wl-to-host"
	// ChainFailsafeIn accepts the inbound failsafe ports (filter layer).
	ChainFailsafeIn = "filter-failsafe-in"
	// ChainFailsafeOut accepts the outbound failsafe ports (filter layer).
	ChainFailsafeOut = "filter-failsafe-out"
	// ChainRawFailsafeIn and the other raw/mangle variants also accept the
	// opposite direction's ports as source ports, so that replies are not
	// caught by untracked or pre-DNAT policy.
	ChainRawFailsafeIn     = "raw-failsafe-in"
	ChainRawFailsafeOut    = "raw-failsafe-out"    // raw variant of ChainFailsafeOut
	ChainMangleFailsafeIn  = "mangle-failsafe-in"  // mangle variant of ChainFailsafeIn
	ChainMangleFailsafeOut = "mangle-failsafe-out" // mangle variant of ChainFailsafeOut
)

// Dispatch chains: each is one vmap rule on the matching map (below) followed
// by the dispatch point's default.
const (
	ChainFromWorkload      = "filter-from-wl-dispatch"      // MapFromWorkload, else drop
	ChainToWorkload        = "filter-to-wl-dispatch"        // MapToWorkload, else drop
	ChainFromHost          = "filter-from-hep-dispatch"     // MapFromHost, else "*" or return
	ChainToHost            = "filter-to-hep-dispatch"       // MapToHost, else "*" or return
	ChainFromHostForward   = "filter-from-hep-fwd-dispatch" // MapFromHostForward, else "*" or return
	ChainToHostForward     = "filter-to-hep-fwd-dispatch"   // MapToHostForward, else "*" or return
	ChainMangleFromHost    = "mangle-from-hep-dispatch"     // MapMangleFromHost (pre-DNAT), else "*" or return
	ChainMangleToHost      = "mangle-to-hep-dispatch"       // MapMangleToHost, else "*" (not to workloads) or return
	ChainRawFromHost       = "raw-from-hep-dispatch"        // MapRawFromHost (untracked), else return
	ChainRawToHost         = "raw-to-hep-dispatch"          // MapRawToHost (untracked), else return
	ChainFromEndpointMark  = "filter-from-epmark-dispatch"  // MapFromEndpointMark, else drop
	ChainSetEndpointMark   = "filter-epmark-dispatch"       // MapEndpointMark, else unknown-endpoint drop or non-Cali mark
	ChainForwardCheck      = "filter-forward-check"         // input: mark IPVS-bound traffic with its endpoint
	ChainForwardEndpointMk = "filter-forward-epmark"        // output: police IPVS-forwarded traffic
)

// Verdict maps (type ifname : verdict unless noted). Elements are
// `"<ifname>" : goto <endpoint chain>`, commented with the endpoint ID.
// Maps and chains live in separate namespaces in nftables, but nftep never
// reuses a name, so map names drop the chains' "-dispatch".
const (
	MapFromWorkload    = "filter-from-wl"      // iifname → goto filter-fw-<if>
	MapToWorkload      = "filter-to-wl"        // oifname → goto filter-tw-<if>
	MapFromHost        = "filter-from-hep"     // iifname → goto filter-fh-<if>
	MapToHost          = "filter-to-hep"       // oifname → goto filter-th-<if>
	MapFromHostForward = "filter-from-hep-fwd" // iifname → goto filter-fhfw-<if>
	MapToHostForward   = "filter-to-hep-fwd"   // oifname → goto filter-thfw-<if>
	MapMangleFromHost  = "mangle-from-hep"     // iifname → goto mangle-fh-<if> (pre-DNAT tiers only)
	MapMangleToHost    = "mangle-to-hep"       // oifname → goto mangle-th-<if>
	MapRawFromHost     = "raw-from-hep"        // iifname → goto raw-fh-<if> (untracked tiers only)
	MapRawToHost       = "raw-to-hep"          // oifname → goto raw-th-<if> (untracked tiers only)
	// MapEndpointMark (ifname : verdict) sends a packet to the
	// filter-sm-<if> chain that sets its endpoint's mark
	// (Config.EndpointMarks only). A verdict map to a one-rule chain rather
	// than an ifname : mark map, because `meta mark set iifname map @m`
	// overwrites the whole mark, including bits outside our mask that
	// kube-proxy's IPVS mode relies on (0x4000, masquerade), and nft 1.0.6
	// cannot express the masked form (see endpointMarkChains).
	MapEndpointMark = "filter-epmark"
	// MapFromEndpointMark (mark : verdict) sends a packet carrying an
	// endpoint mark to the endpoint's from chain (Config.EndpointMarks
	// only). The lookup is `meta mark & <endpoint field> vmap @...`, so bits
	// outside the field do not matter.
	MapFromEndpointMark = "filter-from-epmark"
)

// RPF-skip sets: interval sets of `ifname . address` whose members may send
// from a source that fails the strict reverse-path check.
const (
	SetRPFSkipV4 = "raw-rpf-skip-v4" // ifname . ipv4_addr, flags interval
	SetRPFSkipV6 = "raw-rpf-skip-v6" // ifname . ipv6_addr, flags interval
)

// SetWorkloadIfaces (type ifname) holds the interface of every workload in
// the workload dispatch maps, the same keys as MapFromWorkload and
// MapToWorkload. filter-ep-forward drops traffic through a workload-prefix
// interface that is not in it before host forward policy runs, whose
// `ct state established,related accept` would otherwise let the
// established flows of a removed or rejected workload through. (A set
// rather than a lookup in the maps themselves: older kernels refuse a
// lookup in a map that has no destination register, EINVAL; Debian 12's
// 6.1 does, 6.18 does not. See nft.Lookup.)
const SetWorkloadIfaces = "filter-wl-ifaces"

// Objects of the arp-family table (same name as the inet table).
const (
	// ARPChainOutput is the arp table's base chain (hook output), with the
	// one rule of ARP suppression.
	ARPChainOutput = "filter-output"
	// ARPSetOwn holds each workload interface with its own IPv4 addresses
	// (`ifname . ipv4_addr`).
	ARPSetOwn = "filter-arp-own"
)

// Per-endpoint and per-policy chain kinds; a chain name is
// "<layer>-<kind>-<suffix>".
const (
	KindToWorkload      = "tw"   // to a workload: its ingress policy
	KindFromWorkload    = "fw"   // from a workload: its egress policy
	KindToHost          = "th"   // to a host endpoint: egress policy
	KindFromHost        = "fh"   // from a host endpoint: ingress policy
	KindToHostForward   = "thfw" // forwarded out of a host endpoint
	KindFromHostForward = "fhfw" // forwarded in from a host endpoint
	KindSetMark         = "sm"   // sets an endpoint mark
	KindPolicyIn        = "pi"   // inbound policy
	KindPolicyOut       = "po"   // outbound policy
	KindProfileIn       = "pri"  // inbound profile
	KindProfileOut      = "pro"  // outbound profile
	KindGroupIn         = "gi"   // inbound policy group
	KindGroupOut        = "go"   // outbound policy group
)

// SetElement is an element of the named set or map of a table.
type SetElement struct {
	Set  string
	Elem nft.Element
}

// Output is what rendering one endpoint produces. Everything in it is
// derived from the input alone: rendering the same input twice gives equal
// output.
type Output struct {
	// Chains are owned by this endpoint (named after its interface): add
	// them when it appears, replace them when it changes, delete them when
	// it goes.
	Chains []*nft.Chain
	// Shared chains are named by content (policy groups; with
	// SharedEndpointChains also the endpoint chains): refcount them by name.
	Shared []*nft.Chain
	// Elements go into the inet table's maps and sets (dispatch verdict
	// maps, the endpoint-mark maps, the RPF-skip sets).
	Elements []SetElement
	// ARPElements belong to the arp table's ARPSetOwn (workloads with IPv4
	// addresses, when Config.ARPSuppression is on).
	ARPElements []SetElement
}

// SelectorFunc returns the original selector of a policy, and whether the
// policy is known. Consecutive policies of a tier with equal selectors form a
// policy group (as in Felix's felix/rules/endpoints.go); an unknown policy
// counts as selector "".
type SelectorFunc func(id *proto.PolicyID) (selector string, known bool)

// WorkloadInput is one active workload endpoint to render.
type WorkloadInput struct {
	// ID names the endpoint in rule and element comments.
	ID *proto.WorkloadEndpointID
	// Endpoint is the endpoint as Felix sent it. Name is the interface;
	// State "active" means admin up (anything else renders the admin-down
	// deny); Tiers, ProfileIds and QosControls are used.
	Endpoint *proto.WorkloadEndpoint
	// Parsed is Endpoint's addresses as felix.ParseWorkload gives them
	// (Ipv4Nets and AllowSpoofedSourcePrefixes are read from here). Nil
	// means render parses Endpoint itself and renders what parses.
	Parsed *felix.Workload
	// Selectors looks up policy selectors for grouping; nil means every
	// policy is unknown (so a tier's policies form one group).
	Selectors SelectorFunc
	// Mark is the endpoint mark from a MarkMapper; used only with
	// Config.EndpointMarks (0 means none could be allocated).
	Mark uint32
	// Bodies, when set, shares the endpoint chains rendered for one
	// endpoint with the next ones of the same policies and profiles
	// (Config.SharedEndpointChains only; see BodyCache).
	Bodies *BodyCache
}

// BodyCache holds shared endpoint chains (Config.SharedEndpointChains) by
// what they are rendered from: with shared chains, the endpoints with the
// same tiers, profiles and QoS controls have the same chains, and
// rendering and naming them once is enough (at 10,000 endpoints, naming
// alone, a hash of every rule's text, took most of a second). A cache is
// for one batch: the policies' selectors (WorkloadInput.Selectors) must
// not change while it is used.
type BodyCache struct {
	bodies map[string]cachedBody
	key    []byte
}

type cachedBody struct {
	chain  *nft.Chain
	groups []*nft.Chain
}

// NewBodyCache returns an empty BodyCache.
func NewBodyCache() *BodyCache { return &BodyCache{bodies: map[string]cachedBody{}} }

// HostInput is one resolved host endpoint on one interface.
type HostInput struct {
	// ID is the host endpoint's endpoint_id, named in comments.
	ID string
	// Interface is the interface it was resolved to, or AnyInterface for
	// the "*" endpoint (whose chains are reached through the dispatch
	// defaults, see HostDispatch, and get no map elements).
	Interface string
	// Endpoint is the host endpoint as Felix sent it: Tiers, ForwardTiers,
	// PreDnatTiers, UntrackedTiers and ProfileIds are used.
	Endpoint *proto.HostEndpoint
	// Selectors looks up policy selectors for grouping, as in WorkloadInput.
	Selectors SelectorFunc
	// Mark is the endpoint mark (Config.EndpointMarks only; 0 = none).
	Mark uint32
}

// Static returns the chains and sets of the inet table that do not depend on
// any endpoint: base chains and their wiring, the dispatch chains with their
// defaults (host dispatch as with no "*" endpoint, see HostDispatch), empty
// dispatch maps, the RPF-skip sets, failsafe chains and the workload-to-host
// chain.
func Static(cfg Config) (chains []*nft.Chain, sets []*nft.Set) {
	return staticChains(cfg), staticSets(cfg)
}

// HostDispatch returns the host-endpoint dispatch chains for the current "*"
// endpoint (nil when there is none). They replace the ones Static returned:
// with a "*" endpoint each default becomes a goto to its chains (only for
// pre-DNAT if it has pre-DNAT tiers; never for untracked, which "*" does not
// support), with the "no * egress policy towards local workloads" skip in
// front of the mangle to-host default.
func HostDispatch(cfg Config, star *proto.HostEndpoint) []*nft.Chain {
	return hostDispatch(cfg, star)
}

// Workload renders one workload endpoint: its tw and fw chains (owned, or
// shared and content-addressed with SharedEndpointChains), the policy-group
// chains they jump to, the from/to dispatch elements, its RPF-skip elements,
// its endpoint-mark elements and its ARP-suppression chain and element.
func Workload(cfg Config, in WorkloadInput) Output { return renderWorkload(cfg, in) }

// Host renders one host endpoint on one interface: filter th/fh and
// thfw/fhfw, mangle th and (with pre-DNAT tiers) fh, raw th/fh (with
// untracked tiers, never for "*"), the policy-group chains they jump to, and
// the dispatch elements of each layer's maps.
func Host(cfg Config, in HostInput) Output { return renderHost(cfg, in) }

// ARPStatic returns the chains and sets of the arp-family table: the output
// base chain, the dispatch chain and the empty dispatch map. It returns nil
// when ARP suppression is off.
func ARPStatic(cfg Config) (chains []*nft.Chain, sets []*nft.Set) {
	return arpStatic(cfg)
}

// EndpointChainName returns "<layer>-<kind>-<iface>", with the interface
// replaced by a stable hash when the name would be too long or contain
// characters nft would need to quote.
func EndpointChainName(layer Layer, kind, iface string) string {
	return chainName(layer, kind, iface)
}

// PolicyChainName returns the chain of a policy in one tier and direction:
// "<layer>-pi-<tier>.<policy>" (ingress) or "<layer>-po-…" (egress). The
// policy part is "<name>" for a global policy, "<namespace>/<name>" for a
// namespaced Calico policy and "<kind>_<namespace>/<name>" for other kinds.
// The policy package names its chains with this function.
func PolicyChainName(layer Layer, dir Dir, tier string, id *proto.PolicyID) string {
	return policyChainName(layer, dir, tier, id)
}

// ProfileChainName returns "<layer>-pri-<profile>" (ingress) or
// "<layer>-pro-<profile>" (egress).
func ProfileChainName(layer Layer, dir Dir, profile string) string {
	return profileChainName(layer, dir, profile)
}

// IsStaged reports whether a policy is staged (its kind starts with
// "Staged"): staged policies are never jumped to.
func IsStaged(id *proto.PolicyID) bool { return isStaged(id) }

// ProtoPort is one failsafe entry: a protocol, a port and an optional
// network (the peer's address range).
type ProtoPort struct {
	// Proto is "tcp" or "udp".
	Proto string
	// Port is the host port: the destination port of inbound entries, and
	// of outbound entries towards the peer.
	Port uint16
	// Net, if valid, limits the entry to peers in this prefix.
	Net netip.Prefix
}
