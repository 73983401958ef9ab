package policy

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// ipSetPrefix starts the name of every set this package writes. IP sets are
// not layered: one copy serves the raw, mangle and filter chains that look
// it up, so a set of 10,000 members is programmed once, not three times.
// "ipset" is not a layer name, so these names never meet render's
// "<layer>-…" sets and maps.
const ipSetPrefix = "ipset-"

// maxNameLen is the longest set or chain name nftables accepts
// (NFT_NAME_MAXLEN is 256 including the NUL).
const maxNameLen = 255

// IPSetName returns the nft set that holds the family's members of the Felix
// IP set id: "ipset-<id>-v4" or "-v6", with the id's ':' written as '.'
// ("s:q38q…" → "ipset-s.q38q…-v4").
//
// Why that mapping is injective: Felix IDs are "<type>:<base64url or
// name>", so the plain form is used only for IDs made of letters, digits,
// '-', '_' and ':' that contain a ':'; its result always contains a '.'.
// Any other ID (or one too long) becomes "x_" and 43 characters of
// URL-safe base64 SHA-256, which contain no '.'. The two forms cannot meet,
// and within each form the mapping is one to one. Length: the plain form is
// used up to 240 bytes of ID, so a name is at most 6+240+3 = 249 bytes.
func IPSetName(id string, family nft.IPFamily) string {
	suffix := "-v4"
	if family == nft.IPv6 {
		suffix = "-v6"
	}
	return ipSetPrefix + ipSetNamePart(id) + suffix
}

const maxPlainIPSetID = 240

func ipSetNamePart(id string) string {
	if plainIPSetID(id) {
		return strings.ReplaceAll(id, ":", ".")
	}
	sum := sha256.Sum256([]byte(id))
	return "x_" + base64.RawURLEncoding.EncodeToString(sum[:])
}

func plainIPSetID(id string) bool {
	if len(id) > maxPlainIPSetID || !strings.Contains(id, ":") {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == ':':
		default:
			return false
		}
	}
	return true
}

// Chain kinds of the helper chains that a rule with not_icmp_type_code
// jumps to (see renderer.helper). They sit beside render's kinds
// ("pi", "po", "pri", "pro"), which they extend by an "x", so a helper
// never takes the name of a policy or profile chain.
const (
	kindHelperPolicyIn   = "pix"
	kindHelperPolicyOut  = "pox"
	kindHelperProfileIn  = "prix"
	kindHelperProfileOut = "prox"
)

// helperChainName returns the helper chain of rule index i of the policy or
// profile chain parent: parent's kind gets an "x" and the name gets "-r<i>".
// The suffix ends in digits after the last "-r", so (parent, i) can be read
// back from the name and two helpers never share one. A name that would be
// too long is hashed like render hashes names.
func helperChainName(parent string, i int) string {
	for _, k := range []struct{ from, to string }{
		{render.KindPolicyIn, kindHelperPolicyIn},
		{render.KindPolicyOut, kindHelperPolicyOut},
		{render.KindProfileIn, kindHelperProfileIn},
		{render.KindProfileOut, kindHelperProfileOut},
	} {
		for _, l := range layers {
			prefix := string(l) + "-" + k.from + "-"
			rest, ok := strings.CutPrefix(parent, prefix)
			if !ok {
				continue
			}
			newPrefix := string(l) + "-" + k.to + "-"
			suffix := rest + "-r" + strconv.Itoa(i)
			if len(newPrefix)+len(suffix) > maxNameLen {
				sum := sha256.Sum256([]byte(suffix))
				// "_" + 43 characters: no "-r<digits>" ending, so it
				// cannot equal a plain helper name.
				suffix = "_" + base64.RawURLEncoding.EncodeToString(sum[:])
			}
			return newPrefix + suffix
		}
	}
	// Not reached: parents are always policy or profile chains.
	return parent + "-r" + strconv.Itoa(i)
}

// layers are the layers whose endpoint chains jump to policy and profile
// chains: raw (untracked host policy), mangle (pre-DNAT host policy and host
// egress) and filter (everything else).
var layers = []render.Layer{render.LayerRaw, render.LayerMangle, render.LayerFilter}

// isPolicyChainName reports whether name is a policy or profile chain's
// (render.IsPolicyChainName).
func isPolicyChainName(name string) bool { return render.IsPolicyChainName(name) }

// policyDisplayName is how comments name a policy: "<tier>/<name>", with
// the namespace ("<tier>/<ns>/<name>") for namespaced policies and the kind
// in brackets for kinds other than Calico's two plain ones.
func policyDisplayName(tier string, id *proto.PolicyID) string {
	s := tier + "/"
	if ns := id.GetNamespace(); ns != "" {
		s += ns + "/"
	}
	s += id.GetName()
	switch k := id.GetKind(); k {
	case "", "GlobalNetworkPolicy", "NetworkPolicy":
	default:
		s += " [" + k + "]"
	}
	return s
}
