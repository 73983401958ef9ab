package nft

// Tables that are not ours: reading enough of them to decide what another
// program left behind, and removing exactly those objects over netlink,
// alone or in the same transaction as a commit of our own table (see
// Transaction.Foreign). Nothing here decides what to remove: the caller
// (package takeover) does.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// The families of the tables iptables-nft and Felix's nftables mode use,
// besides FamilyINet and FamilyARP.
const (
	// FamilyIP is the IPv4 family (`ip`): iptables-nft's tables,
	// Felix's `ip calico`.
	FamilyIP Family = "ip"
	// FamilyIP6 is the IPv6 family (`ip6`).
	FamilyIP6 Family = "ip6"
)

// familyNumbers are the NFPROTO_* values of the families nft names.
var familyNumbers = map[Family]uint8{
	FamilyINet: unix.NFPROTO_INET, FamilyIP: unix.NFPROTO_IPV4, FamilyIP6: unix.NFPROTO_IPV6,
	FamilyARP: unix.NFPROTO_ARP, "bridge": unix.NFPROTO_BRIDGE, "netdev": unix.NFPROTO_NETDEV,
}

// ForeignKind is what a ForeignOp removes.
type ForeignKind int

const (
	// ForeignDeleteTable is `delete table <family> <table>`.
	ForeignDeleteTable ForeignKind = iota + 1
	// ForeignDeleteRule is `delete rule <family> <table> <chain> handle
	// <handle>`.
	ForeignDeleteRule
	// ForeignFlushChain is `flush chain <family> <table> <chain>`.
	ForeignFlushChain
	// ForeignDeleteChain is `delete chain <family> <table> <chain>`: the
	// chain must be empty and unreferenced by the time the transaction
	// commits (flush it and delete the rules that jump to it in the same
	// transaction, before).
	ForeignDeleteChain
)

// ForeignOp removes one object of a table this process does not own.
type ForeignOp struct {
	Kind   ForeignKind
	Family Family
	Table  string
	// Chain is set for every kind but ForeignDeleteTable.
	Chain string
	// Handle is the rule's handle (ForeignDeleteRule).
	Handle uint64
}

// String prints the operation as the nft command that does the same.
func (o ForeignOp) String() string {
	t := string(o.Family) + " " + o.Table
	switch o.Kind {
	case ForeignDeleteTable:
		return "delete table " + t
	case ForeignDeleteRule:
		return fmt.Sprintf("delete rule %s %s handle %d", t, quoteName(o.Chain), o.Handle)
	case ForeignFlushChain:
		return fmt.Sprintf("flush chain %s %s", t, quoteName(o.Chain))
	case ForeignDeleteChain:
		return fmt.Sprintf("delete chain %s %s", t, quoteName(o.Chain))
	}
	return fmt.Sprintf("foreign operation %d on %s", o.Kind, t)
}

// quoteName quotes a chain name the nft parser would not take bare (a `/`
// in Felix's policy chain names, say).
func quoteName(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return `"` + s + `"`
		}
	}
	return s
}

// ForeignTable is a table of the namespace as ReadForeign reads it: only
// what deciding who owns which object needs.
type ForeignTable struct {
	Family Family
	Name   string
	// Chains are the table's chains in the kernel's order.
	Chains []*ForeignChain
}

// ForeignChain is one chain of a ForeignTable.
type ForeignChain struct {
	Name string
	// Base says the chain is attached to a hook.
	Base bool
	// Rules are read only when ReadForeign was asked for them.
	Rules []ForeignRule
}

// ForeignRule is one rule of a ForeignChain.
type ForeignRule struct {
	Handle uint64
	// Targets are the chains the rule jumps or goes to (its immediate
	// verdicts).
	Targets []string
	// Comments are the rule's comment (userdata) and the texts of its
	// iptables `-m comment` matches (xt compat match "comment"), which is
	// where iptables-nft keeps most comments.
	Comments []string
}

// Chain returns the chain name of t, or nil.
func (t *ForeignTable) Chain(name string) *ForeignChain {
	for _, c := range t.Chains {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// ReadForeign reads the tables of the namespace netnsFd refers to (≤ 0:
// the caller's) for which want is true: their chains, and with rules each
// chain's rules (handle, jump and goto targets, comments). Expressions are
// otherwise skipped unparsed, so any table can be read, including those
// iptables-nft cannot show. The read is repeated (a few times) when the
// ruleset changed during it; a read that never settles is returned as is,
// with an error matching ErrInconsistentRead.
func ReadForeign(ctx context.Context, netnsFd int, want func(family Family, table string) bool, rules bool) ([]*ForeignTable, error) {
	s, err := dialNetfilter(netnsFd)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var tables []*ForeignTable
	for try := 0; try < 3; try++ {
		g1, err := s.getGen(ctx)
		if err != nil {
			return nil, err
		}
		tables, err = readForeign(ctx, s, want, rules)
		if err != nil && !errors.Is(err, errInterrupted) && !errors.Is(err, syscall.ENOENT) {
			return nil, err
		}
		g2, gerr := s.getGen(ctx)
		if gerr != nil {
			return nil, gerr
		}
		if err == nil && g1 == g2 {
			return tables, nil
		}
	}
	return tables, ErrInconsistentRead
}

// ErrInconsistentRead says the ruleset kept changing while ReadForeign read
// it.
var ErrInconsistentRead = errors.New("the ruleset changed during every read")

func readForeign(ctx context.Context, s *nlSock, want func(Family, string) bool, rules bool) ([]*ForeignTable, error) {
	var tables []*ForeignTable
	byKey := map[string]*ForeignTable{}
	key := func(fam uint8, name []byte) string {
		return string(rune(fam)) + string(bytes.TrimRight(name, "\x00"))
	}
	err := s.dump(ctx, unix.NFT_MSG_GETTABLE, unix.NFPROTO_UNSPEC, nil, func(m nlMsg) error {
		if len(m.data) < 4 {
			return nil
		}
		fam, ok := familyNames[m.data[0]]
		if !ok {
			return nil
		}
		var name []byte
		forEachAttr(payload(m.data), func(t uint16, v []byte) {
			if t == unix.NFTA_TABLE_NAME {
				name = v
			}
		})
		n := string(bytes.TrimRight(name, "\x00"))
		if n == "" || !want(Family(fam), n) {
			return nil
		}
		ft := &ForeignTable{Family: Family(fam), Name: n}
		tables = append(tables, ft)
		byKey[key(m.data[0], name)] = ft
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read tables: %w", err)
	}
	if len(tables) == 0 {
		return nil, nil
	}
	var dumps interruptions
	chains := map[string]*ForeignChain{}
	err = s.dump(ctx, unix.NFT_MSG_GETCHAIN, unix.NFPROTO_UNSPEC, nil, func(m nlMsg) error {
		if len(m.data) < 4 {
			return nil
		}
		cm := parseChainMsg(m.data)
		ft := byKey[key(m.data[0], []byte(cm.table))]
		if ft == nil || cm.name == "" || cm.bound {
			return nil
		}
		c := &ForeignChain{Name: cm.name, Base: cm.hook != nil}
		ft.Chains = append(ft.Chains, c)
		chains[key(m.data[0], []byte(cm.table))+"\x00"+c.Name] = c
		return nil
	})
	if err := dumps.tolerate(err); err != nil {
		return nil, fmt.Errorf("read chains: %w", err)
	}
	if rules {
		for _, ft := range tables {
			fam := familyNumbers[ft.Family]
			err := s.dump(ctx, unix.NFT_MSG_GETRULE, fam, func(e *enc) { e.str(unix.NFTA_RULE_TABLE, ft.Name) }, func(m nlMsg) error {
				rm := parseRuleMsg(m.data)
				r := ForeignRule{Handle: rm.handle}
				parseForeignExprs(rm.exprs, &r)
				if c := udataString(rm.ud, userdata.TypeComment); c != "" {
					r.Comments = append(r.Comments, c)
				}
				c := chains[key(fam, rm.table)+"\x00"+string(bytes.TrimRight(rm.chain, "\x00"))]
				if c != nil {
					c.Rules = append(c.Rules, r)
				}
				return nil
			})
			if err := dumps.tolerate(err); err != nil {
				return nil, fmt.Errorf("read rules of table %s %s: %w", ft.Family, ft.Name, err)
			}
		}
	}
	if dumps.seen {
		return tables, errInterrupted
	}
	return tables, nil
}

// Expression attributes (nf_tables.h; x/sys/unix lacks the compat ones).
const (
	nftaMatchName = 1 // NFTA_MATCH_NAME
	nftaMatchInfo = 3 // NFTA_MATCH_INFO
	nftJump       = 0xfffffffd
	nftGoto       = 0xfffffffc
)

// parseForeignExprs reads from a rule's NFTA_RULE_EXPRESSIONS the targets
// of its immediate jump and goto verdicts and the texts of its xt comment
// matches.
func parseForeignExprs(b []byte, r *ForeignRule) {
	forEachAttr(b, func(t uint16, elem []byte) {
		if t != unix.NFTA_LIST_ELEM {
			return
		}
		var name, data []byte
		forEachAttr(elem, func(t uint16, v []byte) {
			switch t {
			case unix.NFTA_EXPR_NAME:
				name = bytes.TrimRight(v, "\x00")
			case unix.NFTA_EXPR_DATA:
				data = v
			}
		})
		switch string(name) {
		case "immediate":
			forEachAttr(data, func(t uint16, v []byte) {
				if t != unix.NFTA_IMMEDIATE_DATA {
					return
				}
				forEachAttr(v, func(t uint16, v []byte) {
					if t != unix.NFTA_DATA_VERDICT {
						return
					}
					var code uint32
					var chain string
					forEachAttr(v, func(t uint16, v []byte) {
						switch t {
						case unix.NFTA_VERDICT_CODE:
							if len(v) == 4 {
								code = binary.BigEndian.Uint32(v)
							}
						case unix.NFTA_VERDICT_CHAIN:
							chain = string(bytes.TrimRight(v, "\x00"))
						}
					})
					if (code == nftJump || code == nftGoto) && chain != "" {
						r.Targets = append(r.Targets, chain)
					}
				})
			})
		case "match":
			var mname, info []byte
			forEachAttr(data, func(t uint16, v []byte) {
				switch t {
				case nftaMatchName:
					mname = bytes.TrimRight(v, "\x00")
				case nftaMatchInfo:
					info = v
				}
			})
			// struct xt_comment_info: char comment[256].
			if string(mname) == "comment" {
				if i := bytes.IndexByte(info, 0); i >= 0 {
					info = info[:i]
				}
				if len(info) > 0 {
					r.Comments = append(r.Comments, string(info))
				}
			}
		}
	})
}

// CommitForeign removes the objects ops name in one transaction in the
// namespace netnsFd refers to (≤ 0: the caller's): all of them or, if the
// kernel refuses one, none. The error names the operation refused.
func CommitForeign(ctx context.Context, netnsFd int, ops []ForeignOp) error {
	if len(ops) == 0 {
		return nil
	}
	tx := &Transaction{Foreign: ops}
	b, err := encodeBatch(unix.NFPROTO_UNSPEC, "", tx, nil, 0)
	if err != nil {
		return err
	}
	defer b.release()
	_, _, err = newKernelTransport(netnsFd).commit(ctx, b, tx)
	if err != nil {
		return fmt.Errorf("remove %d objects of other tables: %w", len(ops), err)
	}
	return nil
}

// encodeForeign writes ops into w (the batch's first segment).
func (w *batchWriter) encodeForeign(ops []ForeignOp) error {
	w.foreign = true
	for i, o := range ops {
		fam, ok := familyNumbers[o.Family]
		if !ok {
			return fmt.Errorf("%s: unknown family %q", o, o.Family)
		}
		w.family = fam
		ref := msgRef{op: int32(i)}
		switch o.Kind {
		case ForeignDeleteTable:
			w.start(unix.NFT_MSG_DELTABLE, 0, ref)
			w.e.str(unix.NFTA_TABLE_NAME, o.Table)
		case ForeignDeleteRule:
			w.start(unix.NFT_MSG_DELRULE, 0, ref)
			w.e.str(unix.NFTA_RULE_TABLE, o.Table)
			w.e.str(unix.NFTA_RULE_CHAIN, o.Chain)
			w.e.attrHeader(unix.NFTA_RULE_HANDLE, 8)
			w.e.b = binary.BigEndian.AppendUint64(w.e.b, o.Handle)
		case ForeignFlushChain:
			w.start(unix.NFT_MSG_DELRULE, 0, ref)
			w.e.str(unix.NFTA_RULE_TABLE, o.Table)
			w.e.str(unix.NFTA_RULE_CHAIN, o.Chain)
		case ForeignDeleteChain:
			w.start(unix.NFT_MSG_DELCHAIN, 0, ref)
			w.e.str(unix.NFTA_CHAIN_TABLE, o.Table)
			w.e.str(unix.NFTA_CHAIN_NAME, o.Chain)
		default:
			return fmt.Errorf("%s: unknown kind", o)
		}
		w.finish()
	}
	return nil
}

// describeForeign names the foreign operations of a transaction, for its
// summary.
func describeForeign(ops []ForeignOp) string {
	tables := map[string]bool{}
	var names []string
	for _, o := range ops {
		t := string(o.Family) + " " + o.Table
		if !tables[t] {
			tables[t] = true
			names = append(names, t)
		}
	}
	return fmt.Sprintf("%d removals in other tables (%s)", len(ops), strings.Join(names, ", "))
}
