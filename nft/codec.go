package nft

// This file is the contract between the vocabulary (printing, validation,
// encoding of each match, action, set and element) and the engine (diff,
// transactions, read-back). The bodies are placeholders until the vocabulary
// lands.

import (
	"errors"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

var errNotImplemented = errors.New("not implemented yet")

// encodeRule returns the kernel expressions of r. Chain and set names are
// referenced by name; sets must exist in the same table (possibly created
// earlier in the same batch).
func encodeRule(r *Rule) ([]expr.Any, error) { return nil, errNotImplemented }

// ruleUserData returns the rule's userdata: the comment TLV that nft shows,
// and nftep's content hash of the rule in a TLV that nft ignores.
func ruleUserData(r *Rule) []byte { return nil }

// ruleHashFromUserData extracts the content hash ruleUserData stored, or ""
// when the userdata is not ours (it must never panic on foreign bytes).
func ruleHashFromUserData(ud []byte) string { return "" }

// ruleHash is the content hash of r (its printed form, comment included).
func ruleHash(r *Rule) string { return "" }

// encodeSet returns the google/nftables definition of s in table t (without
// elements).
func encodeSet(t *nftables.Table, s *Set) (*nftables.Set, error) { return nil, errNotImplemented }

// encodeElements returns the kernel elements of es for set s (an interval
// set yields start and end elements).
func encodeElements(s *Set, es []Element) ([]nftables.SetElement, error) {
	return nil, errNotImplemented
}

// decodeElements turns the elements the kernel returned for set s back into
// the model's elements, keyed like Set.Elements.
func decodeElements(s *Set, kernel []nftables.SetElement) (map[string]Element, error) {
	return nil, errNotImplemented
}
