package takeover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// LegacyTable is an iptables-legacy (x_tables) table of the namespace.
// nftep programs nftables only, and x_tables hooks run beside nftables'
// base chains: a drop in one of these tables is final whatever nftep's
// table says, and nftep cannot remove it.
type LegacyTable struct {
	// Family is "ipv4" (iptables) or "ipv6" (ip6tables).
	Family string `json:"family"`
	// Table is the table's name: filter, nat, mangle, raw or security.
	Table string `json:"table"`
	// Rules counts the table's rules and CalicoChains its `cali-` chains,
	// read from x_tables; -1 when they could not be read. A table with no
	// rules is not reported.
	Rules        int `json:"rules"`
	CalicoChains int `json:"calicoChains"`
	// Inspect is the command that shows the table, Remove the one that
	// removes Calico's chains and rules from it (and nothing else).
	Inspect string `json:"inspect"`
	Remove  string `json:"remove"`
}

// legacyFamilies are x_tables' IP families: the /proc/net file that names
// their tables in use, and their save and restore tools.
var legacyFamilies = []struct {
	family, names, save, restore string
}{
	{"ipv4", "ip_tables_names", "iptables-legacy-save", "iptables-legacy-restore"},
	{"ipv6", "ip6_tables_names", "ip6tables-legacy-save", "ip6tables-legacy-restore"},
}

// CheckLegacy finds the iptables-legacy tables of the namespace that hold
// rules, records them in the report and logs each with the commands a user
// would run. /proc/net/ip_tables_names and ip6_tables_names (read inside
// the namespace) name the tables x_tables instantiated there; their rules
// and `cali-` chains are read from x_tables (see countLegacy).
func (s *Sweeper) CheckLegacy() ([]LegacyTable, error) {
	var out []LegacyTable
	err := s.ns.Do(func() error {
		for _, lf := range legacyFamilies {
			// thread-self: /proc/self/net would show the namespace of
			// the process's main thread, not of this one.
			b, err := os.ReadFile("/proc/thread-self/net/" + lf.names)
			if errors.Is(err, fs.ErrNotExist) {
				continue // no x_tables for this family in the kernel
			}
			if err != nil {
				return err
			}
			for _, name := range strings.Fields(string(b)) {
				out = append(out, LegacyTable{Family: lf.family, Table: name, Rules: -1, CalicoChains: -1,
					Inspect: fmt.Sprintf("%s -t %s", lf.save, name),
					Remove:  removeCommand(lf.save, lf.restore, name)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read x_tables' table names in %s: %w", s.ns, err)
	}
	// Count rules and cali- chains from x_tables itself (getsockopt, as
	// iptables-legacy-save reads them): nftep runs no programs.
	kept := out[:0]
	for _, t := range out {
		var rules, cali int
		err := s.ns.Do(func() (err error) {
			rules, cali, err = s.countLegacy(t.Family, t.Table)
			return err
		})
		if err == nil {
			t.Rules, t.CalicoChains = rules, cali
			if rules == 0 && cali == 0 {
				continue // instantiated but empty: decides nothing
			}
		} else {
			s.log.Debug("cannot count the rules of an iptables-legacy table", "family", t.Family, "table", t.Table, "error", err)
		}
		kept = append(kept, t)
	}
	out = kept
	s.mu.Lock()
	s.report.Legacy = append([]LegacyTable(nil), out...)
	s.mu.Unlock()
	for _, t := range out {
		s.log.Warn("iptables-legacy table with rules: nftep cannot remove them, and their drops still decide",
			"family", t.Family, "table", t.Table, "rules", t.Rules, "caliChains", t.CalicoChains,
			"inspect", t.Inspect, "remove Calico's", t.Remove)
	}
	return out, nil
}

// removeCommand is the shell command that removes Calico's chains and rules
// from one legacy table and keeps everything else: save the table, drop
// the `cali-` chain declarations, the rules of `cali-` chains, the rules
// that jump or go to one, and the rules carrying Felix's "cali:" comment,
// and restore the table from what is left.
func removeCommand(save, restore, table string) string {
	return fmt.Sprintf(`%s -t %s | grep -v -e '^:cali-' -e '^-A cali-' -e ' -[jg] cali-' -e '"cali:' | %s -T %s`, save, table, restore, table)
}
