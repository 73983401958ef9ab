package nft

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Encoding of sets and elements into a batch.

// Set attributes google/nftables v0.3.0 defines but x/sys/unix does not.
const (
	nftSetConcat       = 0x80 // NFT_SET_CONCAT
	nftaSetDescConcat  = 2    // NFTA_SET_DESC_CONCAT
	nftaSetElemKeyEnd  = 10   // NFTA_SET_ELEM_KEY_END
	nftDataVerdictType = 0xffffff00
)

// addSet writes NEWSET for s as google/nftables' AddSet does (set.go), with
// the vocabulary's userdata, so that nft lists our sets as Set.String prints
// them.
//
// nelems is the number of elements a constant set is created with: nft
// and google/nftables send it as the set's size, and the kernel picks the
// set backend from it.
func (w *batchWriter) addSet(s *nftables.Set, nelems int, ref msgRef) error {
	if s.Counter {
		return errors.New("set counters are not supported")
	}
	flags := setFlags(s)
	w.start(unix.NFT_MSG_NEWSET, unix.NLM_F_CREATE, ref)
	e := &w.e
	e.str(unix.NFTA_SET_TABLE, w.table)
	e.str(unix.NFTA_SET_NAME, s.Name)
	e.be32(unix.NFTA_SET_FLAGS, flags)
	e.be32(unix.NFTA_SET_KEY_TYPE, s.KeyType.GetNFTMagic())
	e.be32(unix.NFTA_SET_KEY_LEN, s.KeyType.Bytes)
	e.be32(unix.NFTA_SET_ID, s.ID)
	if s.IsMap {
		if s.DataType.GetNFTMagic() == nftables.TypeVerdict.GetNFTMagic() {
			e.be32(unix.NFTA_SET_DATA_TYPE, nftDataVerdictType)
		} else {
			e.be32(unix.NFTA_SET_DATA_TYPE, s.DataType.GetNFTMagic())
		}
		e.be32(unix.NFTA_SET_DATA_LEN, s.DataType.Bytes)
	}
	if s.HasTimeout && s.Timeout != 0 {
		e.attrHeader(unix.NFTA_SET_TIMEOUT, 8)
		e.b = binary.BigEndian.AppendUint64(e.b, uint64(s.Timeout.Milliseconds()))
	}
	if s.Constant {
		d := e.nest(unix.NFTA_SET_DESC)
		e.be32(unix.NFTA_SET_DESC_SIZE, uint32(nelems))
		if err := e.end(d); err != nil {
			return err
		}
	}
	if s.Size > 0 || s.Concatenation {
		d := e.nest(unix.NFTA_SET_DESC)
		if s.Size > 0 {
			e.be32(unix.NFTA_SET_DESC_SIZE, s.Size)
		}
		if s.Concatenation {
			c := e.nest(nftaSetDescConcat)
			for _, f := range nftables.ConcatSetTypeElements(s.KeyType) {
				// Each field: NFTA_LIST_ELEM{NFTA_SET_FIELD_LEN}, as
				// google/nftables encodes it.
				fe := e.nest(unix.NFTA_LIST_ELEM)
				e.be32(unix.NFTA_SET_DESC_SIZE, f.Bytes)
				if err := e.end(fe); err != nil {
					return err
				}
			}
			if err := e.end(c); err != nil {
				return err
			}
		}
		if err := e.end(d); err != nil {
			return err
		}
	}
	// The vocabulary's userdata: google/nftables' plus the data byte order
	// of a mark map, without which nft prints mark 0x1 as 0x01000000.
	ud := nftSetUserData(s)
	if len(ud) > 0 {
		e.bytes(unix.NFTA_SET_USERDATA, ud)
	}
	w.finish()
	return nil
}

// maxElemList is the largest element list we put in one message. The list is
// one nested attribute and nla_len is a u16, so it must stay below 64 KiB;
// google/nftables v0.3.0 lets the length wrap and the kernel then sees only
// the first ~500 elements (2,000 ifname → verdict elements in one call left
// 510 in the kernel, and Flush returned nil).
const maxElemList = 60 << 10

// elements writes op's elements of set name (id != 0 for a set created in
// this batch) in as many messages as their size needs.
func (w *batchWriter) elements(typ uint16, op *Op, name string, id uint32, opIdx int32) error {
	if len(op.Elements) == 0 {
		return nil
	}
	// encodeElements sends elements in the printer's order (so that nft
	// lists a cold-started set as Set.String prints it); put op.Elements in
	// the same order so that an error can name the element it is about.
	sorted, err := sortElements(op.Set, op.Elements)
	if err != nil {
		return err
	}
	for i := range sorted {
		op.Elements[i] = sorted[i].Element
	}
	kes, err := encodeElements(op.Set, op.Elements)
	if err != nil {
		return err
	}
	ns, err := encodeSet(&nftables.Table{Name: w.table, Family: nftables.TableFamily(w.family)}, op.Set)
	if err != nil {
		return err
	}
	// Map kernel elements back to model elements for error messages: an
	// interval end belongs to the element before it.
	owner := make([]int32, len(kes))
	k := int32(-1)
	for i := range kes {
		if !kes[i].IntervalEnd || k < 0 {
			k++
		}
		owner[i] = k
	}
	if typ == unix.NFT_MSG_DELSETELEM {
		// The kernel finds the element by key; sending the value too would
		// only make the message bigger.
		for i := range kes {
			kes[i].VerdictData, kes[i].Val, kes[i].Comment = nil, nil, ""
		}
	}
	return w.elementList(typ, ns, name, id, kes, msgRef{op: opIdx}, owner)
}

// elementList writes kes into NEWSETELEM/DELSETELEM messages of at most
// maxElemList bytes of elements each, never separating an interval's start
// from its end.
func (w *batchWriter) elementList(typ uint16, s *nftables.Set, name string, id uint32, kes []nftables.SetElement, ref msgRef, owner []int32) error {
	flags := uint16(0)
	if typ == unix.NFT_MSG_NEWSETELEM {
		flags = unix.NLM_F_CREATE
	}
	i := 0
	for i < len(kes) {
		r := ref
		if owner != nil {
			r.sub = owner[i]
		}
		w.start(typ, flags, r)
		w.e.str(unix.NFTA_SET_ELEM_LIST_SET, name)
		if id != 0 {
			w.e.be32(unix.NFTA_SET_ELEM_LIST_SET_ID, id)
		}
		w.e.str(unix.NFTA_SET_ELEM_LIST_TABLE, w.table)
		list := w.e.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
		listStart := len(w.e.b)
		for i < len(kes) {
			// Keep an interval's end with its start.
			j := i + 1
			if j < len(kes) && kes[j].IntervalEnd && !kes[i].IntervalEnd {
				j++
			}
			mark := len(w.e.b)
			for x := i; x < j; x++ {
				if err := w.element(s, &kes[x]); err != nil {
					return err
				}
			}
			if len(w.e.b)-listStart > maxElemList && mark > listStart {
				w.e.b = w.e.b[:mark]
				break
			}
			i = j
		}
		if err := w.e.end(list); err != nil {
			return err
		}
		w.finish()
	}
	return nil
}

// element appends one element to the message, encoded as google/nftables'
// makeElemList does, but in an NFTA_LIST_ELEM as nft sends it (the kernel
// ignores the type; google/nftables numbers elements from 1, which runs into
// the attribute flag bits past 32,767).
func (w *batchWriter) element(s *nftables.Set, v *nftables.SetElement) error {
	e := &w.e
	item := e.nest(unix.NFTA_LIST_ELEM)
	if v.IntervalEnd {
		e.be32(unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
	}
	k := e.nest(unix.NFTA_SET_ELEM_KEY)
	e.bytes(unix.NFTA_DATA_VALUE, v.Key)
	if err := e.end(k); err != nil {
		return err
	}
	if len(v.KeyEnd) > 0 {
		ke := e.nest(nftaSetElemKeyEnd)
		e.bytes(unix.NFTA_DATA_VALUE, v.KeyEnd)
		if err := e.end(ke); err != nil {
			return err
		}
	}
	if s.HasTimeout && v.Timeout != 0 {
		e.attrHeader(unix.NFTA_SET_ELEM_TIMEOUT, 8)
		e.b = binary.BigEndian.AppendUint64(e.b, uint64(v.Timeout.Milliseconds()))
	}
	switch {
	case v.VerdictData != nil:
		d := e.nest(unix.NFTA_SET_ELEM_DATA)
		vd := e.nest(unix.NFTA_DATA_VERDICT)
		e.be32(unix.NFTA_VERDICT_CODE, uint32(v.VerdictData.Kind))
		if v.VerdictData.Chain != "" {
			e.str(unix.NFTA_VERDICT_CHAIN, v.VerdictData.Chain)
		}
		if err := e.end(vd); err != nil {
			return err
		}
		if err := e.end(d); err != nil {
			return err
		}
	case len(v.Val) > 0:
		d := e.nest(unix.NFTA_SET_ELEM_DATA)
		e.bytes(unix.NFTA_DATA_VALUE, v.Val)
		if err := e.end(d); err != nil {
			return err
		}
	}
	if v.Comment != "" {
		e.bytes(unix.NFTA_SET_ELEM_USERDATA, userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_ELEM_COMMENT, v.Comment))
	}
	return e.end(item)
}

// describe names the operation of message i of the run, for an error.
func (w *batchWriter) describe(tx *Transaction, i int) string {
	ref := w.refs[i]
	if w.foreign {
		return tx.Foreign[ref.op].String()
	}
	op := &tx.Ops[ref.op]
	switch op.Kind {
	case OpAddRules:
		if ref.anon {
			return describeRule(op, int(ref.sub), "add the anonymous set of rule")
		}
	case OpAddSet:
		if i > 0 && w.refs[i-1].op == ref.op && int(ref.sub) < len(op.Elements) {
			return fmt.Sprintf("add element %q to new %s %q", op.Elements[ref.sub].Key, setNoun(op.Set), op.Name)
		}
		return fmt.Sprintf("add %s %q", setNoun(op.Set), op.Name)
	case OpAddElements, OpDeleteElements:
		first := int(ref.sub)
		n := len(op.Elements) - first
		if i+1 < len(w.refs) && w.refs[i+1].op == ref.op {
			n = int(w.refs[i+1].sub) - first
		}
		return describeElements(op, first, n)
	}
	return describeOp(op, int(ref.sub))
}
