package render

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nftep/nftep/nft"
)

// getLine returns the line of the caller's caller, so a failing golden
// names the case that produced it.
func getLine() string {
	_, file, line, ok := runtime.Caller(1)
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%s:%d", file[strings.LastIndex(file, "/")+1:], line)
}

// dedent removes the common leading indentation of s's non-blank lines, a
// leading newline and trailing blank space, so goldens can be indented with
// the code. Tabs inside lines (nft's indentation) are kept.
func dedent(s string) string {
	s = strings.TrimPrefix(s, "\n")
	lines := strings.Split(s, "\n")
	prefix := ""
	first := true
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		ind := l[:len(l)-len(strings.TrimLeft(l, "\t"))]
		if first || len(ind) < len(prefix) {
			prefix = ind
			first = false
		}
	}
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.TrimRight(strings.Join(lines, "\n"), " \t\n") + "\n"
}

// assertGolden compares nft text with cmp.Diff.
func assertGolden(t *testing.T, line, want, got string) {
	t.Helper()
	if d := cmp.Diff(dedent(want), got); d != "" {
		t.Errorf("%s: rendered ruleset differs (-want +got):\n%s", line, d)
	}
}

// outputText prints what an endpoint rendered, as nft prints it: the owned
// chains, the shared chains, the extra chains, then each touched map or set
// holding just this endpoint's elements (definitions from Static).
func outputText(cfg Config, outs []Output, withARP bool, extra ...*nft.Chain) string {
	_, sets := Static(cfg)
	_, arpSets := ARPStatic(cfg)
	defs := map[string]*nft.Set{}
	for _, s := range append(sets, arpSets...) {
		defs[s.Name] = s
	}
	var b strings.Builder
	seen := map[string]bool{}
	elems := map[string]map[string]nft.Element{}
	for _, o := range outs {
		groups := [][]*nft.Chain{o.Chains, o.Shared}
		elements := o.Elements
		if withARP {
			groups = append(groups, o.ARPChains)
			elements = append(append([]SetElement(nil), elements...), o.ARPElements...)
		}
		for _, group := range groups {
			for _, c := range group {
				if !seen[c.Name] {
					seen[c.Name] = true
					b.WriteString(c.String())
				}
			}
		}
		for _, e := range elements {
			if elems[e.Set] == nil {
				elems[e.Set] = map[string]nft.Element{}
			}
			elems[e.Set][e.Elem.Key] = e.Elem
		}
	}
	for _, c := range extra {
		b.WriteString(c.String())
	}
	var names []string
	for n := range elems {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := *defs[n]
		s.Elements = elems[n]
		b.WriteString(s.String())
	}
	return b.String()
}

// printGoldens names a file (RENDER_PRINT_GOLDENS=/tmp/x.go) to which
// TestGoldens writes every case's current output as Go source, for review
// when a deliberate change alters the goldens.
var printGoldens = os.Getenv("RENDER_PRINT_GOLDENS")
