package dataplane

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/takeover"
)

// TestQuickSnapshot: a new version read through the cache of the last one
// is the snapshot NewSnapshot makes of it, shares the unchanged updates'
// messages, and gives up (for the full read to report) on what it cannot
// vouch for.
func TestQuickSnapshot(t *testing.T) {
	data := benchStateFile(t, 20)
	sf, err := ParseStateFile("node.json", data)
	require.NoError(t, err)
	_, err = NewSnapshot(sf)
	require.NoError(t, err)
	cache := cacheOf(sf)
	require.Len(t, cache, len(sf.Updates))

	full := func(data []byte) *Snapshot {
		t.Helper()
		sf, err := ParseStateFile("node.json", data)
		require.NoError(t, err)
		s, err := NewSnapshot(sf)
		require.NoError(t, err)
		return s
	}
	same := func(a, b *Snapshot) {
		t.Helper()
		assert.Empty(t, Diff(a, b))
		assert.Empty(t, Diff(b, a))
		assert.Equal(t, a.Config, b.Config)
	}

	// pod-3 changed, pod-19 (the last update) gone, the end re-indented.
	last := sf.Spans[len(sf.Spans)-1]
	require.Contains(t, string(data[last[0]:last[1]]), `"demo/pod-19"`)
	edited := append(append(bytes.Clone(data[:sf.Spans[len(sf.Spans)-2][1]]), "\n  "...), data[last[1]:]...)
	edited = bytes.Replace(edited, []byte(`"demo/pod-3"`), []byte(`"demo/pod-3b"`), 1)
	before := make(updateCache, len(cache))
	maps.Copy(before, cache)
	s, next, ok := quickSnapshot("node.json", edited, cache, full(data))
	require.True(t, ok)
	same(full(edited), s)
	assert.Len(t, next, len(sf.Updates)+1, "the cache keeps the last version's updates too, and adds the new one")
	shared := 0
	for d, c := range next {
		if old, ok := before[d]; ok && old.msg == c.msg {
			shared++
		}
	}
	assert.Equal(t, len(sf.Updates), shared, "every update of the last version is kept as it was")

	// A policy gone that endpoints which did not change still name.
	var polSpan [2]int
	for i, env := range sf.Updates {
		if env.GetActivePolicyUpdate().GetId().GetName() == "pol-1" {
			polSpan = sf.Spans[i]
		}
	}
	require.NotZero(t, polSpan[1])
	dropped := append(bytes.Clone(data[:polSpan[0]]), data[polSpan[1]+1:]...) // and its comma
	_, _, ok = quickSnapshot("node.json", dropped, cache, full(data))
	assert.False(t, ok, "a policy still named removed")

	// What the quick read does not vouch for.
	for name, bad := range map[string][]byte{
		"an update that does not check": bytes.Replace(data, []byte(`"demo/pod-3"`), []byte(`""`), 1),
		"a broken reference":            bytes.Replace(data, []byte(`"kns.demo"]`), []byte(`"kns.nope"]`), 1),
		"not JSON":                      append(bytes.Clone(data), '}'),
		"an object twice":               bytes.Replace(data, []byte(`"demo/pod-3"`), []byte(`"demo/pod-4"`), 1),
		"a removal": bytes.Replace(data, []byte(`"updates": [`),
			[]byte(`"updates": [{"workloadEndpointRemove": {"id": {"orchestratorId": "k8s", "workloadId": "x", "endpointId": "eth0"}}}, `), 1),
	} {
		_, _, ok := quickSnapshot("node.json", bad, cache, full(data))
		assert.False(t, ok, name)
	}
}

// TestMergeStatuses: the record's statuses with the recomputed ones
// merged in, in the endpoint manager's order.
func TestMergeStatuses(t *testing.T) {
	w := func(id, status string) EndpointStatus {
		return EndpointStatus{Kind: "workload", ID: id, Status: status}
	}
	h := func(id string) EndpointStatus { return EndpointStatus{Kind: "host", ID: id, Status: "up"} }
	old := []EndpointStatus{w("k8s/a/eth0", "up"), w("k8s/b/eth0", "up"), w("k8s/ns/c/eth0", "up"), w("k8s/d/eth0", "up"), h("old-host")}
	now := []EndpointStatus{w("k8s/b/eth0", "down"), w("k8s/a/eth1", "up"), w("k8s/e/eth0", "up"), h("eth1")}
	replaced := map[string]bool{"k8s/b/eth0": true, "k8s/d/eth0": true}
	oldCopy := slices.Clone(old)
	got := mergeStatuses(old, now, func(id string) bool { return replaced[id] })
	assert.Equal(t, oldCopy, old, "the record's statuses are left as they were")
	want := []EndpointStatus{
		w("k8s/a/eth0", "up"), w("k8s/a/eth1", "up"), w("k8s/b/eth0", "down"), w("k8s/e/eth0", "up"), w("k8s/ns/c/eth0", "up"), h("eth1"),
	}
	assert.Equal(t, want, got)
	// A record out of order is sorted first.
	slices.Reverse(old)
	assert.Equal(t, want, mergeStatuses(old, now, func(id string) bool { return replaced[id] }))
}

// TestRoutesRecordEncoding: the routes record is written by hand, byte for
// byte what json.Marshal writes, and reads back.
func TestRoutesRecordEncoding(t *testing.T) {
	for _, owned := range []map[string]int{
		nil,
		{},
		{"cali2": 12, "cali1": 7, "tap0": 3, `we"ird<&>\é`: 99, "cali10": 2147483647},
	} {
		all := owned
		if all == nil {
			all = map[string]int{}
		}
		want, err := json.Marshal(routesRecord{Interfaces: all})
		require.NoError(t, err)
		assert.Equal(t, string(want)+"\n", string(appendRoutesRecord(nil, owned)))
		dir := t.TempDir()
		require.NoError(t, writeRoutesRecord(dir, owned))
		got := readRoutesRecord(dir)
		assert.Equal(t, len(owned), len(got))
		for name, index := range owned {
			assert.Equal(t, index, got[name], name)
		}
	}
}

// TestEncodeStatus: the streamed status file, and apply's result, are
// byte for byte what json.MarshalIndent writes.
func TestEncodeStatus(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, eps := range [][]EndpointStatus{
		nil,
		{},
		{{Kind: "workload", ID: `k8s/ns/"pod"<a&b>/eth0`, Status: "down", Reason: "interface calié is not up\n"}, {Kind: "host", ID: "eth1", Status: "up"}},
	} {
		s := &Status{Mode: "apply", Table: "nftep", PID: 7, Updated: now, InSync: true, LastApply: now, Endpoints: eps,
			Takeover: &takeover.Report{}}
		want, err := json.MarshalIndent(s, "", "  ")
		require.NoError(t, err)
		var got bytes.Buffer
		require.NoError(t, encodeStatus(&got, s))
		assert.Equal(t, string(want)+"\n", got.String())

		r := &Result{Table: "nftep", Contents: "1 workload endpoint", Operations: 3, Statuses: eps, Incremental: true}
		want, err = json.MarshalIndent(r, "", "  ")
		require.NoError(t, err)
		got.Reset()
		require.NoError(t, r.WriteJSON(&got))
		assert.Equal(t, string(want)+"\n", got.String())
	}
}
