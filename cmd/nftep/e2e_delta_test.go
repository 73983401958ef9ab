package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The floor of one change (issue: "For one change, the floor is `nft -f`
// of that change's delta, plus its route and neighbour"): the node's
// ruleset, routes and static neighbours are listed before and after each
// one-workload step nftep applies; the difference is turned into an `nft
// -f` script and an `ip -batch` file, which the twin namespace (holding
// what the node held before the step) runs, timed. The kernel's one-rule
// commit (floor) stays reported beside it as the lower bound of any
// change to the table.

// nodeListing is what the standard tools list of a node: `nft list
// ruleset`, and the routes and neighbours nftep owns as `ip -batch` lines
// without their verb.
type nodeListing struct {
	ruleset string
	routes  []string
	neighs  []string
}

// listNode lists node's ruleset, nftep's routes (proto boot) and static
// neighbours.
func listNode(b *testing.B, node *e2eNode) nodeListing {
	b.Helper()
	var l nodeListing
	l.ruleset = string(nodeOutput(b, node, "nft", "list", "ruleset"))
	for _, fam := range []string{"-4", "-6"} {
		for line := range strings.Lines(string(nodeOutput(b, node, "ip", fam, "route", "show", "table", "main", "proto", "boot"))) {
			l.routes = append(l.routes, strings.TrimSpace(line)+" proto boot")
		}
	}
	for line := range strings.Lines(string(nodeOutput(b, node, "ip", "neigh", "show", "nud", "permanent"))) {
		l.neighs = append(l.neighs, strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "PERMANENT"))+" nud permanent")
	}
	return l
}

// changeDelta is one step's change as the standard tools' batch input.
type changeDelta struct {
	nft string // an `nft -f` script
	ip  string // an `ip -batch` file
}

// deltaOf is the change from before to after.
func deltaOf(before, after nodeListing) (changeDelta, error) {
	script, err := rulesetDelta(before.ruleset, after.ruleset)
	if err != nil {
		return changeDelta{}, err
	}
	var ip bytes.Buffer
	lineDelta(&ip, "route", before.routes, after.routes)
	lineDelta(&ip, "neigh", before.neighs, after.neighs)
	return changeDelta{nft: script, ip: ip.String()}, nil
}

// lineDelta writes `ip -batch` lines that take the objects listed in
// before to those in after: deletions first.
func lineDelta(w io.Writer, object string, before, after []string) {
	inBefore, inAfter := setOf(before), setOf(after)
	for _, l := range before {
		if !inAfter[l] {
			fmt.Fprintf(w, "%s del %s\n", object, l)
		}
	}
	for _, l := range after {
		if !inBefore[l] {
			fmt.Fprintf(w, "%s add %s\n", object, l)
		}
	}
}

// measureDelta runs d in node and returns the wall time of `nft -f` and of
// `ip -batch` (not run when d has no route or neighbour).
func measureDelta(b *testing.B, node *e2eNode, d changeDelta) (nftWall, ipWall time.Duration) {
	b.Helper()
	dir := b.TempDir()
	script := writeFile(b, dir, "delta.nft", d.nft)
	nftWall = runIn(b, node, "nft", "-f", script).wall
	if d.ip != "" {
		ipWall = runIn(b, node, "ip", "-batch", writeFile(b, dir, "delta.batch", d.ip)).wall
	}
	return nftWall, ipWall
}

// nftObject is a chain, set or map of a listed table.
type nftObject struct {
	kind string   // "chain", "set" or "map"
	spec []string // chain: type/hook/policy; set: type, flags...
	body []string // chain: its rules; set or map: its elements
}

// nftTable is a listed table's chains, sets and maps, by "kind name", in
// the order listed.
type nftTable struct {
	objects map[string]*nftObject
	order   []string
}

// parseRuleset reads `nft list ruleset` output into its tables, by
// "family name".
func parseRuleset(text string) (map[string]*nftTable, []string, error) {
	tables := map[string]*nftTable{}
	var order []string
	var tbl *nftTable
	var tblName string
	var obj *nftObject
	var elems *strings.Builder // the text of an elements = { ... } being read
	depth := 0
	for n, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if elems != nil {
			elems.WriteString(" " + line)
			depth += braceDepth(line)
			if depth == 0 {
				obj.body = append(obj.body, splitElements(elems.String())...)
				elems = nil
			}
			continue
		}
		switch {
		case line == "":
		case tbl == nil:
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != "table" || f[3] != "{" {
				return nil, nil, fmt.Errorf("line %d: want a table, have %q", n+1, line)
			}
			tblName = f[1] + " " + f[2]
			tbl = &nftTable{objects: map[string]*nftObject{}}
			tables[tblName] = tbl
			order = append(order, tblName)
		case obj == nil && line == "}":
			tbl = nil
		case obj == nil:
			f := strings.Fields(line)
			if len(f) == 3 && f[2] == "{" && (f[0] == "chain" || f[0] == "set" || f[0] == "map") {
				obj = &nftObject{kind: f[0]}
				key := f[0] + " " + f[1]
				tbl.objects[key] = obj
				tbl.order = append(tbl.order, key)
			}
			// Other table lines (flags, comment) are the same in both
			// listings of one node.
		case line == "}":
			obj = nil
		case obj.kind == "chain":
			if len(obj.body) == 0 && (strings.HasPrefix(line, "type ") || strings.HasPrefix(line, "comment ")) {
				obj.spec = append(obj.spec, strings.TrimSuffix(line, ";"))
			} else {
				obj.body = append(obj.body, line)
			}
		case strings.HasPrefix(line, "elements = {"):
			elems = &strings.Builder{}
			elems.WriteString(line)
			depth = braceDepth(line)
			if depth == 0 {
				obj.body = append(obj.body, splitElements(elems.String())...)
				elems = nil
			}
		default:
			obj.spec = append(obj.spec, line)
		}
	}
	if tbl != nil || elems != nil {
		return nil, nil, fmt.Errorf("the listing ends inside table %s", tblName)
	}
	return tables, order, nil
}

// braceDepth is the change of brace depth over line, quotes skipped.
func braceDepth(line string) int {
	d, quoted := 0, false
	for _, c := range line {
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '{':
			d++
		case c == '}':
			d--
		}
	}
	return d
}

// splitElements splits "elements = { a, b : c, ... }" into its elements.
func splitElements(s string) []string {
	s = strings.TrimSpace(strings.TrimPrefix(s, "elements = "))
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}"))
	var out []string
	start, depth, quoted := 0, 0, false
	for i, c := range s {
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '{':
			depth++
		case c == '}':
			depth--
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" {
		out = append(out, last)
	}
	return out
}

// rulesetDelta is an `nft -f` script that takes the ruleset listed in
// before to the one listed in after, in one transaction: new sets and
// chains with their rules, changed chains flushed and refilled, elements
// deleted, then added, then chains and sets that are gone deleted (once no
// element jumps to them).
func rulesetDelta(before, after string) (string, error) {
	bt, _, err := parseRuleset(before)
	if err != nil {
		return "", fmt.Errorf("before: %w", err)
	}
	at, order, err := parseRuleset(after)
	if err != nil {
		return "", fmt.Errorf("after: %w", err)
	}
	if len(bt) != len(at) {
		return "", fmt.Errorf("tables differ: %d before, %d after", len(bt), len(at))
	}
	var adds, rules, delElems, addElems, dels bytes.Buffer
	for _, tn := range order {
		a, b := at[tn], bt[tn]
		if b == nil {
			return "", fmt.Errorf("table %s is new", tn)
		}
		for _, key := range a.order {
			ao, bo := a.objects[key], b.objects[key]
			name := strings.TrimPrefix(key, ao.kind+" ")
			if bo == nil {
				spec := ""
				if len(ao.spec) > 0 {
					spec = " { " + strings.Join(ao.spec, "; ") + "; }"
				}
				fmt.Fprintf(&adds, "add %s %s %s%s\n", ao.kind, tn, name, spec)
				bo = &nftObject{kind: ao.kind}
			} else if !slices.Equal(ao.spec, bo.spec) {
				return "", fmt.Errorf("%s %s %s: its definition changed", ao.kind, tn, name)
			}
			if ao.kind == "chain" {
				if slices.Equal(ao.body, bo.body) {
					continue
				}
				if len(bo.body) > 0 {
					fmt.Fprintf(&rules, "flush chain %s %s\n", tn, name)
				}
				for _, r := range ao.body {
					fmt.Fprintf(&rules, "add rule %s %s %s\n", tn, name, r)
				}
				continue
			}
			var gone, come []string
			inAfter, inBefore := setOf(ao.body), setOf(bo.body)
			for _, e := range bo.body {
				if !inAfter[e] {
					gone = append(gone, e)
				}
			}
			for _, e := range ao.body {
				if !inBefore[e] {
					come = append(come, e)
				}
			}
			if len(gone) > 0 {
				fmt.Fprintf(&delElems, "delete element %s %s { %s }\n", tn, name, strings.Join(gone, ", "))
			}
			if len(come) > 0 {
				fmt.Fprintf(&addElems, "add element %s %s { %s }\n", tn, name, strings.Join(come, ", "))
			}
		}
		gone := map[string]bool{} // the names of objects that go
		for _, key := range b.order {
			if a.objects[key] == nil {
				_, name, _ := strings.Cut(key, " ")
				gone[name] = true
			}
		}
		for _, key := range b.order {
			if a.objects[key] == nil {
				bo := b.objects[key]
				name := strings.TrimPrefix(key, bo.kind+" ")
				if bo.kind == "chain" && refersToAny(bo.body, gone) {
					// Emptied first: it jumps to, or uses, another
					// object that goes too.
					fmt.Fprintf(&rules, "flush chain %s %s\n", tn, name)
				}
				fmt.Fprintf(&dels, "delete %s %s %s\n", bo.kind, tn, name)
			}
		}
	}
	return adds.String() + rules.String() + delElems.String() + addElems.String() + dels.String(), nil
}

func TestRulesetDelta(t *testing.T) {
	before := `table inet nftep {
	comment "nftep"
	set filter-wl-ifaces {
		type ifname
		elements = { "cali-a" comment "endpoint a, first",
			     "cali-b" }
	}
	map filter-to-wl {
		type ifname : verdict
		elements = { "cali-a" : goto filter-tw-cali-a,
			     "cali-b" : goto filter-tw-cali-b }
	}
	chain filter-forward {
		type filter hook forward priority filter; policy accept;
		oifname vmap @filter-to-wl
	}
	chain filter-tw-cali-a {
		ip saddr { 10.0.0.1, 10.0.0.2 } accept
		drop
	}
	chain filter-tw-cali-b {
		jump filter-pol-b
	}
	chain filter-pol-b {
		drop
	}
}
table arp nftep {
	set filter-arp-own {
		type ifname
		elements = { "cali-a", "cali-b" }
	}
}
`
	after := `table inet nftep {
	comment "nftep"
	set filter-wl-ifaces {
		type ifname
		elements = { "cali-a" comment "endpoint a, first",
			     "cali-c" }
	}
	map filter-to-wl {
		type ifname : verdict
		elements = { "cali-a" : goto filter-tw-cali-a,
			     "cali-c" : goto filter-tw-cali-c }
	}
	chain filter-forward {
		type filter hook forward priority filter; policy accept;
		oifname vmap @filter-to-wl
	}
	chain filter-tw-cali-a {
		accept
	}
	chain filter-tw-cali-c {
		comment "endpoint c"
		drop
	}
}
table arp nftep {
	set filter-arp-own {
		type ifname
		elements = { "cali-a", "cali-c" }
	}
}
`
	got, err := rulesetDelta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := `add chain inet nftep filter-tw-cali-c { comment "endpoint c"; }
flush chain inet nftep filter-tw-cali-a
add rule inet nftep filter-tw-cali-a accept
add rule inet nftep filter-tw-cali-c drop
flush chain inet nftep filter-tw-cali-b
delete element inet nftep filter-wl-ifaces { "cali-b" }
delete element inet nftep filter-to-wl { "cali-b" : goto filter-tw-cali-b }
delete element arp nftep filter-arp-own { "cali-b" }
add element inet nftep filter-wl-ifaces { "cali-c" }
add element inet nftep filter-to-wl { "cali-c" : goto filter-tw-cali-c }
add element arp nftep filter-arp-own { "cali-c" }
delete chain inet nftep filter-tw-cali-b
delete chain inet nftep filter-pol-b
`
	if got != want {
		t.Errorf("rulesetDelta:\n%s\nwant:\n%s", got, want)
	}
	if got, err := rulesetDelta(after, after); err != nil || got != "" {
		t.Errorf("rulesetDelta of one ruleset = %q, %v; want nothing", got, err)
	}
	var ip bytes.Buffer
	lineDelta(&ip, "route", []string{"10.0.0.1 dev cali-a proto boot", "10.0.0.2 dev cali-b proto boot"}, []string{"10.0.0.1 dev cali-a proto boot"})
	if want := "route del 10.0.0.2 dev cali-b proto boot\n"; ip.String() != want {
		t.Errorf("lineDelta = %q, want %q", ip.String(), want)
	}
}

// refersToAny says whether a rule of rules jumps to, goes to or looks up
// (@name) one of names.
func refersToAny(rules []string, names map[string]bool) bool {
	for _, r := range rules {
		f := strings.Fields(r)
		for i, w := range f {
			if (w == "jump" || w == "goto") && i+1 < len(f) && names[f[i+1]] {
				return true
			}
			if n, ok := strings.CutPrefix(w, "@"); ok && names[n] {
				return true
			}
		}
	}
	return false
}

func setOf(lines []string) map[string]bool {
	m := make(map[string]bool, len(lines))
	for _, l := range lines {
		m[l] = true
	}
	return m
}

// nodeOutput is the output of a command run in node's namespace.
func nodeOutput(b *testing.B, node *e2eNode, args ...string) []byte {
	b.Helper()
	out, err := exec.Command("nsenter", append([]string{"--net=/run/netns/" + node.name}, args...)...).Output()
	if err != nil {
		b.Fatalf("%s in %s: %v", strings.Join(args, " "), node.name, err)
	}
	return out
}

// writeFile writes data to dir/name and returns the path.
func writeFile(b *testing.B, dir, name, data string) string {
	b.Helper()
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
		b.Fatal(err)
	}
	return f
}

// reportChangeFloors measures the floor of each step in twin, which holds
// what the node held before the first step (measureFloor): listings are
// the node's before the steps and after each. The steps run three times
// over (they end where they started); each floor is reported as
// floor-<step>-ms (nft -f plus ip -batch, the median), with its parts.
func reportChangeFloors(b *testing.B, twin *e2eNode, steps []oneWorkloadStep, listings []nodeListing) {
	b.Helper()
	deltas := make([]changeDelta, len(steps))
	for i := range steps {
		d, err := deltaOf(listings[i], listings[i+1])
		if err != nil {
			b.Fatalf("the delta of %s: %v", steps[i].name, err)
		}
		deltas[i] = d
		var log strings.Builder
		for line := range strings.Lines("nft -f:\n" + d.nft + "ip -batch:\n" + d.ip) {
			log.WriteString("DEBUG " + line)
		}
		e2eDebugLog(b, "floor of "+steps[i].name, log.String())
	}
	if listings[0].ruleset != listings[len(listings)-1].ruleset {
		b.Fatalf("the steps do not end where they started: the floor's rounds would not replay")
	}
	const rounds = 3
	total := make([][]time.Duration, len(steps))
	nftOnly := make([][]time.Duration, len(steps))
	for range rounds {
		for i, d := range deltas {
			nw, iw := measureDelta(b, twin, d)
			total[i] = append(total[i], nw+iw)
			nftOnly[i] = append(nftOnly[i], nw)
		}
	}
	for i, st := range steps {
		b.ReportMetric(ms(medianDuration(total[i])), "floor-"+st.name+"-ms")
		b.ReportMetric(ms(medianDuration(nftOnly[i])), "floor-"+st.name+"-nft-ms")
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// ms is d in milliseconds, for ReportMetric.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
