package nft

// Reading our table back from the kernel: enough to tell, object by object,
// whether the kernel holds what we programmed, and nothing more. Rules are
// compared by the hash kept in their userdata, never by their expressions.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// kernelTable is our table as the kernel holds it.
type kernelTable struct {
	exists  bool
	dormant bool
	chains  map[string]*kernelChain
	sets    map[string]*kernelSet
	rules   int
}

// kernelChain is one chain of the table.
type kernelChain struct {
	// base is the chain's hook; nil for a regular chain. A hook we cannot
	// express (a device, an unknown hook number) reads as a BaseChain with
	// an impossible Hook, so that it never equals a desired one.
	base   *BaseChain
	rules  int
	d      *digester
	digest digest
}

// kernelSet is one named set or map of the table.
type kernelSet struct {
	flags, keyType, keyLen, dataType, dataLen uint32
	hasData                                   bool
	elements                                  []nftables.SetElement
}

// Chain attributes and flags x/sys/unix does not define (nf_tables.h).
const (
	nftaChainFlags  = 10  // NFTA_CHAIN_FLAGS
	nftaHookDevs    = 4   // NFTA_HOOK_DEVS
	nftChainBinding = 0x4 // NFT_CHAIN_BINDING
)

// readTable reads table name of the given family: the table, its chains,
// sets, and the hashes of every rule (readRules). Elements are read by
// readElements, only for the sets worth reading.
//
// When a dump was interrupted by a concurrent commit (to any table of the
// namespace), readTable still reads everything and returns the whole,
// possibly inconsistent, table with an error matching errInterrupted.
func readTable(ctx context.Context, s *nlSock, dial func() (*nlSock, error), family uint8, name string) (*kernelTable, error) {
	kt := &kernelTable{chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}}
	m, err := s.request(ctx, unix.NFT_MSG_GETTABLE, family, func(e *enc) { e.str(unix.NFTA_TABLE_NAME, name) })
	if errors.Is(err, syscall.ENOENT) {
		return kt, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read table: %w", err)
	}
	kt.exists = true
	forEachAttr(payload(m.data), func(typ uint16, v []byte) {
		if typ == unix.NFTA_TABLE_FLAGS && len(v) == 4 {
			kt.dormant = binary.BigEndian.Uint32(v)&unix.NFT_TABLE_F_DORMANT != 0
		}
	})
	nameZ := append([]byte(name), 0)
	var dumps interruptions

	// Chains. The kernel's chain dump does not filter by table
	// (nf_tables_dump_chains looks at the family only), so we do.
	err = s.dump(ctx, unix.NFT_MSG_GETCHAIN, family, func(e *enc) { e.str(unix.NFTA_CHAIN_TABLE, name) }, func(m nlMsg) error {
		c := parseChainMsg(m.data)
		if c.table != name || c.name == "" || c.bound {
			return nil
		}
		kc := &kernelChain{d: newDigester()}
		if c.hook != nil {
			kc.base = parseHook(family, c.hook, c.typ, c.policy)
		}
		kt.chains[c.name] = kc
		return nil
	})
	if err := dumps.tolerate(err); err != nil {
		return nil, fmt.Errorf("read chains: %w", err)
	}

	// Sets.
	err = s.dump(ctx, unix.NFT_MSG_GETSET, family, func(e *enc) { e.str(unix.NFTA_SET_TABLE, name) }, func(m nlMsg) error {
		var (
			table, sname []byte
			ks           kernelSet
		)
		forEachAttr(payload(m.data), func(t uint16, v []byte) {
			u := func() uint32 {
				if len(v) == 4 {
					return binary.BigEndian.Uint32(v)
				}
				return 0
			}
			switch t {
			case unix.NFTA_SET_TABLE:
				table = v
			case unix.NFTA_SET_NAME:
				sname = v
			case unix.NFTA_SET_FLAGS:
				ks.flags = u()
			case unix.NFTA_SET_KEY_TYPE:
				ks.keyType = u()
			case unix.NFTA_SET_KEY_LEN:
				ks.keyLen = u()
			case unix.NFTA_SET_DATA_TYPE:
				ks.dataType = u()
				ks.hasData = true
			case unix.NFTA_SET_DATA_LEN:
				ks.dataLen = u()
			}
		})
		if !bytes.Equal(table, nameZ) || len(sname) == 0 || ks.flags&unix.NFT_SET_ANONYMOUS != 0 {
			// Anonymous sets belong to the rules that use them.
			return nil
		}
		kt.sets[string(bytes.TrimRight(sname, "\x00"))] = &ks
		return nil
	})
	if err := dumps.tolerate(err); err != nil {
		return nil, fmt.Errorf("read sets: %w", err)
	}

	if err := dumps.tolerate(readRules(ctx, s, dial, family, name, kt)); err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	for _, kc := range kt.chains {
		kt.rules += kc.rules
		kc.digest = kc.d.sum()
		kc.d = nil
	}
	if dumps.seen {
		return kt, errInterrupted
	}
	return kt, nil
}

// tableWideDumpChains is the largest table (in chains) whose rules are read
// with one table-wide dump.
//
// A table-wide NFT_MSG_GETRULE dump (only NFTA_RULE_TABLE set) is one
// request, but the kernel fills each 32 KiB dump buffer by walking the table
// from its first rule again and skipping what it already sent
// (nf_tables_dump_rules: "if (*idx < ctx->s_idx) goto cont"): quadratic. At
// 240,000 rules (about 100 per buffer) that measured 14.8 s on kernel 6.18.
// A dump per chain (NFTA_RULE_CHAIN set, found by hash) is linear, about
// 20 µs a chain, and several sockets read chains in parallel.
const tableWideDumpChains = 256

// readRules reads the hash in the userdata of every rule of kt's chains into
// the chains' digests. Only the chain and the userdata are looked at;
// expressions are skipped unparsed.
//
// dial opens the further sockets that read chains in parallel.
func readRules(ctx context.Context, s *nlSock, dial func() (*nlSock, error), family uint8, table string, kt *kernelTable) error {
	tableZ := append([]byte(table), 0)
	if len(kt.chains) <= tableWideDumpChains {
		var last *kernelChain
		var lastName []byte
		return s.dump(ctx, unix.NFT_MSG_GETRULE, family, func(e *enc) { e.str(unix.NFTA_RULE_TABLE, table) }, func(m nlMsg) error {
			chain, ud, ok := parseRule(m, tableZ)
			if !ok {
				return nil
			}
			// Rules come chain by chain: remember the last chain.
			if last == nil || !bytes.Equal(chain, lastName) {
				last = kt.chains[string(bytes.TrimRight(chain, "\x00"))]
				lastName = append(lastName[:0], chain...)
			}
			if last != nil { // nil: a chain bound to a rule, skipped
				last.rules++
				last.d.add(ruleHashFromUserData(ud))
			}
			return nil
		})
	}

	names := make(chan string)
	workers := min(4, max(2, runtime.GOMAXPROCS(0)))
	errs := make([]error, workers)
	intr := make([]bool, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := dial()
			if err != nil {
				errs[w] = err
				for range names {
				}
				return
			}
			defer ws.Close()
			for name := range names {
				if errs[w] == nil {
					errs[w] = ctx.Err()
				}
				if errs[w] != nil {
					continue
				}
				kc := kt.chains[name]
				err := ws.dump(ctx, unix.NFT_MSG_GETRULE, family, func(e *enc) {
					e.str(unix.NFTA_RULE_TABLE, table)
					e.str(unix.NFTA_RULE_CHAIN, name)
				}, func(m nlMsg) error {
					if _, ud, ok := parseRule(m, tableZ); ok {
						kc.rules++
						kc.d.add(ruleHashFromUserData(ud))
					}
					return nil
				})
				if errors.Is(err, syscall.ENOENT) {
					// The chain went while we read: the generation
					// moved, and the caller reads again.
					err = errInterrupted
				}
				if errors.Is(err, errInterrupted) {
					// Read the other chains all the same: the
					// caller may have to use this read.
					intr[w] = true
					err = nil
				}
				errs[w] = err
			}
		}()
	}
	for name := range kt.chains {
		names <- name
	}
	close(names)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if slices.Contains(intr, true) {
		return errInterrupted
	}
	return nil
}

// ruleMsg is what a rule dump message says of one rule. The fields alias
// the message (names NUL-terminated): read-back parses every rule of a
// table, and copies nothing it does not keep.
type ruleMsg struct {
	table, chain, exprs, ud []byte
	handle                  uint64
}

// parseRuleMsg reads a NFT_MSG_NEWRULE message of a dump.
func parseRuleMsg(data []byte) ruleMsg {
	var r ruleMsg
	forEachAttr(payload(data), func(t uint16, v []byte) {
		switch t {
		case unix.NFTA_RULE_TABLE:
			r.table = v
		case unix.NFTA_RULE_CHAIN:
			r.chain = v
		case unix.NFTA_RULE_EXPRESSIONS:
			r.exprs = v
		case unix.NFTA_RULE_USERDATA:
			r.ud = v
		case unix.NFTA_RULE_HANDLE:
			if len(v) == 8 {
				r.handle = binary.BigEndian.Uint64(v)
			}
		}
	})
	return r
}

// parseRule returns the chain and userdata of a rule message of table
// (NUL-terminated name).
func parseRule(m nlMsg, tableZ []byte) (chain, ud []byte, ok bool) {
	r := parseRuleMsg(m.data)
	return r.chain, r.ud, bytes.Equal(r.table, tableZ)
}

// elementsRead is what reading one set's elements gave.
type elementsRead struct {
	elements []nftables.SetElement
	err      error
}

// readSetsElements reads the elements of the named sets of table, a dump
// per set, on up to four sockets in parallel (dial opens them). The result
// is in the order of names; a set whose elements cannot be read has its
// error there (the caller recreates such a set), as has every set when no
// socket opens.
func readSetsElements(ctx context.Context, dial func() (*nlSock, error), family uint8, table string, names []string) []elementsRead {
	out := make([]elementsRead, len(names))
	workers := min(len(names), 4, max(2, runtime.GOMAXPROCS(0)))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := dial()
			if err == nil {
				defer s.Close()
			}
			var r elementReader
			for i := range next {
				if err != nil {
					out[i].err = err
					continue
				}
				if err := ctx.Err(); err != nil {
					out[i].err = err
					continue
				}
				out[i].elements, out[i].err = r.read(ctx, s, family, table, names[i])
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// elementReader parses set element dumps (NFT_MSG_NEWSETELEM messages) into
// google/nftables' SetElement form, which decodeElements takes: Key and
// KeyEnd the NFTA_DATA_VALUE bytes, Val the value's NFTA_DATA_VALUE bytes
// or its NFTA_DATA_VERDICT nest, Comment from the userdata. The bytes are
// copied out of the receive buffer into one arena per set, so a set of
// any size costs a handful of allocations. Expressions, timeouts and
// counters are not read: nftep's sets have none that matter.
type elementReader struct{}

// read dumps the elements of set name with s.
func (elementReader) read(ctx context.Context, s *nlSock, family uint8, table, name string) ([]nftables.SetElement, error) {
	var (
		elems []nftables.SetElement
		arena []byte
		bad   error
	)
	// keep copies v into the arena: the receive buffer is reused by the
	// next read. A full arena is replaced, not grown, so the slices
	// already handed out stay valid.
	keep := func(v []byte) []byte {
		if len(v) == 0 {
			return nil
		}
		if cap(arena)-len(arena) < len(v) {
			arena = make([]byte, 0, max(4096, len(v)))
		}
		n := len(arena)
		arena = append(arena, v...)
		return arena[n:len(arena):len(arena)]
	}
	err := s.dump(ctx, unix.NFT_MSG_GETSETELEM, family, func(e *enc) {
		e.str(unix.NFTA_SET_ELEM_LIST_TABLE, table)
		e.str(unix.NFTA_SET_ELEM_LIST_SET, name)
	}, func(m nlMsg) error {
		if m.typ != msgType(unix.NFT_MSG_NEWSETELEM) {
			return nil
		}
		forEachAttr(payload(m.data), func(t uint16, v []byte) {
			if t != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				return
			}
			forEachAttr(v, func(t uint16, v []byte) {
				if t != unix.NFTA_LIST_ELEM {
					return
				}
				var se nftables.SetElement
				forEachAttr(v, func(t uint16, v []byte) {
					switch t {
					case unix.NFTA_SET_ELEM_KEY:
						se.Key = keep(dataValue(v))
					case nftaSetElemKeyEnd:
						se.KeyEnd = keep(dataValue(v))
					case unix.NFTA_SET_ELEM_DATA:
						se.Val = keep(dataValue(v))
					case unix.NFTA_SET_ELEM_FLAGS:
						if len(v) == 4 {
							se.IntervalEnd = binary.BigEndian.Uint32(v)&unix.NFT_SET_ELEM_INTERVAL_END != 0
						}
					case unix.NFTA_SET_ELEM_USERDATA:
						c, ok := udataComment(v)
						if !ok && bad == nil {
							bad = fmt.Errorf("set %q: element userdata %x is not TLV", name, v)
						}
						se.Comment = c
					}
				})
				elems = append(elems, se)
			})
		})
		return nil
	})
	// An interrupted dump is used all the same: the commit that
	// interrupted it moved the generation, so the caller's read is
	// repeated or reported inconsistent anyway (see Resync).
	if err != nil && !errors.Is(err, errInterrupted) {
		return nil, fmt.Errorf("set %q: %w", name, err)
	}
	return elems, bad
}

// dataValue returns the content of an NFTA_DATA nest: the bytes of its
// NFTA_DATA_VALUE or its NFTA_DATA_VERDICT nest (google/nftables' Val).
func dataValue(b []byte) []byte {
	var out []byte
	forEachAttr(b, func(t uint16, v []byte) {
		if t == unix.NFTA_DATA_VALUE || t == unix.NFTA_DATA_VERDICT {
			out = v
		}
	})
	return out
}

// udataComment reads the comment (NFTNL_UDATA_SET_ELEM_COMMENT, type 0) of
// an element's userdata, type-length-value with one byte each, the string
// NUL-terminated. ok is false for userdata that is not such a list
// (written by another tool).
func udataComment(ud []byte) (comment string, ok bool) {
	for len(ud) > 0 {
		if len(ud) < 2 || len(ud) < 2+int(ud[1]) {
			return "", false
		}
		typ, v := ud[0], ud[2:2+int(ud[1])]
		if typ == 0 {
			v, _ = bytes.CutSuffix(v, []byte{0})
			comment = string(v)
		}
		ud = ud[2+int(ud[1]):]
	}
	return comment, true
}

// parseHook turns a chain's NFTA_CHAIN_HOOK into a BaseChain.
// interruptions notes the dumps of a read the kernel interrupted (the
// ruleset changed during them). An interrupted dump still runs to its end:
// the read goes on, and is repeated or reported afterwards.
type interruptions struct{ seen bool }

// tolerate returns err, except an interruption, which it notes.
func (i *interruptions) tolerate(err error) error {
	if errors.Is(err, errInterrupted) {
		i.seen = true
		return nil
	}
	return err
}

// chainMsg is what a chain dump message says of one chain.
type chainMsg struct {
	table, name string
	// hook is the raw NFTA_CHAIN_HOOK (nil for a regular chain), typ and
	// policy the base chain's type and policy.
	hook   []byte
	typ    string
	policy uint32
	// bound: an anonymous chain bound to a rule (`jump { … }`), which
	// goes with its rule.
	bound bool
}

// parseChainMsg reads a NFT_MSG_NEWCHAIN message of a dump.
func parseChainMsg(data []byte) chainMsg {
	c := chainMsg{policy: uint32(nfAccept)}
	forEachAttr(payload(data), func(t uint16, v []byte) {
		switch t {
		case unix.NFTA_CHAIN_TABLE:
			c.table = string(bytes.TrimRight(v, "\x00"))
		case unix.NFTA_CHAIN_NAME:
			c.name = string(bytes.TrimRight(v, "\x00"))
		case unix.NFTA_CHAIN_HOOK:
			c.hook = v
		case unix.NFTA_CHAIN_POLICY:
			if len(v) == 4 {
				c.policy = binary.BigEndian.Uint32(v)
			}
		case unix.NFTA_CHAIN_TYPE:
			c.typ = string(bytes.TrimRight(v, "\x00"))
		case nftaChainFlags:
			if len(v) == 4 {
				c.bound = binary.BigEndian.Uint32(v)&nftChainBinding != 0
			}
		}
	})
	return c
}

func parseHook(family uint8, b []byte, typ string, policy uint32) *BaseChain {
	bc := &BaseChain{Type: ChainType(typ), Policy: PolicyAccept}
	if policy == nfDrop {
		bc.Policy = PolicyDrop
	}
	num, prio := uint32(0xffffffff), int32(0)
	dev := false
	forEachAttr(b, func(t uint16, v []byte) {
		switch t {
		case unix.NFTA_HOOK_HOOKNUM:
			if len(v) == 4 {
				num = binary.BigEndian.Uint32(v)
			}
		case unix.NFTA_HOOK_PRIORITY:
			if len(v) == 4 {
				prio = int32(binary.BigEndian.Uint32(v))
			}
		case unix.NFTA_HOOK_DEV, nftaHookDevs:
			dev = true
		}
	})
	bc.Priority = int(prio)
	hooks := inetHooks
	if family == unix.NFPROTO_ARP {
		hooks = arpHooks
	}
	bc.Hook = Hook(fmt.Sprintf("hook#%d", num))
	if !dev {
		for h, n := range hooks {
			if n == num {
				bc.Hook = h
			}
		}
	}
	return bc
}

// payload skips the nfgenmsg at the start of an nf_tables message.
func payload(data []byte) []byte {
	if len(data) < 4 {
		return nil
	}
	return data[4:]
}

// forEachAttr calls fn for every top-level attribute of b (type without the
// NLA_F_NESTED / NLA_F_NET_BYTEORDER flags). It allocates nothing, which
// matters for the 240,000 rules of a large table.
func forEachAttr(b []byte, fn func(typ uint16, v []byte)) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < 4 || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:4])&^(unix.NLA_F_NESTED|unix.NLA_F_NET_BYTEORDER), b[4:l])
		al := (l + 3) &^ 3
		if al >= len(b) {
			return
		}
		b = b[al:]
	}
}

// setFlags is what addSet sends as NFTA_SET_FLAGS for s.
func setFlags(s *nftables.Set) uint32 {
	var flags uint32
	if s.Anonymous {
		flags |= unix.NFT_SET_ANONYMOUS
	}
	if s.Constant {
		flags |= unix.NFT_SET_CONSTANT
	}
	if s.Interval {
		flags |= unix.NFT_SET_INTERVAL
	}
	if s.IsMap {
		flags |= unix.NFT_SET_MAP
	}
	if s.HasTimeout {
		flags |= unix.NFT_SET_TIMEOUT
	}
	if s.Dynamic {
		flags |= unix.NFT_SET_EVAL
	}
	if s.Concatenation {
		flags |= nftSetConcat
	}
	return flags
}

// matches says whether the kernel's set has the definition encodeSet gives
// for want: same flags, key type and length, and value type. (The comment is
// not compared: it only shows in listings.)
func (ks *kernelSet) matches(table string, family uint8, want *Set) bool {
	ns, err := encodeSet(&nftables.Table{Name: table, Family: nftables.TableFamily(family)}, want)
	if err != nil {
		return false
	}
	const mask = unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT | unix.NFT_SET_INTERVAL | unix.NFT_SET_MAP |
		unix.NFT_SET_TIMEOUT | unix.NFT_SET_EVAL | nftSetConcat | unix.NFT_SET_OBJECT
	if ks.flags&mask != setFlags(ns) || ks.keyType != ns.KeyType.GetNFTMagic() || ks.keyLen != ns.KeyType.Bytes {
		return false
	}
	if !ns.IsMap {
		return !ks.hasData
	}
	if ns.DataType.GetNFTMagic() == nftables.TypeVerdict.GetNFTMagic() {
		// The kernel reports a verdict map's value length as its own
		// struct size, whatever was sent.
		return ks.dataType == nftDataVerdictType
	}
	return ks.dataType == ns.DataType.GetNFTMagic() && ks.dataLen == ns.DataType.Bytes
}
