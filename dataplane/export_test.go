package dataplane

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nftep/nftep/internal/binrec"
)

// WatchIdle sets opts' idle hook for the external tests and returns a
// function that waits until the loop has handled the first frames frames
// from Felix and has nothing pending (see testKnobs.idle).
func WatchIdle(opts *Options) (wait func(t testing.TB, frames int)) {
	return watchIdle(opts, nil).wait
}

// SpoilRecordTables rewrites the record of the last apply in dir with an
// inet table that does not read, under a valid checksum, the rest as it
// was: the next apply gets as far as the record's tables (read in the
// background) before it finds out.
func SpoilRecordTables(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, RecordFileName))
	if err != nil {
		return err
	}
	rec, err := decodeRecord(data)
	if err != nil {
		return err
	}
	if err := rec.awaitTables(); err != nil {
		return err
	}
	rec.inetFrom = recordSourceFunc(func(w *binrec.Writer) error {
		w.Uint(99) // no table record format
		return nil
	})
	if rec.ARP != nil {
		rec.arpFrom = recordSourceFunc(func(w *binrec.Writer) error {
			rec.ARP.AppendBinary(w)
			return nil
		})
	}
	return writeRecord(dir, rec)
}
