package nft

import (
	"fmt"

	"github.com/nftep/nftep/internal/binrec"
)

// The binary form of a TableRecord (see package binrec): the record of the
// last apply is read and written by every one-shot apply, and a table of
// 10,000 workloads records tens of thousands of chains and elements.

// tableRecordFormat changes whenever the binary form does.
const tableRecordFormat = 1

// AppendBinary appends the record to w.
func (r *TableRecord) AppendBinary(w *binrec.Writer) {
	w.Grow(r.binarySize())
	w.Uint(tableRecordFormat)
	w.String(string(r.Family))
	w.String(r.Name)
	w.Uint(uint64(r.Gen))
	w.Uint(uint64(len(r.Chains)))
	for _, c := range r.Chains {
		w.String(c.Name)
		w.Fixed(c.Digest[:])
		w.Bool(c.Empty)
		w.Bool(c.Base != nil)
		if b := c.Base; b != nil {
			w.String(string(b.Type))
			w.String(string(b.Hook))
			w.Int(int64(b.Priority))
			w.String(string(b.Policy))
		}
	}
	w.Uint(uint64(len(r.Sets)))
	for _, s := range r.Sets {
		d := &s.Def
		w.String(d.Name)
		w.Uint(uint64(len(d.Key)))
		for _, k := range d.Key {
			w.String(string(k))
		}
		w.String(string(d.Data))
		w.Bool(d.Interval)
		w.String(d.Comment)
		w.Uint(uint64(len(s.Elements)))
		for _, e := range s.Elements {
			w.String(e.Key)
			w.Bool(e.Verdict != nil)
			if e.Verdict != nil {
				w.String(string(e.Verdict.Kind))
				w.String(e.Verdict.Chain)
			}
			w.Uint(uint64(e.Mark))
			w.String(e.Comment)
		}
	}
	for _, refs := range []map[string]int{r.ChainRefs, r.SetRefs} {
		w.Uint(uint64(len(refs)))
		for name, n := range refs {
			w.String(name)
			w.Uint(uint64(n))
		}
	}
}

// binarySize is about the size of the binary form (a little more).
func (r *TableRecord) binarySize() int {
	n := 64 + len(r.Name)
	for _, c := range r.Chains {
		n += len(c.Name) + 64
	}
	for _, s := range r.Sets {
		n += 128 + len(s.Def.Name) + len(s.Def.Comment)
		for _, e := range s.Elements {
			n += len(e.Key) + len(e.Comment) + 16
			if e.Verdict != nil {
				n += len(e.Verdict.Chain) + 16
			}
		}
	}
	for _, refs := range []map[string]int{r.ChainRefs, r.SetRefs} {
		for name := range refs {
			n += len(name) + 12
		}
	}
	return n
}

// ReadTableRecord reads a record AppendBinary wrote.
func ReadTableRecord(rd *binrec.Reader) (*TableRecord, error) {
	if f := rd.Uint(); rd.Err == nil && f != tableRecordFormat {
		return nil, fmt.Errorf("table record format %d, not %d", f, tableRecordFormat)
	}
	r := &TableRecord{Family: Family(rd.String()), Name: rd.String(), Gen: uint32(rd.Uint())}
	r.Chains = make([]ChainRecord, rd.Len())
	for i := range r.Chains {
		c := &r.Chains[i]
		c.Name = rd.String()
		rd.Fixed(c.Digest[:])
		c.Empty = rd.Bool()
		if rd.Bool() {
			c.Base = &BaseChain{Type: ChainType(rd.String()), Hook: Hook(rd.String()), Priority: int(rd.Int()), Policy: Policy(rd.String())}
		}
	}
	r.Sets = make([]SetRecord, rd.Len())
	for i := range r.Sets {
		s := &r.Sets[i]
		d := &s.Def
		d.Name = rd.String()
		if n := rd.Len(); n > 0 {
			d.Key = make([]KeyType, n)
			for j := range d.Key {
				d.Key[j] = KeyType(rd.String())
			}
		}
		d.Data = DataType(rd.String())
		d.Interval = rd.Bool()
		d.Comment = rd.String()
		s.Elements = make([]Element, rd.Len())
		var verdicts []Verdict // one allocation for the map's verdicts
		if d.Data == DataVerdict {
			verdicts = make([]Verdict, len(s.Elements))
		}
		for j := range s.Elements {
			e := &s.Elements[j]
			e.Key = rd.String()
			if rd.Bool() {
				v := &Verdict{}
				if j < len(verdicts) {
					v = &verdicts[j]
				}
				*v = Verdict{Kind: VerdictKind(rd.String()), Chain: rd.String()}
				e.Verdict = v
			}
			e.Mark = uint32(rd.Uint())
			e.Comment = rd.String()
		}
	}
	refs := func() map[string]int {
		n := rd.Len()
		m := make(map[string]int, n)
		for range n {
			name := rd.String()
			m[name] = int(rd.Uint())
		}
		return m
	}
	r.ChainRefs, r.SetRefs = refs(), refs()
	if rd.Err != nil {
		return nil, fmt.Errorf("table record: %w", rd.Err)
	}
	return r, nil
}
