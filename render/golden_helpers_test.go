package render

import (
	"fmt"
	"runtime"
	"sort"
	"strings"

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
