package nft

import (
	"context"
	"fmt"
	"testing"

	"github.com/nftep/nftep/internal/binrec"
)

// BenchmarkRecord encodes and decodes (binary form) the record of the node-shaped
// table of 1,000 and 10,000 workloads, as `nftep apply` writes and reads it.
func BenchmarkRecord(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		f := NewFake()
		f.SkipEncoding()
		tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, Transport: f})
		if err != nil {
			b.Fatal(err)
		}
		nodeModel(tbl.Desired(), n, 100)
		if _, err := tbl.Apply(context.Background()); err != nil {
			b.Fatal(err)
		}
		rec, err := tbl.Record()
		if err != nil {
			b.Fatal(err)
		}
		var buf binrec.Writer
		rec.AppendBinary(&buf)
		buf.Seal()
		b.Run(fmt.Sprintf("workloads=%d/record", n), func(b *testing.B) {
			for range b.N {
				if _, err := tbl.Record(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("workloads=%d/encode", n), func(b *testing.B) {
			b.SetBytes(int64(len(buf.Buf)))
			for range b.N {
				var out binrec.Writer
				rec.AppendBinary(&out)
				out.Seal()
			}
		})
		b.Run(fmt.Sprintf("workloads=%d/decode", n), func(b *testing.B) {
			b.SetBytes(int64(len(buf.Buf)))
			for range b.N {
				if _, err := ReadTableRecord(binrec.Open(buf.Buf)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
