package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
)

// decodeStrict decodes out into v refusing fields v does not declare, so
// that the Go types (and docs/json.md, which documents them) are the whole
// schema.
func decodeStrict(t *testing.T, what, out string, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(out))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	if d.More() {
		t.Fatalf("%s: more than one JSON value\n%s", what, out)
	}
}

// checkTablesMatchText checks that the JSON tables say what show's text
// says: every rule's text and comment make a line of the text, and every
// set and chain is there.
func checkTablesMatchText(t *testing.T, tables []dataplane.TableJSON, text string) {
	t.Helper()
	if len(tables) != 2 || tables[0].Family != "inet" || tables[1].Family != "arp" {
		t.Fatalf("tables: want inet and arp, got %d", len(tables))
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	rules := 0
	for _, tb := range tables {
		for _, s := range tb.Sets {
			if !lines[s.Kind+" "+s.Name+" {"] {
				t.Errorf("%s %s not in show's text", s.Kind, s.Name)
			}
		}
		for _, c := range tb.Chains {
			if !lines["chain "+c.Name+" {"] {
				t.Errorf("chain %s not in show's text", c.Name)
			}
			for _, r := range c.Rules {
				l := r.Text
				if r.Comment != "" {
					l += ` comment "` + r.Comment + `"`
				}
				if !lines[l] {
					t.Errorf("chain %s: rule %q not in show's text", c.Name, l)
				}
				rules++
			}
		}
	}
	if rules < 50 {
		t.Errorf("only %d rules in the JSON tables", rules)
	}
}

// TestShowJSONDryRun: show --json --state decodes strictly into ShowJSON
// and says what show --state says.
func TestShowJSONDryRun(t *testing.T) {
	withEnv(t)
	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	out, _, err := nftep(t, "show", "--state", demoState, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got dataplane.ShowJSON
	decodeStrict(t, "show --state --json", out, &got)
	if got.Source != "dry-run" || got.File != demoState || got.TableExists != nil {
		t.Errorf("header: %+v", got)
	}
	text, _, err := nftep(t, "show", "--state", demoState)
	if err != nil {
		t.Fatal(err)
	}
	checkTablesMatchText(t, got.Tables, text)
	// The dispatch map's elements, in nft's order, with their verdicts.
	for _, s := range got.Tables[0].Sets {
		if s.Name != "filter-to-wl" {
			continue
		}
		want := []dataplane.ElementJSON{
			{Key: "cali-a", Verdict: "goto filter-tw-cali-a", Comment: "endpoint k8s/demo/pod-a/eth0"},
			{Key: "cali-b", Verdict: "goto filter-tw-cali-b", Comment: "endpoint k8s/demo/pod-b/eth0"},
			{Key: "cali-c", Verdict: "goto filter-tw-cali-c", Comment: "endpoint k8s/demo/pod-c/eth0"},
		}
		if s.Kind != "map" || s.Data != "verdict" || len(s.Key) != 1 || s.Key[0] != "ifname" || !equalElements(s.Elements, want) {
			t.Errorf("filter-to-wl: %+v", s)
		}
	}
}

func equalElements(a, b []dataplane.ElementJSON) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestKernelJSONOutputs: apply --json, show --json (from the kernel, the
// record and a running daemon), show --diff --json and status --json decode
// strictly into their Go types, and show --json says what show says.
func TestKernelJSONOutputs(t *testing.T) {
	ns := netnstest.New(t)
	withEnv(t)
	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	runDir := t.TempDir()
	g := []string{"--netns", ns.Name, "--run-dir", runDir}

	out, _, err := nftep(t, append(g, "apply", "--state", demoState, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var res dataplane.Result
	decodeStrict(t, "apply --json", out, &res)
	if res.Table != "nftep" || res.Operations == 0 || len(res.Statuses) != 3 || !strings.Contains(res.Contents, "3 workload endpoints") {
		t.Errorf("apply --json: %+v", res)
	}

	out, _, err = nftep(t, append(g, "show", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var kern dataplane.ShowJSON
	decodeStrict(t, "show --json (kernel)", out, &kern)
	if kern.Source != "kernel" || kern.File != "" || kern.TableExists == nil || !*kern.TableExists || len(kern.Warnings) != 0 {
		t.Errorf("show --json (kernel) header: %+v", kern)
	}

	out, _, err = nftep(t, append(g, "show", "--record", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rec dataplane.ShowJSON
	decodeStrict(t, "show --json (record)", out, &rec)
	if rec.Source != "record" || rec.File != filepath.Join(runDir, dataplane.RulesetJSONFileName) ||
		rec.TableExists == nil || !*rec.TableExists || len(rec.Warnings) != 0 {
		t.Errorf("show --json (record) header: %+v", rec)
	}
	if _, err := time.Parse(time.RFC3339, rec.Recorded); err != nil {
		t.Errorf("recorded: %v", err)
	}
	text, _, err := nftep(t, append(g, "show")...)
	if err != nil {
		t.Fatal(err)
	}
	checkTablesMatchText(t, rec.Tables, text)
	checkTablesMatchText(t, kern.Tables, text)
	if a, b := mustJSON(t, kern.Tables), mustJSON(t, rec.Tables); !bytes.Equal(a, b) {
		t.Errorf("the kernel's tables differ from the record's:\nkernel: %s\nrecord: %s", a, b)
	}

	out, _, err = nftep(t, append(g, "show", "--diff", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var diff dataplane.DiffJSON
	decodeStrict(t, "show --diff --json", out, &diff)
	if diff.Source != "record" || len(diff.Differences) != 0 || !strings.Contains(out, `"differences": []`) {
		t.Errorf("show --diff --json with nothing changed: %s", out)
	}
	ns.Run(t, "nft", "insert", "rule", "inet", "nftep", "filter-fw-cali-a", "drop")
	out, _, err = nftep(t, append(g, "show", "--diff", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	decodeStrict(t, "show --diff --json", out, &diff)
	if want := []string{"+ chain filter-fw-cali-a rule 1: drop (foreign)"}; !slices.Equal(diff.Differences, want) {
		t.Errorf("show --diff --json after a foreign rule: %q, want %q", diff.Differences, want)
	}

	out, _, err = nftep(t, append(g, "status", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var st dataplane.Status
	decodeStrict(t, "status --json", out, &st)
	if st.Mode != "apply" || len(st.Endpoints) != 3 {
		t.Errorf("status --json: %+v", st)
	}

	// A running daemon answers show --json itself, with the same tables.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, append(g, "run", "--state", demoState), io.Discard, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v\n%s", err, stderr.String())
		}
	}()
	var live dataplane.ShowJSON
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _, err = nftep(t, append(g, "show", "--record", "--json")...)
		if err == nil && strings.Contains(out, `"source": "daemon"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon answer: %v\n%s\n%s", err, out, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	decodeStrict(t, "show --json (daemon)", out, &live)
	if live.File != "" || live.Recorded != "" || live.TableExists == nil || !*live.TableExists {
		t.Errorf("show --json (daemon) header: %+v", live)
	}
	if a, b := mustJSON(t, live.Tables), mustJSON(t, rec.Tables); !bytes.Equal(a, b) {
		t.Errorf("the daemon's tables differ from the record's")
	}
	out, _, err = nftep(t, append(g, "status", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	decodeStrict(t, "status --json (daemon)", out, &st)
	if st.Mode != "run" {
		t.Errorf("status --json (daemon): %+v", st)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
