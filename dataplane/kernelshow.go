package dataplane

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/render"
)

// KernelTables are nftep's tables as the kernel holds them, decoded (what
// `nftep show` prints): the inet table and the arp table.
type KernelTables struct {
	Table     string
	INet, ARP *nft.KernelTable
}

// String prints the tables that exist as `nft list table` prints each.
func (k *KernelTables) String() string {
	var b strings.Builder
	for _, t := range []*nft.KernelTable{k.INet, k.ARP} {
		if t != nil && t.Exists {
			b.WriteString(t.String())
		}
	}
	return b.String()
}

// ReadKernel reads nftep's tables from the kernel of opts.Namespace.
func ReadKernel(ctx context.Context, opts Options) (*KernelTables, error) {
	k := &KernelTables{Table: tableName(opts)}
	fd := 0
	if ns := opts.Namespace; ns != nil && !ns.IsCurrent() {
		fd = ns.Fd()
	}
	var err error
	if k.INet, err = nft.ReadKernelTable(ctx, fd, nft.FamilyINet, k.Table); err != nil {
		return nil, fmt.Errorf("read table inet %s: %w", k.Table, err)
	}
	if k.ARP, err = nft.ReadKernelTable(ctx, fd, nft.FamilyARP, k.Table); err != nil {
		return nil, fmt.Errorf("read table arp %s: %w", k.Table, err)
	}
	return k, nil
}

// ReadClusterNetworking reads the tunnel devices, remote VTEPs (permanent
// neighbours and FDB entries) and cluster routes of opts.Namespace's
// kernel (overlay.ReadKernel): what `nftep show` prints after the tables.
// Cluster routes are told by protocol 80 (Felix's with the default
// DeviceRouteProtocol) and by the VXLAN devices.
func ReadClusterNetworking(opts Options) (*overlay.Kernel, error) {
	ns := opts.Namespace
	if ns == nil {
		ns = netnsutil.Current()
		defer ns.Close()
	}
	nl, err := ns.Netlink()
	if err != nil {
		return nil, err
	}
	k, err := overlay.ReadKernel(nl, overlay.Config{}.ExclusiveProtocol())
	if err != nil {
		return nil, fmt.Errorf("read cluster networking: %w", err)
	}
	return k, nil
}

// tableName is opts.Table, or the table the run directory's status names,
// or the default.
func tableName(opts Options) string {
	if opts.Table != "" {
		return opts.Table
	}
	if s, err := ReadStatus(filepath.Join(opts.RunDir, StatusFileName)); err == nil && s.Table != "" {
		return s.Table
	}
	return render.DefaultTableName
}

// Diff compares the kernel's tables with record, the tables as nftep last
// programmed them in nft syntax (Programmed.Ruleset), and returns one line
// per difference:
//
//   - chain filter-fw-x rule 1: drop (foreign)
//   - chain filter-fw-x rule 3: ct state invalid drop (missing)
//
// "+" is in the kernel only, "-" in the record only, "~" differs. A rule in
// the kernel only is foreign when it carries no nftep hash of what it holds
// (another program added or changed it), and "not in the record" when it
// does (the record is older than the kernel's table); any other object in
// the kernel only is foreign.
func (k *KernelTables) Diff(record string) []string {
	rec := parseListing(record)
	var out []string
	for _, kt := range []*nft.KernelTable{k.INet, k.ARP} {
		if kt == nil {
			continue
		}
		key := string(kt.Model.Family) + " " + kt.Model.Name
		want := rec[key]
		delete(rec, key)
		switch {
		case !kt.Exists && want == nil:
			continue
		case !kt.Exists:
			out = append(out, fmt.Sprintf("- table %s (missing)", key))
			continue
		case want == nil:
			out = append(out, fmt.Sprintf("+ table %s (foreign)", key))
			continue
		}
		got := parseListing(kt.String())[key]
		out = append(out, diffTable(kt, want, got)...)
	}
	for key := range rec {
		out = append(out, fmt.Sprintf("- table %s (missing)", key))
	}
	return out
}

func diffTable(kt *nft.KernelTable, want, got *listedTable) []string {
	var out []string
	for _, name := range got.sets {
		g, w := got.set[name], want.set[name]
		if w == nil {
			out = append(out, fmt.Sprintf("+ %s %s (foreign)", g.kind, name))
			continue
		}
		if strings.Join(g.header, "\n") != strings.Join(w.header, "\n") {
			out = append(out, fmt.Sprintf("~ %s %s: %s (kernel), %s (record)", g.kind, name, strings.Join(g.header, "; "), strings.Join(w.header, "; ")))
		}
		have := map[string]bool{}
		for _, e := range w.elements {
			have[e] = true
		}
		for _, e := range g.elements {
			if !have[e] {
				out = append(out, fmt.Sprintf("+ %s %s element %s (foreign)", g.kind, name, e))
			}
			delete(have, e)
		}
		for _, e := range w.elements {
			if have[e] {
				out = append(out, fmt.Sprintf("- %s %s element %s (missing)", g.kind, name, e))
			}
		}
	}
	for _, name := range want.sets {
		if got.set[name] == nil {
			out = append(out, fmt.Sprintf("- %s %s (missing)", want.set[name].kind, name))
		}
	}
	for _, name := range got.chains {
		g, w := got.chain[name], want.chain[name]
		if w == nil {
			out = append(out, fmt.Sprintf("+ chain %s (foreign, %d rules)", name, len(g.rules)))
			continue
		}
		if g.header != w.header {
			out = append(out, fmt.Sprintf("~ chain %s: %q (kernel), %q (record)", name, g.header, w.header))
		}
		out = append(out, diffRules(kt, name, w.rules, g.rules)...)
	}
	for _, name := range want.chains {
		if got.chain[name] == nil {
			out = append(out, fmt.Sprintf("- chain %s (missing, %d rules)", name, len(want.chain[name].rules)))
		}
	}
	return out
}

// diffRules lists the rules of one chain that the kernel (got) and the
// record (want) do not have in common, by a longest common subsequence.
func diffRules(kt *nft.KernelTable, chain string, want, got []string) []string {
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			i++
			j++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			why := "foreign"
			if kt.Ours(chain, j) {
				why = "not in the record"
			}
			out = append(out, fmt.Sprintf("+ chain %s rule %d: %s (%s)", chain, j+1, got[j], why))
			j++
		default:
			out = append(out, fmt.Sprintf("- chain %s rule %d: %s (missing)", chain, i+1, want[i]))
			i++
		}
	}
	return out
}

// listedTable is a table as `nft list table` prints it, split into its
// objects.
type listedTable struct {
	sets, chains []string
	set          map[string]*listedSet
	chain        map[string]*listedChain
}

type listedSet struct {
	kind     string // set or map
	header   []string
	elements []string
}

type listedChain struct {
	header string
	rules  []string
}

// parseListing splits nft's listing of tables (Model.String's format) by
// table ("inet nftep"), set and chain.
func parseListing(text string) map[string]*listedTable {
	out := map[string]*listedTable{}
	var (
		t     *listedTable
		s     *listedSet
		c     *listedChain
		elems *strings.Builder
	)
	for _, line := range strings.Split(text, "\n") {
		switch {
		case elems != nil:
			elems.WriteString(" " + strings.TrimSpace(line))
			if strings.HasSuffix(line, "}") {
				s.elements = splitElements(elems.String())
				elems = nil
			}
		case strings.HasPrefix(line, "table ") && strings.HasSuffix(line, " {"):
			key := strings.TrimSuffix(strings.TrimPrefix(line, "table "), " {")
			t = &listedTable{set: map[string]*listedSet{}, chain: map[string]*listedChain{}}
			out[key] = t
		case t == nil:
		case strings.HasPrefix(line, "\tset ") || strings.HasPrefix(line, "\tmap "):
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			s, c = &listedSet{kind: f[0]}, nil
			t.sets = append(t.sets, f[1])
			t.set[f[1]] = s
		case strings.HasPrefix(line, "\tchain "):
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			s, c = nil, &listedChain{}
			t.chains = append(t.chains, f[1])
			t.chain[f[1]] = c
		case line == "\t}" || line == "}" || line == "":
			s, c = nil, nil
		case s != nil && strings.HasPrefix(line, "\t\telements = "):
			elems = &strings.Builder{}
			elems.WriteString(strings.TrimPrefix(line, "\t\telements = "))
			if strings.HasSuffix(line, "}") {
				s.elements = splitElements(elems.String())
				elems = nil
			}
		case s != nil:
			s.header = append(s.header, strings.TrimSpace(line))
		case c != nil && c.header == "" && len(c.rules) == 0 && strings.HasPrefix(line, "\t\ttype ") && strings.Contains(line, " hook "):
			c.header = strings.TrimSpace(line)
		case c != nil:
			c.rules = append(c.rules, strings.TrimSpace(line))
		}
	}
	return out
}

// splitElements splits `{ a, b : c, "x, y" }` into its elements.
func splitElements(s string) []string {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			if e := strings.TrimSpace(cur.String()); e != "" {
				out = append(out, e)
			}
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if e := strings.TrimSpace(cur.String()); e != "" {
		out = append(out, e)
	}
	return out
}

// JSON is the tables that exist, as `nftep show --json` prints them.
func (k *KernelTables) JSON() []TableJSON {
	out := []TableJSON{}
	for _, t := range []*nft.KernelTable{k.INet, k.ARP} {
		if t != nil && t.Exists {
			out = append(out, modelJSON(t.Model))
		}
	}
	return out
}
