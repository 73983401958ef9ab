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
	rw := recordWriter{w}
	rw.head(r.Family, r.Name, r.Gen, len(r.Chains))
	for i := range r.Chains {
		rw.chain(&r.Chains[i])
	}
	w.Uint(uint64(len(r.Sets)))
	for i := range r.Sets {
		s := &r.Sets[i]
		rw.set(&s.Def, len(s.Elements))
		for j := range s.Elements {
			rw.element(&s.Elements[j])
		}
	}
	rw.refs(r.ChainRefs)
	rw.refs(r.SetRefs)
}

// AppendRecord appends to w what t.Record().AppendBinary(w) would, without
// building the record: at 10,000 workloads that is copies of 20,000
// chains and of the reference counts, megabytes of fresh memory for the
// one-shot process that writes it. Like Record, it fails (before writing
// anything) when the Table does not know what the kernel holds.
func (t *Table) AppendRecord(w *binrec.Writer) error {
	if err := t.CanRecord(); err != nil {
		return err
	}
	rw := recordWriter{w}
	rw.head(t.cfg.Family, t.cfg.Name, t.gen, len(t.have.chains))
	for name, cs := range t.have.chains {
		c := t.chainRecord(name, cs)
		rw.chain(&c)
	}
	w.Uint(uint64(len(t.have.sets)))
	for _, ss := range t.have.sets {
		rw.set(setDef(ss.def), ss.elements.len())
		for _, e := range ss.elements.all() {
			rw.element(&e)
		}
	}
	rw.refs(t.have.chainRefs)
	rw.refs(t.have.setRefs)
	return nil
}

// CanRecord reports whether Record and AppendRecord would succeed: an
// error wrapping ErrNoRecord when the Table does not know what the kernel
// holds.
func (t *Table) CanRecord() error {
	if t.needResync || !t.genKnown || !t.have.table {
		return ErrNoRecord
	}
	for name, cs := range t.have.chains {
		if cs.digest == (digest{}) && cs.chain == nil {
			return fmt.Errorf("%w: chain %q", ErrNoRecord, name)
		}
	}
	for name, ss := range t.have.sets {
		if ss.def == nil {
			return fmt.Errorf("%w: set %q", ErrNoRecord, name)
		}
	}
	return nil
}

// recordWriter writes the parts of a TableRecord's binary form, for
// AppendBinary and AppendRecord alike.
type recordWriter struct{ w *binrec.Writer }

func (rw recordWriter) head(family Family, name string, gen uint32, chains int) {
	w := rw.w
	w.Uint(tableRecordFormat)
	w.String(string(family))
	w.String(name)
	w.Uint(uint64(gen))
	w.Uint(uint64(chains))
}

func (rw recordWriter) chain(c *ChainRecord) {
	w := rw.w
	w.String(c.Name)
	w.Small(c.Digest[:])
	w.Bool(c.Empty)
	w.Bool(c.Base != nil)
	if b := c.Base; b != nil {
		w.String(string(b.Type))
		w.String(string(b.Hook))
		w.Int(int64(b.Priority))
		w.String(string(b.Policy))
	}
}

func (rw recordWriter) set(d *Set, elements int) {
	w := rw.w
	w.String(d.Name)
	w.Uint(uint64(len(d.Key)))
	for _, k := range d.Key {
		w.String(string(k))
	}
	w.String(string(d.Data))
	w.Bool(d.Interval)
	w.String(d.Comment)
	w.Uint(uint64(elements))
}

func (rw recordWriter) element(e *Element) {
	w := rw.w
	w.String(e.Key)
	w.Bool(e.Verdict != nil)
	if e.Verdict != nil {
		w.String(string(e.Verdict.Kind))
		w.String(e.Verdict.Chain)
	}
	w.Uint(uint64(e.Mark))
	w.String(e.Comment)
}

func (rw recordWriter) refs(refs map[string]int) {
	w := rw.w
	w.Uint(uint64(len(refs)))
	for name, n := range refs {
		w.String(name)
		w.Uint(uint64(n))
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
				var v *Verdict
				if j < len(verdicts) {
					v = &verdicts[j]
				} else {
					v = new(Verdict)
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
