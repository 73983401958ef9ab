package takeover

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
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
	// read with iptables-legacy-save when it is installed; -1 when not
	// known. A table with no rules is not reported.
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
// are counted with iptables-legacy-save when it is installed, else the table
// is reported with unknown counts.
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
	// Count rules, one save per family, outside the switched thread's
	// work above (Do runs the command in the namespace too).
	kept := out[:0]
	for _, t := range out {
		save := "iptables-legacy-save"
		if t.Family == "ipv6" {
			save = "ip6tables-legacy-save"
		}
		if b, err := s.legacySave(save + " -t " + t.Table); err == nil {
			t.Rules, t.CalicoChains = countSave(b)
			if t.Rules == 0 && t.CalicoChains == 0 {
				continue // instantiated but empty: decides nothing
			}
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

// countSave counts the rules and `cali-` chains of an iptables-save
// listing.
func countSave(b []byte) (rules, cali int) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "-A "):
			rules++
		case strings.HasPrefix(l, ":"+chainPrefix):
			cali++
		}
	}
	return rules, cali
}

// runLegacySave runs cmd (a save tool and its arguments) inside the
// namespace: a child process starts in the namespace of the thread that
// forks it, which Do has switched. It fails when the tool is not
// installed.
func (s *Sweeper) runLegacySave(cmd string) ([]byte, error) {
	args := strings.Fields(cmd)
	path, err := exec.LookPath(args[0])
	if err != nil {
		return nil, err
	}
	var out []byte
	err = s.ns.Do(func() error {
		var err error
		out, err = exec.Command(path, args[1:]...).Output()
		return err
	})
	return out, err
}
