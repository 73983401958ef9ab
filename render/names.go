package render

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/nftep/nftep/proto"
)

// maxNameLen is the longest chain, set or map name nftables accepts
// (NFT_NAME_MAXLEN is 256 including the terminating NUL).
const maxNameLen = 255

// hashedSuffix returns the name suffix "_<hash>" for s: an underscore and the
// unpadded URL-safe base64 of SHA-256(s), at most 43 characters.
//
// Length argument: the longest prefix we hash behind is
// "<layer>-<kind>-" = len("mangle-thfw-") = 12 bytes, so a hashed name is at
// most 12 + 1 + 43 = 56 bytes, far below 255. A hashed suffix is 44 bytes
// and a real interface name at most 15, so a hashed endpoint chain can never
// take the name of a plain one.
func hashedSuffix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "_" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// limitName returns prefix+suffix when that is a plain nft name of legal
// length, and prefix+hashedSuffix(suffix) otherwise (Felix's
// EndpointChainName in felix/rules/endpoints.go, with the nftables limit of
// 255 bytes instead of iptables' 28). An empty suffix is hashed too, so every
// name keeps the "<prefix><something>" shape.
func limitName(prefix, suffix string) string {
	if suffix != "" && len(prefix)+len(suffix) <= maxNameLen && isPlainName(suffix) {
		return prefix + suffix
	}
	return prefix + hashedSuffix(suffix)
}

func chainName(layer Layer, kind, iface string) string {
	return limitName(string(layer)+"-"+kind+"-", iface)
}

func policyChainName(layer Layer, dir Dir, tier string, id *proto.PolicyID) string {
	kind := KindPolicyIn
	if dir == Egress {
		kind = KindPolicyOut
	}
	return limitName(string(layer)+"-"+kind+"-", tier+"."+policyName(id))
}

func profileChainName(layer Layer, dir Dir, profile string) string {
	kind := KindProfileIn
	if dir == Egress {
		kind = KindProfileOut
	}
	return limitName(string(layer)+"-"+kind+"-", profile)
}

// kindShort abbreviates policy kinds in names. '_' cannot occur in a
// Kubernetes name or namespace, so "<short>_…" never collides with a
// "<namespace>/<name>" or a global "<name>".
var kindShort = map[string]string{
	"KubernetesNetworkPolicy":       "knp",
	"StagedKubernetesNetworkPolicy": "sknp",
	"StagedNetworkPolicy":           "snp",
	"StagedGlobalNetworkPolicy":     "sgnp",
}

// policyName is the policy part of a policy chain name; see PolicyChainName.
func policyName(id *proto.PolicyID) string {
	name := id.GetName()
	if ns := id.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	switch k := id.GetKind(); k {
	case "", "GlobalNetworkPolicy", "NetworkPolicy":
		return name
	default:
		short, ok := kindShort[k]
		if !ok {
			// Other kinds (admin network policies, …) keep their whole
			// name: rare, and unambiguous.
			short = strings.ToLower(k)
		}
		return short + "_" + name
	}
}

func isStaged(id *proto.PolicyID) bool { return strings.HasPrefix(id.GetKind(), "Staged") }

// workloadID is the endpoint's name in comments: orchestrator/workload/endpoint.
func workloadID(id *proto.WorkloadEndpointID) string {
	if id == nil {
		return "?"
	}
	return id.GetOrchestratorId() + "/" + id.GetWorkloadId() + "/" + id.GetEndpointId()
}

// policyRefPrefixes are the name prefixes of policy and profile chains,
// "<layer>-pi-", "-po-", "-pri-" and "-pro-", in the layers whose chains
// jump to them: raw (untracked host policy), mangle (pre-DNAT host policy)
// and filter.
var policyRefPrefixes = func() []string {
	var out []string
	for _, l := range []Layer{LayerRaw, LayerMangle, LayerFilter} {
		for _, k := range []string{KindPolicyIn, KindPolicyOut, KindProfileIn, KindProfileOut} {
			out = append(out, string(l)+"-"+k+"-")
		}
	}
	return out
}()

// IsPolicyChainName reports whether name is a policy or profile chain's
// (PolicyChainName, ProfileChainName): a jump to it is a jump into the
// policy manager's chains.
func IsPolicyChainName(name string) bool {
	for _, p := range policyRefPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
