package nft

// The kernel transport without a kernel: wireConn answers the netlink
// requests of kernelTransport the way nf_tables does, from a Fake's
// content (GETGEN, GETTABLE, chain, set and rule dumps, batches acked or
// refused), so that `go test -short` runs the wire code too: framing,
// dumps, error replies, read-back parsing. The kernel tests check the same
// code against the real thing.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// wire is what the wireConns of one test share: the Fake, the transaction
// the next batch carries (the bytes are not decoded: the Fake applies the
// Transaction), and faults to inject.
type wire struct {
	f  *Fake
	mu sync.Mutex
	tx *Transaction
	// interrupt makes the next dumps flag NLM_F_DUMP_INTR.
	interrupt int
	// dropReplies makes the next batch's replies vanish (ENOBUFS).
	dropReplies bool
	// extAck is the extended-ack message of refusals.
	extAck string
	// noEndAck answers as kernels before 6.10 do: a batch that commits
	// gets no acknowledgement of its end, only a refused one an answer.
	noEndAck bool
	// refuse, when set, makes the kernel refuse the refuse.n-th message
	// (from 1) of type refuse.typ in the next batch with refuse.errno:
	// the reply names that message, and nothing of the batch is applied.
	refuse struct {
		typ   uint16
		n     int
		errno syscall.Errno
	}
	// elements counts the elements of each NEWSETELEM and DELSETELEM
	// message of the batches, in order.
	elements []int
}

// transport returns a kernel transport whose sockets are wireConns.
func (w *wire) transport() *kernelTransport {
	return &kernelTransport{dial: func() (*nlSock, error) { return &nlSock{conn: &wireConn{w: w}}, nil }}
}

// wireTransport is a kernel transport over wireConns: its commit hands the
// Transaction to the wire (which applies it to the Fake when the batch
// ends) and then runs the real commit code.
type wireTransport struct {
	*kernelTransport
	w *wire
}

func (t wireTransport) commit(ctx context.Context, p prepared, tx *Transaction) (uint32, generation, error) {
	t.w.mu.Lock()
	t.w.tx = tx
	t.w.mu.Unlock()
	return t.kernelTransport.commit(ctx, p, tx)
}

// wireConn is one socket: requests in, replies queued.
type wireConn struct {
	w       *wire
	replies [][]byte
	batch   struct {
		in          bool
		family      uint8
		table       string
		beginSeq    uint32
		haveTxTable bool
		seen        map[uint16]int
		refused     nlMsg
	}
}

func (c *wireConn) setBuffers(int, int) error { return nil }
func (c *wireConn) setDeadline(time.Time)     {}
func (c *wireConn) Close() error              { return nil }

func (c *wireConn) recv(wait bool) ([]byte, error) {
	if len(c.replies) == 0 {
		if wait {
			return nil, errors.New("wireConn: a read would block forever")
		}
		return nil, nil
	}
	r := c.replies[0]
	c.replies = c.replies[1:]
	return r, nil
}

// reply queues one datagram.
func (c *wireConn) reply(msgs ...[]byte) { c.replies = append(c.replies, bytes.Join(msgs, nil)) }

func nlMessage(typ, flags uint16, seq uint32, payload []byte) []byte {
	b := binary.NativeEndian.AppendUint32(nil, uint32(16+len(payload)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0)
	b = append(b, payload...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// ack is an NLMSG_ERROR for the message seq of type typ: errno 0 is an
// acknowledgement. With msg, it carries an extended-ack message (capped,
// as with NETLINK_CAP_ACK).
func ack(seq uint32, typ uint16, errno syscall.Errno, msg string) []byte {
	p := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	p = binary.NativeEndian.AppendUint32(p, 20) // the original header: length
	p = binary.NativeEndian.AppendUint16(p, typ)
	p = binary.NativeEndian.AppendUint16(p, 0)
	p = binary.NativeEndian.AppendUint32(p, seq)
	p = binary.NativeEndian.AppendUint32(p, 0)
	flags := uint16(0)
	if msg != "" {
		flags = unix.NLM_F_CAPPED | unix.NLM_F_ACK_TLVS
		var e enc
		e.str(unix.NLMSGERR_ATTR_MSG, msg)
		p = append(p, e.b...)
	}
	return nlMessage(unix.NLMSG_ERROR, flags, seq, p)
}

func (c *wireConn) sendmsg(bufs [][]byte) error {
	return forEachMsg(bytes.Join(bufs, nil), func(m nlMsg) error {
		switch m.typ {
		case unix.NFNL_MSG_BATCH_BEGIN:
			c.batch.in, c.batch.beginSeq = true, m.seq
			c.batch.seen, c.batch.refused = map[uint16]int{}, nlMsg{}
			return nil
		case unix.NFNL_MSG_BATCH_END:
			c.endBatch(m.seq)
			return nil
		}
		if c.batch.in {
			c.batch.seen[m.typ]++
			c.w.mu.Lock()
			if r := c.w.refuse; r.n > 0 && m.typ == msgType(r.typ) && c.batch.seen[m.typ] == r.n {
				c.batch.refused = m
			}
			if m.typ == msgType(unix.NFT_MSG_NEWSETELEM) || m.typ == msgType(unix.NFT_MSG_DELSETELEM) {
				n := 0
				forEachAttr(payload(m.data), func(t uint16, v []byte) {
					if t == unix.NFTA_SET_ELEM_LIST_ELEMENTS {
						forEachAttr(v, func(uint16, []byte) { n++ })
					}
				})
				c.w.elements = append(c.w.elements, n)
			}
			c.w.mu.Unlock()
			if !c.batch.haveTxTable && len(m.data) >= 4 {
				c.batch.family = m.data[0]
				forEachAttr(payload(m.data), func(t uint16, v []byte) {
					if t == unix.NFTA_TABLE_NAME && !c.batch.haveTxTable {
						c.batch.table, c.batch.haveTxTable = string(bytes.TrimRight(v, "\x00")), true
					}
				})
			}
			return nil
		}
		return c.request(m)
	})
}

// endBatch applies the batch's Transaction to the Fake and answers as
// nf_tables does: an acknowledgement of the end marker, or an error
// (reported against the batch begin, as for a failed commit).
func (c *wireConn) endBatch(endSeq uint32) {
	w := c.w
	w.mu.Lock()
	tx, drop, msg, refuse := w.tx, w.dropReplies, w.extAck, w.refuse
	w.tx, w.dropReplies = nil, false
	if c.batch.refused.seq != 0 {
		w.refuse.n = 0
	}
	w.mu.Unlock()
	c.batch.in = false
	if m := c.batch.refused; m.seq != 0 {
		c.reply(ack(m.seq, m.typ, refuse.errno, msg))
		return
	}
	w.f.mu.Lock()
	err := w.f.applyLocked(fakeKey{tx.Family, tx.Table}, tx)
	w.f.mu.Unlock()
	if drop {
		return // the replies were lost: the reader sees nothing
	}
	var r *refusal
	if errors.As(err, &r) {
		c.reply(ack(c.batch.beginSeq, unix.NFNL_MSG_BATCH_BEGIN, r.err.(syscall.Errno), msg))
		return
	}
	if !w.noEndAck {
		c.reply(ack(endSeq, unix.NFNL_MSG_BATCH_END, 0, ""))
	}
}

// request answers a GET request, or a dump.
func (c *wireConn) request(m nlMsg) error {
	var name, chain string
	forEachAttr(payload(m.data), func(t uint16, v []byte) {
		switch t {
		case 1: // NFTA_{TABLE,CHAIN,SET,RULE}_TABLE or NFTA_TABLE_NAME
			name = string(bytes.TrimRight(v, "\x00"))
		case unix.NFTA_RULE_CHAIN:
			chain = string(bytes.TrimRight(v, "\x00"))
		}
	})
	family := m.data[0]
	f := c.w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := f.tables[fakeKey{familyOf(family), name}]
	msg := func(typ uint16, attrs func(e *enc)) []byte {
		var e enc
		e.reset(msgType(typ), unix.NLM_F_MULTI, m.seq, family)
		attrs(&e)
		return append([]byte(nil), e.finish()...)
	}
	var out [][]byte
	dumpFlags := uint16(0)
	c.w.mu.Lock()
	if c.w.interrupt > 0 && m.flags&unix.NLM_F_DUMP != 0 {
		c.w.interrupt--
		dumpFlags = unix.NLM_F_DUMP_INTR
	}
	c.w.mu.Unlock()
	switch m.typ {
	case msgType(unix.NFT_MSG_GETGEN):
		c.reply(msg(unix.NFT_MSG_NEWGEN, func(e *enc) { e.be32(unix.NFTA_GEN_ID, f.gen) }))
		return nil
	case msgType(unix.NFT_MSG_GETTABLE):
		if ft == nil {
			c.reply(ack(m.seq, m.typ, syscall.ENOENT, ""))
			return nil
		}
		c.reply(msg(unix.NFT_MSG_NEWTABLE, func(e *enc) {
			e.str(unix.NFTA_TABLE_NAME, name)
			e.be32(unix.NFTA_TABLE_FLAGS, 0)
		}))
		return nil
	case msgType(unix.NFT_MSG_GETCHAIN):
		if ft != nil {
			for _, cn := range ft.order {
				ch := ft.chains[cn]
				out = append(out, msg(unix.NFT_MSG_NEWCHAIN, func(e *enc) {
					e.str(unix.NFTA_CHAIN_TABLE, name)
					e.str(unix.NFTA_CHAIN_NAME, cn)
					if b := ch.base; b != nil {
						hooks := inetHooks
						if family == unix.NFPROTO_ARP {
							hooks = arpHooks
						}
						h := e.nest(unix.NFTA_CHAIN_HOOK)
						e.be32(unix.NFTA_HOOK_HOOKNUM, hooks[b.Hook])
						e.be32(unix.NFTA_HOOK_PRIORITY, uint32(int32(b.Priority)))
						_ = e.end(h)
						policy := uint32(nfAccept)
						if b.Policy == PolicyDrop {
							policy = nfDrop
						}
						e.be32(unix.NFTA_CHAIN_POLICY, policy)
						e.str(unix.NFTA_CHAIN_TYPE, string(b.Type))
					}
				}))
			}
		}
	case msgType(unix.NFT_MSG_GETSET):
		if ft != nil {
			for _, sn := range ft.setOrder {
				ns, err := encodeSet(&nftables.Table{Name: name, Family: nftables.TableFamily(family)}, ft.sets[sn].def)
				if err != nil {
					return err
				}
				out = append(out, msg(unix.NFT_MSG_NEWSET, func(e *enc) {
					e.str(unix.NFTA_SET_TABLE, name)
					e.str(unix.NFTA_SET_NAME, sn)
					e.be32(unix.NFTA_SET_FLAGS, setFlags(ns))
					e.be32(unix.NFTA_SET_KEY_TYPE, ns.KeyType.GetNFTMagic())
					e.be32(unix.NFTA_SET_KEY_LEN, ns.KeyType.Bytes)
					if ns.IsMap {
						dt := ns.DataType.GetNFTMagic()
						if dt == nftables.TypeVerdict.GetNFTMagic() {
							dt = nftDataVerdictType
						}
						e.be32(unix.NFTA_SET_DATA_TYPE, dt)
						e.be32(unix.NFTA_SET_DATA_LEN, ns.DataType.Bytes)
					}
					if ud := nftSetUserData(ns); len(ud) > 0 {
						e.bytes(unix.NFTA_SET_USERDATA, ud)
					}
				}))
			}
		}
	case msgType(unix.NFT_MSG_GETRULE):
		if ft != nil {
			names := ft.order
			if chain != "" {
				if ft.chains[chain] == nil {
					c.reply(ack(m.seq, m.typ, syscall.ENOENT, ""))
					return nil
				}
				names = []string{chain}
			}
			for _, cn := range names {
				for i, r := range ft.chains[cn].rules {
					ud := ruleUserData(r.r)
					if r.foreign {
						ud = nil
					}
					// The rule's expressions, as the kernel lists them
					// (its anonymous sets are not listed: the Fake keeps
					// none), and a handle: its place in the chain.
					exprs, _, err := encodeRule(r.r)
					if err != nil {
						return err
					}
					var encErr error
					out = append(out, msg(unix.NFT_MSG_NEWRULE, func(e *enc) {
						e.str(unix.NFTA_RULE_TABLE, name)
						e.str(unix.NFTA_RULE_CHAIN, cn)
						e.attrHeader(unix.NFTA_RULE_HANDLE, 8)
						e.b = binary.BigEndian.AppendUint64(e.b, uint64(i+1))
						list := e.nest(unix.NFTA_RULE_EXPRESSIONS)
						for _, x := range exprs {
							el := e.nest(unix.NFTA_LIST_ELEM)
							encErr = errors.Join(encErr, e.expr(family, x), e.end(el))
						}
						encErr = errors.Join(encErr, e.end(list))
						if ud != nil {
							e.bytes(unix.NFTA_RULE_USERDATA, ud)
						}
					}))
					if encErr != nil {
						return encErr
					}
				}
			}
		}
	case msgType(unix.NFT_MSG_GETSETELEM):
		// chain holds NFTA_SET_ELEM_LIST_SET (attribute 2, as
		// NFTA_RULE_CHAIN). The elements go as the kernel lists them,
		// in the same attributes our batches send, a few a message.
		if ft == nil || ft.sets[chain] == nil {
			c.reply(ack(m.seq, m.typ, syscall.ENOENT, ""))
			return nil
		}
		fs := ft.sets[chain]
		es := make([]Element, 0, len(fs.elements))
		for _, e := range fs.elements {
			es = append(es, e)
		}
		kes, err := encodeElements(fs.def, es)
		if err != nil {
			return err
		}
		ns, err := encodeSet(&nftables.Table{Name: name, Family: nftables.TableFamily(family)}, fs.def)
		if err != nil {
			return err
		}
		for i := 0; i < len(kes); i += 7 {
			var w batchWriter
			w.e.reset(msgType(unix.NFT_MSG_NEWSETELEM), unix.NLM_F_MULTI, m.seq, family)
			w.e.str(unix.NFTA_SET_ELEM_LIST_TABLE, name)
			w.e.str(unix.NFTA_SET_ELEM_LIST_SET, chain)
			list := w.e.nest(unix.NFTA_SET_ELEM_LIST_ELEMENTS)
			for j := i; j < min(i+7, len(kes)); j++ {
				if err := w.element(ns, &kes[j]); err != nil {
					return err
				}
			}
			if err := w.e.end(list); err != nil {
				return err
			}
			out = append(out, append([]byte(nil), w.e.finish()...))
		}
	default:
		c.reply(ack(m.seq, m.typ, syscall.EOPNOTSUPP, ""))
		return nil
	}
	// A dump: the messages over a few datagrams, a stray reply of another
	// request among them (the reader must skip it), then NLMSG_DONE.
	for i := range out {
		binary.NativeEndian.PutUint16(out[i][6:8], unix.NLM_F_MULTI|dumpFlags)
	}
	for len(out) > 3 {
		c.reply(out[:3]...)
		out = out[3:]
	}
	out = append(out, ack(m.seq+1000, 0, 0, ""))
	done := nlMessage(unix.NLMSG_DONE, unix.NLM_F_MULTI|dumpFlags, m.seq, []byte{0, 0, 0, 0})
	c.reply(append(out, done)...)
	return nil
}

func newWireTable(t *testing.T, w *wire, family Family) *Table {
	t.Helper()
	tbl, err := NewTable(TableConfig{Family: family, Name: testTable, Transport: wireTransport{w.transport(), w}})
	require.NoError(t, err)
	return tbl
}

// TestWireApplyAndResync runs the engine over the kernel transport's wire
// code, answered from a Fake: cold start, an incremental change, a resync
// that finds nothing, foreign changes found and repaired, a refusal with
// the kernel's extended-ack message, lost replies (state unknown) and an
// interrupted dump.
func TestWireApplyAndResync(t *testing.T) {
	for _, chains := range []int{3, tableWideDumpChains + 10} {
		t.Run(fmt.Sprintf("chains=%d", chains), func(t *testing.T) {
			w := &wire{f: NewFake()}
			tbl := newWireTable(t, w, FamilyINet)
			m := tbl.Desired()
			baseModel(m)
			for i := range chains - 3 {
				m.SetChain(regular(fmt.Sprintf("filter-extra-%d", i), rule("extra", accept)))
			}
			ctx := context.Background()

			st := mustApply(t, tbl)
			require.True(t, st.Resynced, "cold start: %+v", st)
			require.NotZero(t, st.Operations, "cold start")
			wantFakeHolds(t, w.f, m)

			m.SetElement("allowed", Element{Key: "10.0.0.7"})
			assert.Equal(t, 1, mustApply(t, tbl).Operations, "one element")
			wantFakeHolds(t, w.f, m)

			// A full read that finds the table as programmed.
			tbl.genKnown = false
			rs, err := tbl.Resync(ctx)
			require.NoError(t, err)
			require.False(t, rs.Skipped, "a full read")
			require.False(t, rs.Drift.Any(), "drift %s", rs.Drift)
			require.Zero(t, rs.Apply.Operations)
			assert.Equal(t, 5+chains-3, rs.Rules, "rules read")

			// Someone else's changes: found and repaired.
			mustForeign(t, w.f.FlushChain(FamilyINet, testTable, "filter-fw-v1"))
			mustForeign(t, w.f.InsertRule(FamilyINet, testTable, "filter-fw-v2", &Rule{Action: drop}))
			mustForeign(t, w.f.DeleteElement(FamilyINet, testTable, "allowed", "10.0.0.7"))
			rs, err = tbl.Resync(ctx)
			require.NoError(t, err)
			require.Equal(t, Drift{ChainsDiffer: 2, ElementsMissing: 1}, rs.Drift, "resync after foreign changes")
			wantFakeHolds(t, w.f, m)

			// A refusal, with the kernel's own words.
			w.f.FailNext(syscall.EINVAL)
			w.extAck = "Could not process rule: Invalid argument"
			m.SetElement("allowed", Element{Key: "10.0.0.8"})
			_, err = tbl.Apply(ctx)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.ErrorIs(t, err, syscall.EINVAL)
			assert.Equal(t, "commit", e.Op)
			assert.Contains(t, err.Error(), w.extAck)
			mustApply(t, tbl) // reads back, then applies
			wantFakeHolds(t, w.f, m)

			// Lost replies: the outcome is unknown, and the next apply reads.
			w.dropReplies = true
			m.SetElement("allowed", Element{Key: "10.0.0.9"})
			_, err = tbl.Apply(ctx)
			require.True(t, IsStateUnknown(err), "apply with lost replies: %v; want state unknown", err)
			assert.True(t, mustApply(t, tbl).Resynced, "the apply after lost replies read the table back")
			wantFakeHolds(t, w.f, m)

			// Interrupted dumps: read again.
			w.interrupt = 1
			tbl.genKnown = false
			rs, err = tbl.Resync(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, rs.Reads, "resync with one interrupted dump")
		})
	}
}

// TestWireKernelWithoutBatchEndAck: a kernel before 6.10 (Debian 12's 6.1)
// never acknowledges the batch end. A batch it answers with no error and
// after which the generation moved committed: applies succeed without a
// read-back each time, and a refusal is still one.
func TestWireKernelWithoutBatchEndAck(t *testing.T) {
	w := &wire{f: NewFake(), noEndAck: true}
	tbl := newWireTable(t, w, FamilyINet)
	m := tbl.Desired()
	baseModel(m)
	assert.True(t, mustApply(t, tbl).Resynced, "cold start")
	wantFakeHolds(t, w.f, m)

	m.SetElement("allowed", Element{Key: "10.0.0.7"})
	st := mustApply(t, tbl)
	assert.Equal(t, 1, st.Operations, "one element")
	assert.False(t, st.Resynced, "committed without a read-back")
	wantFakeHolds(t, w.f, m)

	w.f.FailNext(syscall.EINVAL)
	m.SetElement("allowed", Element{Key: "10.0.0.8"})
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, syscall.EINVAL)
	assert.False(t, IsStateUnknown(err), "a refusal is known: %v", err)
	mustApply(t, tbl)
	wantFakeHolds(t, w.f, m)
}

// TestWireDelete deletes the table over the wire; deleting it again is no
// error (ENOENT).
func TestWireDelete(t *testing.T) {
	w := &wire{f: NewFake()}
	tbl := newWireTable(t, w, FamilyARP)
	tbl.Desired().SetChain(&Chain{Name: "arp-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyDrop}})
	mustApply(t, tbl)
	wantFakeHolds(t, w.f, tbl.Desired())
	tbl.genKnown = false
	rs, err := tbl.Resync(context.Background())
	require.NoError(t, err)
	require.False(t, rs.Drift.Any(), "resync of the arp table: %s", rs.Drift)
	for range 2 {
		require.NoError(t, tbl.Delete(context.Background()))
	}
	assert.False(t, w.f.HasTable(FamilyARP, testTable), "the table survived Delete")
}

// TestWireVocabulary programs every match, action and set kind over the
// wire (every set flavour's definition and elements in the batch), reads
// it back with no drift, and removes it all again.
func TestWireVocabulary(t *testing.T) {
	w := &wire{f: NewFake()}
	tbl := newWireTable(t, w, FamilyINet)
	v := vocabModel(testTable)
	for _, n := range v.SetNames() {
		tbl.Desired().SetSet(v.Set(n))
	}
	for _, n := range v.ChainNames() {
		tbl.Desired().SetChain(v.Chain(n))
	}
	mustApply(t, tbl)
	wantFakeHolds(t, w.f, tbl.Desired())
	assert.NotEmpty(t, tbl.LastTransaction().String(), "transaction text")
	tbl.genKnown = false
	rs, err := tbl.Resync(context.Background())
	require.NoError(t, err)
	require.False(t, rs.Drift.Any(), "resync of the vocabulary: drift %s", rs.Drift)
	require.Zero(t, rs.Apply.Operations)
	for _, n := range v.ChainNames() {
		tbl.Desired().DeleteChain(n)
	}
	for _, n := range v.SetNames() {
		tbl.Desired().DeleteSet(n)
	}
	mustApply(t, tbl)
	wantFakeHolds(t, w.f, tbl.Desired())
	assert.NotEmpty(t, tbl.LastTransaction().String(), "transaction text for the removal")
}

// TestEventConcerns: which nf_tables events are about our table.
func TestEventConcerns(t *testing.T) {
	event := func(typ uint16, family uint8, attrs func(e *enc)) netlink.Message {
		var e enc
		e.reset(msgType(typ), 0, 1, family)
		if attrs != nil {
			attrs(&e)
		}
		b := e.finish()
		return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(msgType(typ))}, Data: b[16:]}
	}
	inet, arp := uint8(unix.NFPROTO_INET), uint8(unix.NFPROTO_ARP)
	for _, tc := range []struct {
		name string
		m    netlink.Message
		want bool
	}{
		{"a rule of ours", event(unix.NFT_MSG_NEWRULE, inet, func(e *enc) { e.str(unix.NFTA_RULE_TABLE, testTable) }), true},
		{"an element of ours deleted", event(unix.NFT_MSG_DELSETELEM, inet, func(e *enc) { e.str(unix.NFTA_SET_ELEM_LIST_TABLE, testTable) }), true},
		{"another table", event(unix.NFT_MSG_NEWCHAIN, inet, func(e *enc) { e.str(unix.NFTA_CHAIN_TABLE, "filter") }), false},
		{"our name in another family", event(unix.NFT_MSG_NEWCHAIN, arp, func(e *enc) { e.str(unix.NFTA_CHAIN_TABLE, testTable) }), false},
		{"a new generation", event(unix.NFT_MSG_NEWGEN, 0, func(e *enc) { e.be32(unix.NFTA_GEN_ID, 7) }), false},
		{"no table attribute", event(unix.NFT_MSG_NEWTABLE, inet, nil), false},
		{"another subsystem", netlink.Message{Header: netlink.Header{Type: 0x0101}, Data: []byte{inet, 0, 0, 0}}, false},
		{"truncated", netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(msgType(unix.NFT_MSG_NEWRULE))}, Data: []byte{inet}}, false},
	} {
		assert.Equal(t, tc.want, eventConcerns(tc.m, inet, testTable), tc.name)
	}
}

// TestModelAccessors covers the Model's read API.
func TestModelAccessors(t *testing.T) {
	m := NewModel(FamilyINet, testTable)
	baseModel(m)
	c := m.Clone()
	c.SetElement("allowed", Element{Key: "10.0.0.99"})
	assert.NotContains(t, m.Set("allowed").Elements, "10.0.0.99", "a clone's element reached the original")
	n := 0
	for name, ch := range m.Chains() {
		assert.Equal(t, name, ch.Name)
		n++
	}
	assert.Equal(t, n, m.NumChains())
	assert.Len(t, m.ChainNames(), n)
	assert.Equal(t, n, c.NumChains())
}
