package nft

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Expressions written straight into the batch.

// expr appends one rule expression (the content of an NFTA_LIST_ELEM).
//
// google/nftables' expr.Marshal builds every expression from nested
// netlink.MarshalAttributes calls: five to ten small allocations per
// expression, which at 240,000 rules was a quarter of a cold apply's time
// and most of its garbage. The expressions nftep's vocabulary emits most are
// written here directly, byte for byte as expr.Marshal writes them
// (TestExprFastPathMatchesGoogleNftables holds us to that); any other
// expression goes through expr.Marshal.
func (e *enc) expr(family uint8, x expr.Any) error {
	switch x := x.(type) {
	case *expr.Meta:
		d := e.exprStart("meta")
		e.be32(unix.NFTA_META_KEY, uint32(x.Key))
		if x.SourceRegister {
			e.be32(unix.NFTA_META_SREG, x.Register)
		} else {
			e.be32(unix.NFTA_META_DREG, x.Register)
		}
		return e.end(d)
	case *expr.Cmp:
		d := e.exprStart("cmp")
		e.be32(unix.NFTA_CMP_SREG, x.Register)
		e.be32(unix.NFTA_CMP_OP, uint32(x.Op))
		v := e.nest(unix.NFTA_CMP_DATA)
		e.bytes(unix.NFTA_DATA_VALUE, x.Data)
		if err := e.end(v); err != nil {
			return err
		}
		return e.end(d)
	case *expr.Bitwise:
		d := e.exprStart("bitwise")
		e.be32(unix.NFTA_BITWISE_SREG, x.SourceRegister)
		e.be32(unix.NFTA_BITWISE_DREG, x.DestRegister)
		e.be32(unix.NFTA_BITWISE_LEN, x.Len)
		m := e.nest(unix.NFTA_BITWISE_MASK)
		e.bytes(unix.NFTA_DATA_VALUE, x.Mask)
		if err := e.end(m); err != nil {
			return err
		}
		xo := e.nest(unix.NFTA_BITWISE_XOR)
		e.bytes(unix.NFTA_DATA_VALUE, x.Xor)
		if err := e.end(xo); err != nil {
			return err
		}
		return e.end(d)
	case *expr.Immediate:
		d := e.exprStart("immediate")
		e.be32(unix.NFTA_IMMEDIATE_DREG, x.Register)
		v := e.nest(unix.NFTA_IMMEDIATE_DATA)
		e.bytes(unix.NFTA_DATA_VALUE, x.Data)
		if err := e.end(v); err != nil {
			return err
		}
		return e.end(d)
	case *expr.Verdict:
		d := e.exprStart("immediate")
		e.be32(unix.NFTA_IMMEDIATE_DREG, unix.NFT_REG_VERDICT)
		v := e.nest(unix.NFTA_IMMEDIATE_DATA)
		vd := e.nest(unix.NFTA_DATA_VERDICT)
		e.be32(unix.NFTA_VERDICT_CODE, uint32(x.Kind))
		if x.Chain != "" {
			e.str(unix.NFTA_VERDICT_CHAIN, x.Chain)
		}
		if err := e.end(vd); err != nil {
			return err
		}
		if err := e.end(v); err != nil {
			return err
		}
		return e.end(d)
	case *expr.Lookup:
		d := e.exprStart("lookup")
		if x.SourceRegister != 0 {
			e.be32(unix.NFTA_LOOKUP_SREG, x.SourceRegister)
		}
		if x.IsDestRegSet {
			e.be32(unix.NFTA_LOOKUP_DREG, x.DestRegister)
		}
		if x.Invert {
			e.be32(unix.NFTA_LOOKUP_FLAGS, unix.NFT_LOOKUP_F_INV)
		}
		e.str(unix.NFTA_LOOKUP_SET, x.SetName)
		e.be32(unix.NFTA_LOOKUP_SET_ID, x.SetID)
		return e.end(d)
	case *expr.Ct:
		d := e.exprStart("ct")
		e.be32(unix.NFTA_CT_KEY, uint32(x.Key))
		if x.SourceRegister {
			e.be32(unix.NFTA_CT_SREG, x.Register)
		} else {
			e.be32(unix.NFTA_CT_DREG, x.Register)
		}
		switch x.Key {
		case expr.CtKeySRC, expr.CtKeyDST, expr.CtKeyPROTOSRC, expr.CtKeyPROTODST:
			e.be32(unix.NFTA_CT_DIRECTION, x.Direction)
		}
		return e.end(d)
	case *expr.Payload:
		if x.CsumType > 0 {
			break
		}
		d := e.exprStart("payload")
		if x.OperationType == expr.PayloadWrite {
			e.be32(unix.NFTA_PAYLOAD_SREG, x.SourceRegister)
		} else {
			e.be32(unix.NFTA_PAYLOAD_DREG, x.DestRegister)
		}
		e.be32(unix.NFTA_PAYLOAD_BASE, uint32(x.Base))
		e.be32(unix.NFTA_PAYLOAD_OFFSET, x.Offset)
		e.be32(unix.NFTA_PAYLOAD_LEN, x.Len)
		return e.end(d)
	case *expr.Masq:
		if !x.ToPorts {
			break
		}
		// expr.Marshal leaves out the flags of a masquerade with ports
		// (google/nftables v0.3.0); nft sends them after the registers.
		d := e.exprStart("masq")
		e.be32(unix.NFTA_MASQ_REG_PROTO_MIN, x.RegProtoMin)
		if x.RegProtoMax != 0 {
			e.be32(unix.NFTA_MASQ_REG_PROTO_MAX, x.RegProtoMax)
		}
		if flags := masqFlags(x); flags != 0 {
			e.be32(unix.NFTA_MASQ_FLAGS, flags)
		}
		return e.end(d)
	case *expr.Counter:
		d := e.exprStart("counter")
		e.attrHeader(unix.NFTA_COUNTER_BYTES, 8)
		e.b = binary.BigEndian.AppendUint64(e.b, x.Bytes)
		e.attrHeader(unix.NFTA_COUNTER_PACKETS, 8)
		e.b = binary.BigEndian.AppendUint64(e.b, x.Packets)
		return e.end(d)
	}
	b, err := expr.Marshal(family, x)
	if err != nil {
		return err
	}
	e.b = append(e.b, b...)
	return nil
}

// exprStart writes an expression's name and opens its NFTA_EXPR_DATA.
func (e *enc) exprStart(name string) int {
	e.str(unix.NFTA_EXPR_NAME, name)
	return e.nest(unix.NFTA_EXPR_DATA)
}

// masqFlags are the NF_NAT_RANGE_* flags of a masquerade with ports: the
// port range is "specified", as nft says.
func masqFlags(x *expr.Masq) uint32 {
	f := uint32(natProtoSpecified)
	if x.FullyRandom {
		f |= natProtoRandomFull
	}
	if x.Random {
		f |= unix.NF_NAT_RANGE_PROTO_RANDOM
	}
	if x.Persistent {
		f |= unix.NF_NAT_RANGE_PERSISTENT
	}
	return f
}
