package dataplane

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/binrec"
	"github.com/nftep/nftep/nft"
)

// TestMatchUpdates: the updates of a new version of the state file are
// matched with the record's by their bytes, wherever they moved; only the
// others are decoded (fresh), and an object defined twice is refused.
func TestMatchUpdates(t *testing.T) {
	data := benchStateFile(t, 40)
	sf, err := ParseStateFile("node.json", data)
	require.NoError(t, err)
	ups, ok := fileUpdates(sf)
	require.True(t, ok)
	rec := &applyRecord{File: sf.JSON, Updates: ups}
	n := len(sf.Spans)
	span := func(i int) []byte { return sf.JSON[sf.Spans[i][0]:sf.Spans[i][1]] }
	// file rebuilds a state file of the record's updates in the order given
	// (an index, or extra bytes).
	file := func(parts ...any) []byte {
		var b bytes.Buffer
		b.WriteString(`{"config": {"InterfacePrefix": "cali"}, "updates": [`)
		for k, p := range parts {
			if k > 0 {
				b.WriteString(",\n")
			}
			switch p := p.(type) {
			case int:
				b.Write(span(p))
			case []byte:
				b.Write(p)
			}
		}
		b.WriteString("]}")
		return b.Bytes()
	}
	all := func() []any {
		var out []any
		for i := range n {
			out = append(out, i)
		}
		return out
	}
	match := func(t *testing.T, data []byte) *updateMatch {
		t.Helper()
		ix, ok := indexStateFile(data)
		require.True(t, ok)
		m, err := matchUpdates(ix, rec)
		require.NoError(t, err)
		return m
	}
	unmatched := func(m *updateMatch) (out []int) {
		for j, i := range m.recToNew {
			if i < 0 {
				out = append(out, j)
			}
		}
		return out
	}

	t.Run("same file", func(t *testing.T) {
		m := match(t, file(all()...))
		assert.Empty(t, m.fresh)
		assert.Empty(t, unmatched(m))
		for i, u := range m.ups {
			assert.Equal(t, ups[i].Digest, u.Digest)
			assert.Equal(t, ups[i].Key, u.Key)
		}
	})
	t.Run("one changed", func(t *testing.T) {
		parts := all()
		changed := bytes.Replace(span(n-5), []byte(`"active"`), []byte(`"inactive"`), 1)
		require.NotEqual(t, span(n-5), changed)
		parts[n-5] = changed
		m := match(t, file(parts...))
		assert.Equal(t, []int{n - 5}, unmatched(m))
		require.Len(t, m.fresh, 1)
		assert.Contains(t, m.fresh, n-5)
		assert.Equal(t, ups[n-5].Key, m.ups[n-5].Key, "the same object, defined anew")
		assert.NotEqual(t, ups[n-5].Digest, m.ups[n-5].Digest)
	})
	t.Run("removed in a row, more than the lookahead", func(t *testing.T) {
		parts := append(all()[:n-30], all()[n-30+matchLookahead+4:]...)
		m := match(t, file(parts...))
		assert.Empty(t, m.fresh, "the updates after the gap line up again")
		assert.Len(t, unmatched(m), matchLookahead+4)
	})
	t.Run("moved", func(t *testing.T) {
		parts := all()
		parts[n-1], parts[2] = parts[2], parts[n-1]
		m := match(t, file(parts...))
		assert.Empty(t, m.fresh, "a moved update keeps its record")
		assert.Empty(t, unmatched(m))
		assert.Equal(t, ups[n-1].Key, m.ups[2].Key)
	})
	t.Run("moved to the front", func(t *testing.T) {
		parts := append([]any{n - 1}, all()[:n-1]...)
		m := match(t, file(parts...))
		assert.Empty(t, m.fresh)
		assert.Empty(t, unmatched(m))
		assert.Equal(t, 1, m.digested, "the others still line up where they were")
	})
	t.Run("reversed", func(t *testing.T) {
		parts := all()
		slices.Reverse(parts)
		require.Greater(t, n, 2*matchScans, "more updates out of line than scans: the map of digests is used too")
		m := match(t, file(parts...))
		assert.Empty(t, m.fresh)
		assert.Empty(t, unmatched(m))
		assert.Equal(t, ups[0].Key, m.ups[n-1].Key)
	})
	t.Run("defined twice", func(t *testing.T) {
		var notIncr *notIncremental
		for name, parts := range map[string][]any{
			"the same bytes twice":                    append(all(), n-1),
			"a new definition of an unchanged object": append(all(), bytes.Replace(span(n-1), []byte(`"active"`), []byte(`"inactive"`), 1)),
			"two new definitions of one object": append(all()[:n-1],
				bytes.Replace(span(n-1), []byte(`"active"`), []byte(`"inactive"`), 1),
				bytes.Replace(span(n-1), []byte(`"active"`), []byte(`"gone"`), 1)),
		} {
			ix, ok := indexStateFile(file(parts...))
			require.True(t, ok)
			_, err := matchUpdates(ix, rec)
			assert.True(t, errors.As(err, &notIncr), "%s: %v", name, err)
		}
	})
}

// TestPendingRecordCleansUp: a record started while the kernel commits
// leaves nothing behind when the apply ends without it, or when the
// tables cannot be recorded (then finish says so, as no fault).
func TestPendingRecordCleansUp(t *testing.T) {
	dir := t.TempDir()
	head := &applyRecord{Build: "b", Namespace: "n", File: bytes.Repeat([]byte("x"), 1<<20)}
	p, err := startRecord(dir, head)
	require.NoError(t, err)
	p.abort()
	p.abort() // again: nothing
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries, "an aborted record")

	var opts Options
	cfg, err := opts.parseConfig(nil)
	require.NoError(t, err)
	eng, err := newEngine(cfg, newFakeKernel(), slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	defer eng.close()
	p, err = startRecord(dir, head)
	require.NoError(t, err)
	err = p.finish(eng, nil, &Status{}, nil) // nothing programmed: no generation known
	var noRec *noRecordError
	assert.True(t, errors.As(err, &noRec), "finish of tables never committed: %v", err)
	p.abort() // after finish: nothing
	entries, _ = os.ReadDir(dir)
	assert.Empty(t, entries, "a record that could not be made")
}

// TestStaleRecordTempsRemoved: a temporary record a killed apply left is
// removed by the next apply's record; a fresh one (another apply's, now)
// and other files are not.
func TestStaleRecordTempsRemoved(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "."+RecordFileName+".123")
	fresh := filepath.Join(dir, "."+RecordFileName+".456")
	other := filepath.Join(dir, StatusFileName)
	for _, f := range []string{stale, fresh, other} {
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o600))
	}
	old := time.Now().Add(-2 * staleAfter)
	require.NoError(t, os.Chtimes(stale, old, old))
	require.NoError(t, os.Chtimes(other, old, old))
	p, err := startRecord(dir, &applyRecord{})
	require.NoError(t, err)
	p.abort()
	assert.NoFileExists(t, stale)
	assert.FileExists(t, fresh)
	assert.FileExists(t, other)
}

// recordSourceFunc is a recordSource that writes what it is given.
type recordSourceFunc func(w *binrec.Writer) error

func (f recordSourceFunc) CanRecord() error                    { return nil }
func (f recordSourceFunc) AppendRecord(w *binrec.Writer) error { return f(w) }

// TestRecordTablesReadBehind: a record reads back whole, its tables after
// the rest, in the background (awaitTables); tables that do not read make
// awaitTables fail, not decodeRecord, whose part the apply uses first.
func TestRecordTablesReadBehind(t *testing.T) {
	table := &nft.TableRecord{
		Family: nft.FamilyINet, Name: "nftep", Gen: 7,
		Chains:    []nft.ChainRecord{{Name: "filter-tw-cali1", Digest: [16]byte{1}}},
		ChainRefs: map[string]int{"filter-tw-cali1": 2},
	}
	encode := func(inet recordSource) []byte {
		rec := &applyRecord{
			Build: "b", Namespace: "ns", File: []byte(`{"updates": [{}]}`),
			Status:    []byte(`{}`),
			Endpoints: []EndpointStatus{{Kind: "workload", ID: "w1", Status: "up"}},
			Routes:    map[string]int{"cali1": 3},
			Updates:   []recordUpdate{{Start: 12, End: 14, Key: objectKey(kindWEP, "w1"), Iface: "cali1"}},
			inetFrom:  inet,
		}
		w := &binrec.Writer{}
		encodeRecordHead(w, rec)
		require.NoError(t, encodeRecordBody(w, rec))
		return w.Buf
	}

	rec, err := decodeRecord(encode(recordSourceFunc(func(w *binrec.Writer) error {
		table.AppendBinary(w)
		return nil
	})))
	require.NoError(t, err)
	assert.True(t, rec.hasINet)
	assert.False(t, rec.hasARP)
	assert.Equal(t, "cali1", rec.Updates[0].Iface)
	assert.Equal(t, map[string]int{"cali1": 3}, rec.Routes)
	require.NoError(t, rec.awaitTables())
	require.NotNil(t, rec.INet)
	assert.Nil(t, rec.ARP)
	assert.Equal(t, table.Chains, rec.INet.Chains)
	assert.Equal(t, table.ChainRefs, rec.INet.ChainRefs)

	rec, err = decodeRecord(encode(recordSourceFunc(func(w *binrec.Writer) error {
		w.Uint(99) // a table record format that does not exist
		return nil
	})))
	require.NoError(t, err, "the part before the tables reads")
	assert.Equal(t, "w1", rec.Endpoints[0].ID)
	assert.Error(t, rec.awaitTables())
}
