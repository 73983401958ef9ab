package nft

// Rule and chain identity. A rule's userdata carries its comment (which nft
// shows) and nftep's content hash of the rule (which nft ignores), so that a
// resync can compare the kernel's rules with the model without decoding
// expressions.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/nftables/userdata"
)

// encodingVersion is part of every rule hash. Bump it when the encoding of
// a rule changes without its printed form changing, so that a resync
// replaces rules programmed by an older nftep.
const encodingVersion = "nftep-rule-v1"

// Userdata TLVs of a rule. nft (rule.c, parse_rule_udata_cb) knows type 0,
// NFTNL_UDATA_RULE_COMMENT, and iptables-nft type 1 (ebtables policy); both
// skip any other type, so a rule carrying udataTypeHash lists exactly as
// without it (checked against nft 1.0.6 in TestVocabKernel). 0xa5 is far
// from the small numbers libnftnl allocates, and the value starts with a
// magic so that foreign TLVs of the same type are not mistaken for ours.
const (
	udataTypeComment = userdata.TypeComment // NFTNL_UDATA_RULE_COMMENT
	udataTypeHash    = userdata.Type(0xa5)
	udataHashMagic   = "nftep:"
)

// ruleHash is the content hash of r (its printed form, comment included):
// 32 hex digits.
func ruleHash(r *Rule) string {
	sum := sha256.Sum256([]byte(encodingVersion + "\n" + r.String()))
	return hex.EncodeToString(sum[:16])
}

// ruleUserData returns the rule's userdata: the comment TLV that nft shows
// (NUL-terminated, as nft writes it) and nftep's content hash of the rule in
// a TLV that nft ignores.
func ruleUserData(r *Rule) []byte {
	var ud []byte
	if r.Comment != "" {
		ud = userdata.AppendString(ud, udataTypeComment, r.Comment)
	}
	return userdata.Append(ud, udataTypeHash, []byte(udataHashMagic+ruleHash(r)))
}

// ruleHashFromUserData extracts the content hash ruleUserData stored, or ""
// when the userdata is not ours. It walks the TLVs itself because
// userdata.Get panics on truncated input (google/nftables v0.3.0).
func ruleHashFromUserData(ud []byte) string {
	for len(ud) >= 2 {
		typ, n := userdata.Type(ud[0]), int(ud[1])
		if len(ud) < 2+n {
			return ""
		}
		if typ == udataTypeHash {
			v, ok := strings.CutPrefix(string(ud[2:2+n]), udataHashMagic)
			if ok && isHexHash(v) {
				return v
			}
		}
		ud = ud[2+n:]
	}
	return ""
}

func isHexHash(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ruleCommentFromUserData returns the comment TLV of ud, if any, without
// panicking on foreign bytes.
func ruleCommentFromUserData(ud []byte) (string, bool) {
	for len(ud) >= 2 {
		typ, n := userdata.Type(ud[0]), int(ud[1])
		if len(ud) < 2+n {
			return "", false
		}
		if typ == udataTypeComment {
			return strings.TrimSuffix(string(ud[2:2+n]), "\x00"), true
		}
		ud = ud[2+n:]
	}
	return "", false
}

// Hash returns the content hash of c: its base-chain fields (if any) and the
// hashes of its rules in order. The name and the model-only Comment are not
// part of it, so two chains with the same body hash alike. The hash is
// computed once and cached: a chain must not change after it is put into a
// Model (and Hash is not safe for concurrent first use).
func (c *Chain) Hash() string {
	if c.hash != "" {
		return c.hash
	}
	h := sha256.New()
	if b := c.Base; b != nil {
		fmt.Fprintf(h, "base type=%s hook=%s priority=%d policy=%s\n", b.Type, b.Hook, b.Priority, basePolicy(b))
	} else {
		fmt.Fprintf(h, "regular\n")
	}
	for _, r := range c.Rules {
		fmt.Fprintf(h, "%s\n", ruleHash(r))
	}
	c.hash = hex.EncodeToString(h.Sum(nil)[:16])
	return c.hash
}

// basePolicy returns b's policy, accept when unset (the kernel's default).
func basePolicy(b *BaseChain) Policy {
	if b.Policy == "" {
		return PolicyAccept
	}
	return b.Policy
}
