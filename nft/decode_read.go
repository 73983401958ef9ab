package nft

// Reading a table from the kernel into a Model: chains with their hooks,
// rules decoded from their expressions (decode.go), sets and maps with
// their elements. This is the kernel's view, for `nftep show`; the engine
// itself compares the kernel with its model by rule hashes (readback.go).

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// KernelTable is a table as the kernel holds it, decoded.
type KernelTable struct {
	// Model holds the table's chains, rules, sets and elements. Rules
	// the decoder could not read completely hold Foreign matches or
	// actions.
	Model *Model
	// Exists is false when the kernel has no such table (Model is then
	// empty).
	Exists bool
	// Sets and Chains are the names in the kernel's order, which is the
	// order they were created in and the order `nft list table` prints.
	Sets, Chains []string
	// Rules holds, per chain, what the kernel says about each rule of
	// Model's chain, in order.
	Rules map[string][]KernelRule
	// Problems lists what could not be decoded (a set of a type nftep
	// does not use, say); such objects are left out or left empty.
	Problems []string
}

// KernelRule is what the kernel holds about one rule besides its content.
type KernelRule struct {
	// Handle is the kernel's handle of the rule.
	Handle uint64
	// Hash is the rule hash nftep wrote into the rule's userdata, or ""
	// when there is none (a rule another program added).
	Hash string
}

// Ours says whether the rule carries nftep's hash of exactly what it holds:
// nftep programmed it and nobody changed it since.
func (kt *KernelTable) Ours(chain string, i int) bool {
	rs := kt.Rules[chain]
	c := kt.Model.Chain(chain)
	if c == nil || i < 0 || i >= len(rs) || i >= len(c.Rules) {
		return false
	}
	return rs[i].Hash != "" && rs[i].Hash == ruleHash(c.Rules[i])
}

// String returns the table as `nft list table` prints it: sets then chains,
// each in the kernel's order.
func (kt *KernelTable) String() string {
	return kt.Model.stringInOrder(kt.Sets, kt.Chains)
}

// ReadKernelTable reads table family/name of the network namespace netnsFd
// refers to (≤ 0: the caller's) and decodes it. A table that does not exist
// reads as one with Exists false. A dump interrupted by a concurrent change
// is read again, a few times.
func ReadKernelTable(ctx context.Context, netnsFd int, family Family, name string) (*KernelTable, error) {
	return readKernelTableFrom(ctx, newKernelTransport(netnsFd), family, name)
}

// tableReader is where readKernelTable reads from: a socket for the dumps,
// and the elements of a set (the kernel transport; in tests, one over a
// Fake).
type tableReader interface {
	dialSock() (*nlSock, error)
	readElements(ctx context.Context, family uint8, table string, sets []string) []elementsRead
}

func (k *kernelTransport) dialSock() (*nlSock, error) { return k.dial() }

// readKernelTableFrom is ReadKernelTable from r.
func readKernelTableFrom(ctx context.Context, r tableReader, family Family, name string) (*KernelTable, error) {
	var err error
	for range 5 {
		var kt *KernelTable
		kt, err = readKernelTable(ctx, r, family, name)
		if !errors.Is(err, errInterrupted) {
			return kt, err
		}
	}
	return nil, err
}

func readKernelTable(ctx context.Context, r tableReader, family Family, name string) (*KernelTable, error) {
	fam := familyNum(family)
	s, err := r.dialSock()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	kt := &KernelTable{Model: NewModel(family, name), Rules: map[string][]KernelRule{}}
	_, err = s.request(ctx, unix.NFT_MSG_GETTABLE, fam, func(e *enc) { e.str(unix.NFTA_TABLE_NAME, name) })
	if errors.Is(err, syscall.ENOENT) {
		return kt, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read table: %w", err)
	}
	kt.Exists = true
	nameZ := append([]byte(name), 0)
	var dumps interruptions

	// Chains, in the kernel's order.
	var chains []*Chain
	err = s.dump(ctx, unix.NFT_MSG_GETCHAIN, fam, func(e *enc) { e.str(unix.NFTA_CHAIN_TABLE, name) }, func(m nlMsg) error {
		cm := parseChainMsg(m.data)
		if cm.table != name || cm.name == "" || cm.bound {
			return nil
		}
		c := &Chain{Name: cm.name}
		if cm.hook != nil {
			c.Base = parseHook(fam, cm.hook, cm.typ, cm.policy)
		}
		chains = append(chains, c)
		return nil
	})
	if err := dumps.tolerate(err); err != nil {
		return nil, fmt.Errorf("read chains: %w", err)
	}

	// Sets, named and anonymous.
	type setInfo struct {
		name                             string
		flags, keyType, keyLen, dataType uint32
		hasData                          bool
		comment                          string
	}
	var sets []setInfo
	err = s.dump(ctx, unix.NFT_MSG_GETSET, fam, func(e *enc) { e.str(unix.NFTA_SET_TABLE, name) }, func(m nlMsg) error {
		var (
			table []byte
			si    setInfo
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
				si.name = string(bytes.TrimRight(v, "\x00"))
			case unix.NFTA_SET_FLAGS:
				si.flags = u()
			case unix.NFTA_SET_KEY_TYPE:
				si.keyType = u()
			case unix.NFTA_SET_KEY_LEN:
				si.keyLen = u()
			case unix.NFTA_SET_DATA_TYPE:
				si.dataType, si.hasData = u(), true
			case unix.NFTA_SET_USERDATA:
				si.comment = udataString(v, userdata.NFTNL_UDATA_SET_COMMENT)
			}
		})
		if bytes.Equal(table, nameZ) && si.name != "" {
			sets = append(sets, si)
		}
		return nil
	})
	if err := dumps.tolerate(err); err != nil {
		return nil, fmt.Errorf("read sets: %w", err)
	}
	anon := map[string]*anonContent{}
	setNames := make([]string, len(sets))
	for i, si := range sets {
		setNames[i] = si.name
	}
	reads := r.readElements(ctx, fam, name, setNames)
	for i, si := range sets {
		els, err := reads[i].elements, reads[i].err
		if err != nil {
			kt.Problems = append(kt.Problems, fmt.Sprintf("set %s: read elements: %v", si.name, err))
		}
		if si.flags&unix.NFT_SET_ANONYMOUS != 0 {
			anon[si.name] = &anonContent{flags: si.flags, keyType: si.keyType, elements: els}
			continue
		}
		set, err := decodeSetDef(si.name, si.flags, si.keyType, si.keyLen, si.dataType, si.hasData)
		if err != nil {
			kt.Problems = append(kt.Problems, err.Error())
			continue
		}
		set.Comment = si.comment
		if set.Elements, err = decodeElements(set, els); err != nil {
			kt.Problems = append(kt.Problems, err.Error())
			set.Elements = nil
		}
		kt.Model.SetSet(set)
		kt.Sets = append(kt.Sets, set.Name)
	}

	// Rules, chain by chain (a table-wide dump is quadratic, see
	// tableWideDumpChains).
	d := &decoder{family: family, anon: anon}
	for _, c := range chains {
		var infos []KernelRule
		err := s.dump(ctx, unix.NFT_MSG_GETRULE, fam, func(e *enc) {
			e.str(unix.NFTA_RULE_TABLE, name)
			e.str(unix.NFTA_RULE_CHAIN, c.Name)
		}, func(m nlMsg) error {
			r := parseRuleMsg(m.data)
			if !bytes.Equal(r.table, nameZ) {
				return nil
			}
			c.Rules = append(c.Rules, d.decodeRule(parseExprs(fam, r.exprs), r.ud))
			infos = append(infos, KernelRule{Handle: r.handle, Hash: ruleHashFromUserData(r.ud)})
			return nil
		})
		if errors.Is(err, syscall.ENOENT) {
			err = errInterrupted
		}
		if err := dumps.tolerate(err); err != nil {
			return nil, fmt.Errorf("read rules of chain %s: %w", c.Name, err)
		}
		kt.Model.SetChain(c)
		kt.Chains = append(kt.Chains, c.Name)
		kt.Rules[c.Name] = infos
	}
	if dumps.seen {
		return kt, errInterrupted
	}
	return kt, nil
}

// udataString returns the string TLV typ of ud, or "", without panicking
// on foreign bytes.
func udataString(ud []byte, typ userdata.Type) string {
	for len(ud) >= 2 {
		t, n := userdata.Type(ud[0]), int(ud[1])
		if len(ud) < 2+n {
			return ""
		}
		if t == typ {
			return strings.TrimSuffix(string(ud[2:2+n]), "\x00")
		}
		ud = ud[2+n:]
	}
	return ""
}

// decodeSetDef is the inverse of encodeSet: the definition of a set from
// its kernel attributes.
func decodeSetDef(name string, flags, keyType, keyLen, dataType uint32, hasData bool) (*Set, error) {
	s := &Set{Name: name, Interval: flags&unix.NFT_SET_INTERVAL != 0}
	byMagic := map[uint32]KeyType{}
	for t, info := range keyTypes {
		byMagic[info.dt.GetNFTMagic()] = t
	}
	if t, ok := byMagic[keyType]; ok && flags&nftSetConcat == 0 {
		s.Key = []KeyType{t}
	} else {
		// A concatenation: 6-bit type numbers, the first field highest.
		for m := keyType; m != 0; m >>= nftables.SetConcatTypeBits {
			t, ok := byMagic[m&(1<<nftables.SetConcatTypeBits-1)]
			if !ok {
				return nil, fmt.Errorf("set %s: key type 0x%x is not one nftep uses", name, keyType)
			}
			s.Key = append([]KeyType{t}, s.Key...)
		}
	}
	n := 0
	for _, t := range s.Key {
		n += pad4(keyTypes[t].size)
	}
	if len(s.Key) == 1 {
		n = keyTypes[s.Key[0]].size
	}
	if len(s.Key) == 0 || uint32(n) != keyLen {
		return nil, fmt.Errorf("set %s: key type 0x%x with length %d is not one nftep uses", name, keyType, keyLen)
	}
	if flags&unix.NFT_SET_MAP != 0 || hasData {
		mark := nftables.TypeMark
		switch {
		case dataType == nftDataVerdictType:
			s.Data = DataVerdict
		case dataType == mark.GetNFTMagic():
			s.Data = DataMark
		default:
			return nil, fmt.Errorf("set %s: map value type 0x%x is not one nftep uses", name, dataType)
		}
	}
	if flags&(unix.NFT_SET_TIMEOUT|unix.NFT_SET_EVAL|unix.NFT_SET_OBJECT) != 0 {
		return nil, fmt.Errorf("set %s: flags 0x%x are not ones nftep uses", name, flags)
	}
	return s, nil
}
