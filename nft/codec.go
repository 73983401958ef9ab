package nft

// This file is the contract between the vocabulary (printing, validation,
// encoding of each match, action, set and element) and the engine (diff,
// transactions, read-back). The functions live in the vocabulary's files;
// the assertions below pin their signatures.
//
// What the engine must know when it calls them:
//
//   - encodeRule also returns the
//     anonymous sets the rule's expressions refer to (`ip saddr { a, b }`,
//     `meta l4proto { tcp, udp }`, `th dport { 22, 80-90 }`). Queue each
//     with conn.AddSet (Table filled in) in the same batch, before the
//     rule. queueRule does all of it: anonymous sets, AddRule, userdata.
//     Anonymous set IDs are allocated per call, so encode a rule once per
//     batch (never reuse the expressions of one batch in another batch
//     that also re-adds the sets, or re-add them under the same IDs).
//   - Validation takes the model for references: validateChain(m, c),
//     validateSet(m, s) (definition and all elements), validateElement(m,
//     s, e). m may be nil to skip reference checks. Model.Validate checks
//     everything. All errors match errors.Is(err, ErrInvalid).
//   - Cold apply order: create sets, then chains, in Model.PrintOrder, so
//     that `nft list table` prints what Model.String prints (see print.go).
//   - encodeElements returns elements in the order to send them; a one-field
//     interval element is a start followed by an end (none when the
//     interval runs to the top). When chunking, do not split a start from
//     its end: split after an element whose IntervalEnd is true or whose
//     successor is not an end.
//   - Set userdata: write nftSetUserData(ns) (for the *nftables.Set that
//     encodeSet or encodeRule returned; setUserData(s) for a model set) as
//     NFTA_SET_USERDATA instead of google/nftables' version. A mark map
//     needs the data byte order in it, or nft lists mark 0x1 as 0x01000000.
//   - The arp family numbers its hooks differently from inet: input is
//     NF_ARP_IN (0), output NF_ARP_OUT (1); nftables.ChainHookInput (1)
//     gives EOPNOTSUPP there.
//   - decodeElements needs the model's *Set (google/nftables v0.3.0 cannot
//     read vmap definitions back correctly).

import (
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

var (
	_ func(*Rule) ([]expr.Any, []*anonSet, error)                         = encodeRule
	_ func(*nftables.Conn, *nftables.Table, *nftables.Chain, *Rule) error = queueRule
	_ func(*Rule) []byte                                                  = ruleUserData
	_ func([]byte) string                                                 = ruleHashFromUserData
	_ func(*Rule) string                                                  = ruleHash
	_ func(*nftables.Table, *Set) (*nftables.Set, error)                  = encodeSet
	_ func(*Set, []Element) ([]nftables.SetElement, error)                = encodeElements
	_ func(*Set, []nftables.SetElement) (map[string]Element, error)       = decodeElements
	_ func(*Model, *Chain) error                                          = validateChain
	_ func(*Model, *Set) error                                            = validateSet
	_ func(*Model, *Set, Element) error                                   = validateElement
)
