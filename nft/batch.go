package nft

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// Encoding a transaction into one netlink batch.

// msgRef says which operation (and which rule or element of it) a message
// of the batch belongs to, so that an error can name the object.
type msgRef struct {
	op   int32 // index in Transaction.Ops
	sub  int32 // rule index, or index of the first element in the message
	anon bool  // an anonymous set of rule sub
}

// batch is one encoded transaction: the begin marker, the messages of each
// segment, the end marker.
type batch struct {
	begin, end []byte
	segs       []*batchWriter
	seq0       uint32 // of the begin marker; segment k numbers from seq0+1+k<<segShift
	endSeq     uint32
	msgs, size int // without the markers
}

// segShift spaces the sequence numbers of segments: 16M messages each.
const segShift = 24

// parallelWeight is the size (roughly in rules) above which a batch is
// encoded by several goroutines: a cold start of 240,000 rules encodes in
// half the time on two CPUs, a one-endpoint change is not worth a goroutine.
const parallelWeight = 20000

// opWeight estimates the encoding work of op.
func opWeight(op *Op) int {
	switch op.Kind {
	case OpAddRules:
		return len(op.Chain.Rules)
	case OpAddSet, OpAddElements, OpDeleteElements:
		return 1 + len(op.Elements)/4
	}
	return 1
}

// encodeBatch encodes tx. Large transactions are cut into segments of
// consecutive operations, encoded in parallel and sent in order.
//
// tableFlags are the table's NFTA_TABLE_FLAGS when the batch adds it:
// 0, or NFT_TABLE_F_OWNER for a table that lives only as long as the socket
// that commits it (see TableConfig.Owned).
func encodeBatch(family uint8, table string, tx *Transaction, pl *planned, tableFlags uint32) (*batch, error) {
	b := &batch{seq0: uint32(time.Now().UnixNano())}
	total := 0
	for i := range tx.Ops {
		total += opWeight(&tx.Ops[i])
	}
	n := 1
	if total > parallelWeight {
		n = min(runtime.GOMAXPROCS(0), 8)
	}
	// Cut the operations into n runs of about equal weight.
	bounds := []int{0}
	acc, next := 0, 1
	for i := range tx.Ops {
		acc += opWeight(&tx.Ops[i])
		if next < n && acc >= total*next/n && i+1 < len(tx.Ops) {
			bounds = append(bounds, i+1)
			next++
		}
	}
	bounds = append(bounds, len(tx.Ops))
	// Removals in other tables (Transaction.Foreign) come first, in a
	// segment of their own.
	first := 0
	if len(tx.Foreign) > 0 {
		first = 1
	}
	b.segs = make([]*batchWriter, first+len(bounds)-1)
	errs := make([]error, len(b.segs))
	if first == 1 {
		w := &batchWriter{seqBase: b.seq0 + 1, digests: map[string]digest{}}
		b.segs[0] = w
		errs[0] = w.encodeForeign(tx.Foreign)
	}
	var wg sync.WaitGroup
	for k := first; k < len(b.segs); k++ {
		w := &batchWriter{
			family:  family,
			table:   table,
			flags:   tableFlags,
			seqBase: b.seq0 + 1 + uint32(k)<<segShift,
			setID:   uint32(k) << 20,
			digests: map[string]digest{},
		}
		b.segs[k] = w
		lo, hi := bounds[k-first], bounds[k-first+1]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				if err := w.op(int32(i), &tx.Ops[i]); err != nil {
					errs[k] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.release()
		return nil, err
	}
	for _, w := range b.segs {
		b.msgs += w.bb.msgs
		b.size += w.bb.size
		if pl != nil && pl.digests != nil {
			for name, d := range w.digests {
				pl.digests[name] = d
			}
		}
	}
	// Begin and end of an nfnetlink batch carry the subsystem id in
	// nfgenmsg.res_id (big endian, nfnetlink.c nfnetlink_rcv_skb_batch).
	var e enc
	e.reset(unix.NFNL_MSG_BATCH_BEGIN, unix.NLM_F_REQUEST, b.seq0, unix.AF_UNSPEC)
	e.b[18], e.b[19] = 0, unix.NFNL_SUBSYS_NFTABLES
	b.begin = append([]byte(nil), e.finish()...)
	// NLM_F_ACK on the end marker: the kernel acknowledges it only when the
	// batch commits, which tells success apart from a lost reply.
	b.endSeq = b.seq0 + 1 + uint32(len(b.segs))<<segShift
	e.reset(unix.NFNL_MSG_BATCH_END, unix.NLM_F_REQUEST|unix.NLM_F_ACK, b.endSeq, unix.AF_UNSPEC)
	e.b[18], e.b[19] = 0, unix.NFNL_SUBSYS_NFTABLES
	b.end = append([]byte(nil), e.finish()...)
	return b, nil
}

// iovecs returns the batch as the buffers of one sendmsg.
func (b *batch) iovecs() [][]byte {
	bufs := [][]byte{b.begin}
	for _, w := range b.segs {
		bufs = append(bufs, w.bb.chunks...)
	}
	bufs = append(bufs, b.end)
	if len(bufs) <= maxIovecs {
		return bufs
	}
	merged := &batchBuf{}
	for _, c := range bufs {
		merged.write(c)
	}
	return merged.chunks
}

// release returns the batch's memory.
func (b *batch) release() {
	for _, w := range b.segs {
		w.bb.release()
	}
}

// describe names the operation message seq belonged to, for an error.
func (b *batch) describe(tx *Transaction, seq uint32) string {
	if seq == b.seq0 || seq == b.endSeq {
		// nfnetlink reports a failed commit against the batch begin.
		return "commit"
	}
	rel := seq - b.seq0 - 1
	k, i := int(rel>>segShift), int(rel&(1<<segShift-1))
	if k >= len(b.segs) || i >= len(b.segs[k].refs) {
		return "message with unknown sequence number"
	}
	return b.segs[k].describe(tx, i)
}

// batchWriter encodes a run of a transaction's operations.
type batchWriter struct {
	family  uint8
	table   string
	flags   uint32 // NFTA_TABLE_FLAGS of an added table
	e       enc
	bb      batchBuf
	refs    []msgRef
	seqBase uint32
	setID   uint32
	// digests of the chains whose rules were written, by chain name.
	digests map[string]digest
	// foreign: the segment holds Transaction.Foreign, and refs index it.
	foreign bool
}

// seqOf is the sequence number of message i of the run.
func (w *batchWriter) seqOf(i int) uint32 { return w.seqBase + uint32(i) }

// start begins a message of type typ for ref.
func (w *batchWriter) start(typ, flags uint16, ref msgRef) {
	w.e.reset(msgType(typ), unix.NLM_F_REQUEST|flags, w.seqOf(len(w.refs)), w.family)
	w.refs = append(w.refs, ref)
}

func (w *batchWriter) finish() { w.bb.write(w.e.finish()) }

func (w *batchWriter) op(i int32, op *Op) error {
	ref := msgRef{op: i}
	switch op.Kind {
	case OpAddTable:
		w.start(unix.NFT_MSG_NEWTABLE, unix.NLM_F_CREATE, ref)
		w.e.str(unix.NFTA_TABLE_NAME, w.table)
		// Flags without NFT_TABLE_F_DORMANT also wake a table someone
		// set dormant.
		w.e.be32(unix.NFTA_TABLE_FLAGS, w.flags)
		w.finish()
	case OpDeleteTable:
		w.start(unix.NFT_MSG_DELTABLE, 0, ref)
		w.e.str(unix.NFTA_TABLE_NAME, w.table)
		w.finish()
	case OpAddChain:
		return w.addChain(op.Chain, ref)
	case OpFlushChain:
		// DELRULE with a chain and no handle flushes the chain.
		w.start(unix.NFT_MSG_DELRULE, 0, ref)
		w.e.str(unix.NFTA_RULE_TABLE, w.table)
		w.e.str(unix.NFTA_RULE_CHAIN, op.Name)
		w.finish()
	case OpDeleteChain:
		w.start(unix.NFT_MSG_DELCHAIN, 0, ref)
		w.e.str(unix.NFTA_CHAIN_TABLE, w.table)
		w.e.str(unix.NFTA_CHAIN_NAME, op.Name)
		w.finish()
	case OpAddRules:
		return w.addRules(op.Chain, i)
	case OpAddSet:
		ns, err := encodeSet(&nftables.Table{Name: w.table, Family: nftables.TableFamily(w.family)}, op.Set)
		if err != nil {
			return err
		}
		w.setID++
		ns.ID = w.setID
		if err := w.addSet(ns, len(op.Elements), ref); err != nil {
			return fmt.Errorf("%s %q: %w", setNoun(op.Set), op.Name, err)
		}
		return w.elements(unix.NFT_MSG_NEWSETELEM, op, ns.Name, ns.ID, i)
	case OpDeleteSet:
		w.start(unix.NFT_MSG_DELSET, 0, ref)
		w.e.str(unix.NFTA_SET_TABLE, w.table)
		w.e.str(unix.NFTA_SET_NAME, op.Name)
		w.finish()
	case OpAddElements:
		return w.elements(unix.NFT_MSG_NEWSETELEM, op, op.Name, 0, i)
	case OpDeleteElements:
		return w.elements(unix.NFT_MSG_DELSETELEM, op, op.Name, 0, i)
	default:
		return fmt.Errorf("unknown operation %v", op.Kind)
	}
	return nil
}

// Verdict codes of a base chain policy (NF_DROP, NF_ACCEPT).
const (
	nfDrop   = 0
	nfAccept = 1
)

// Hook numbers (NF_INET_* and NF_ARP_*, include/uapi/linux/netfilter.h).
var inetHooks = map[Hook]uint32{
	HookPrerouting:  unix.NF_INET_PRE_ROUTING,
	HookInput:       unix.NF_INET_LOCAL_IN,
	HookForward:     unix.NF_INET_FORWARD,
	HookOutput:      unix.NF_INET_LOCAL_OUT,
	HookPostrouting: unix.NF_INET_POST_ROUTING,
}

var arpHooks = map[Hook]uint32{
	HookInput:  0, // NF_ARP_IN
	HookOutput: 1, // NF_ARP_OUT
}

func (w *batchWriter) hookNum(h Hook) (uint32, bool) {
	if w.family == unix.NFPROTO_ARP {
		n, ok := arpHooks[h]
		return n, ok
	}
	n, ok := inetHooks[h]
	return n, ok
}

func (w *batchWriter) addChain(c *Chain, ref msgRef) error {
	w.start(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_CREATE, ref)
	w.e.str(unix.NFTA_CHAIN_TABLE, w.table)
	w.e.str(unix.NFTA_CHAIN_NAME, c.Name)
	if b := c.Base; b != nil {
		num, ok := w.hookNum(b.Hook)
		if !ok {
			return fmt.Errorf("chain %q: hook %q is not valid in this family", c.Name, b.Hook)
		}
		h := w.e.nest(unix.NFTA_CHAIN_HOOK)
		w.e.be32(unix.NFTA_HOOK_HOOKNUM, num)
		w.e.be32(unix.NFTA_HOOK_PRIORITY, uint32(int32(b.Priority)))
		if err := w.e.end(h); err != nil {
			return err
		}
		pol := uint32(nfAccept)
		if basePolicy(b) == PolicyDrop {
			pol = nfDrop
		}
		w.e.be32(unix.NFTA_CHAIN_POLICY, pol)
		typ := b.Type
		if typ == "" {
			typ = ChainTypeFilter
		}
		w.e.str(unix.NFTA_CHAIN_TYPE, string(typ))
	}
	w.finish()
	return nil
}

// addRules appends every rule of c, each preceded by the anonymous sets it
// uses. While the rules' userdata passes by, it computes the chain's digest
// for the next resync.
func (w *batchWriter) addRules(c *Chain, opIdx int32) error {
	d := newDigester()
	for ri, r := range c.Rules {
		exprs, anon, err := encodeRule(r)
		if err != nil {
			return fmt.Errorf("chain %q: rule %d: %w", c.Name, ri+1, err)
		}
		ref := msgRef{op: opIdx, sub: int32(ri), anon: true}
		for _, a := range anon {
			a.Set.Table = &nftables.Table{Name: w.table, Family: nftables.TableFamily(w.family)}
			if err := w.addSet(a.Set, len(a.Elements), ref); err != nil {
				return fmt.Errorf("chain %q: rule %d: anonymous set: %w", c.Name, ri+1, err)
			}
			if err := w.elementList(unix.NFT_MSG_NEWSETELEM, a.Set, a.Set.Name, a.Set.ID, a.Elements, ref, nil); err != nil {
				return fmt.Errorf("chain %q: rule %d: anonymous set: %w", c.Name, ri+1, err)
			}
		}
		ud := ruleUserData(r)
		d.add(ruleHashFromUserData(ud))
		w.start(unix.NFT_MSG_NEWRULE, unix.NLM_F_CREATE|unix.NLM_F_APPEND, msgRef{op: opIdx, sub: int32(ri)})
		w.e.str(unix.NFTA_RULE_TABLE, w.table)
		w.e.str(unix.NFTA_RULE_CHAIN, c.Name)
		list := w.e.nest(unix.NFTA_RULE_EXPRESSIONS)
		for _, x := range exprs {
			el := w.e.nest(unix.NFTA_LIST_ELEM)
			if err := w.e.expr(w.family, x); err != nil {
				return fmt.Errorf("chain %q: rule %d: marshal %T: %w", c.Name, ri+1, x, err)
			}
			if err := w.e.end(el); err != nil {
				return fmt.Errorf("chain %q: rule %d: %w", c.Name, ri+1, err)
			}
		}
		if err := w.e.end(list); err != nil {
			return fmt.Errorf("chain %q: rule %d: %w", c.Name, ri+1, err)
		}
		if len(ud) > 0 {
			w.e.bytes(unix.NFTA_RULE_USERDATA, ud)
		}
		w.finish()
	}
	w.digests[c.Name] = d.sum()
	return nil
}
