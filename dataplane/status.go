package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/takeover"
)

// Files nftep writes into its run directory (Options.RunDir).
const (
	// StatusFileName holds the Status as JSON: rewritten at once when the
	// last error or in-sync changes, at most every StatusFileInterval for
	// endpoint status changes in a daemon (after each apply otherwise), and
	// when nftep stops.
	StatusFileName = "status.json"
	// RoutesFileName lists the workload interfaces (name and index) nftep
	// wanted routes on at its last apply (`nftep apply`) or when it
	// stopped (a daemon): the next process removes the routes on them that
	// it does not want at once, instead of sparing them for the grace
	// period it gives routes a CNI plugin made (see routes.Table.Adopt).
	RoutesFileName = "routes.json"
	// RulesetFileName holds the tables as last programmed, in nft syntax:
	// written by `nftep apply` and by a daemon when it stops (a running
	// daemon answers on ControlSocketName instead).
	RulesetFileName = "ruleset.nft"
)

// Status is what a running (or last) nftep reports about itself and its
// endpoints: the content of the run directory's status.json, which `nftep
// status` prints.
type Status struct {
	// Mode is "apply", "run" or "driver".
	Mode string `json:"mode"`
	// Source is the state file's path, or "felix" in driver mode.
	Source string `json:"source,omitempty"`
	// Table is the inet table's name.
	Table string `json:"table"`
	// Namespace is the network namespace's name; empty for the host's.
	Namespace string `json:"namespace,omitempty"`
	// PID is the writer's process id.
	PID int `json:"pid"`
	// Updated is when the file was written.
	Updated time.Time `json:"updated"`
	// InSync is false while a driver waits for Felix's InSync (nothing of
	// Felix's state is programmed yet).
	InSync bool `json:"inSync"`
	// Stopped is when the writer stopped (the ruleset stays programmed);
	// zero while it runs.
	Stopped time.Time `json:"stopped,omitzero"`
	// LastApply is when the kernel last accepted nftep's changes.
	LastApply time.Time `json:"lastApply,omitzero"`
	// LastError is the last failure (a rejected state file, a refused
	// transaction); empty when the last attempt succeeded.
	LastError string `json:"lastError,omitempty"`
	// Endpoints is every endpoint's status, workloads first.
	Endpoints []EndpointStatus `json:"endpoints"`
	// Takeover says what nftep removed of Calico's dataplane and what it
	// could not remove (iptables-legacy tables, ipsets in use); absent in
	// a dry run.
	Takeover *takeover.Report `json:"takeover,omitempty"`
	// Overlay is cluster networking (tunnel devices, remote VTEPs,
	// cluster routes, missing kernel features); absent until Felix says
	// which encapsulation is in use.
	Overlay *overlay.Status `json:"overlay,omitempty"`
}

// EndpointStatus is one endpoint's status in the status file.
type EndpointStatus struct {
	// Kind is "workload" or "host".
	Kind string `json:"kind"`
	// ID is orchestrator/workload/endpoint or the host endpoint's ID.
	ID string `json:"id"`
	// Status is up, down or error.
	Status string `json:"status"`
	// Reason says why it is not up.
	Reason string `json:"reason,omitempty"`
}

func convertStatuses(in []endpoints.EndpointStatus) []EndpointStatus {
	out := make([]EndpointStatus, len(in))
	for i, s := range in {
		out[i] = EndpointStatus{Kind: s.Kind, ID: s.ID, Status: s.Status, Reason: s.Reason}
	}
	return out
}

// ReadStatus reads the status file at path.
func ReadStatus(path string) (*Status, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read status file: %w", err)
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("status file %q: %w", path, err)
	}
	return &s, nil
}

// WriteFileAtomic writes data to path, a file of the run directory, through
// a temporary file and a rename, so a reader never sees half a file. The
// file is 0600; the directory is made sure of first (EnsureRunDir).
func WriteFileAtomic(path string, data []byte) error {
	return writeFileAtomicWith(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFileAtomicWith is WriteFileAtomic of what fill writes.
func writeFileAtomicWith(path string, fill func(w io.Writer) error) error {
	dir := filepath.Dir(path)
	if err := EnsureRunDir(dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	werr := fill(f)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %q: %w", path, err)
	}
	// CreateTemp made it 0600 (nftep's state is root's); a umask cannot
	// widen that.
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// routesRecord is the content of RoutesFileName.
type routesRecord struct {
	// Interfaces maps each workload interface name to its index.
	Interfaces map[string]int `json:"interfaces"`
}

// readRoutesRecord reads dir's routes record; a missing or unreadable one
// is empty (every interface then gets its grace period, as on a fresh
// node).
func readRoutesRecord(dir string) map[string]int {
	if dir == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(dir, RoutesFileName))
	if err != nil {
		return nil
	}
	var r routesRecord
	if json.Unmarshal(data, &r) != nil {
		return nil
	}
	return r.Interfaces
}

func writeRoutesRecord(dir string, owned map[string]int) error {
	return WriteFileAtomic(filepath.Join(dir, RoutesFileName), appendRoutesRecord(nil, owned))
}

// appendRoutesRecord appends the routes record of owned to b: the bytes
// json.Marshal(routesRecord{owned}) gives, and a newline. Written by hand
// because at 10,000 interfaces the reflection over a map (and the sort of
// its keys) made it 10 ms of a one-workload apply.
func appendRoutesRecord(b []byte, owned map[string]int) []byte {
	b = append(b, `{"interfaces":{`...)
	for i, name := range slices.Sorted(maps.Keys(owned)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(owned[name]), 10)
	}
	return append(b, "}}\n"...)
}

// appendJSONString appends s as encoding/json quotes it (with its HTML
// escapes): as it is when every byte is printable ASCII that needs no
// escape, as interface names and endpoint IDs are; through json.Marshal
// otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// writeStatus writes s (and the ruleset, when not empty, as text and as
// JSON) into dir.
func writeStatus(dir string, s *Status, ruleset string, tables []TableJSON) error {
	if dir == "" {
		return nil
	}
	errs := []error{writeFileAtomicWith(filepath.Join(dir, StatusFileName), func(w io.Writer) error {
		return encodeStatus(w, s)
	})}
	if ruleset != "" {
		errs = append(errs, WriteFileAtomic(filepath.Join(dir, RulesetFileName), []byte(ruleset)))
		data, err := json.Marshal(tables)
		if err == nil {
			err = WriteFileAtomic(filepath.Join(dir, RulesetJSONFileName), append(data, '\n'))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// encodeStatus writes s as json.MarshalIndent(s, "", "  ") does, and a
// newline, streaming the endpoints: at 10,000 of them the file is
// megabytes, which MarshalIndent would build twice in memory (marshalled,
// then indented) before a byte is written.
func encodeStatus(out io.Writer, s *Status) error {
	head := *s
	head.Endpoints = nil
	return encodeWithEndpoints(out, &head, "endpoints", s.Endpoints)
}

// WriteJSON writes r as json.MarshalIndent(r, "", "  ") does, and a
// newline (`nftep apply --json`), streaming the statuses as encodeStatus
// does.
func (r *Result) WriteJSON(out io.Writer) error {
	head := *r
	head.Statuses = nil
	return encodeWithEndpoints(out, &head, "statuses", r.Statuses)
}

// encodeWithEndpoints writes head, indented, with its field named field
// (nil in head) holding eps.
func encodeWithEndpoints(out io.Writer, head any, field string, eps []EndpointStatus) error {
	data, err := json.MarshalIndent(head, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", field, err)
	}
	null := `"` + field + `": null`
	i := bytes.Index(data, []byte(null))
	if i < 0 || eps == nil {
		_, err := out.Write(append(data, '\n'))
		return err
	}
	w := bufio.NewWriterSize(out, 64<<10)
	w.Write(data[:i])
	w.WriteString(`"` + field + `": [`)
	var buf []byte
	for k, e := range eps {
		buf = buf[:0]
		if k > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, "\n    {\n      \"kind\": "...)
		buf = appendJSONString(buf, e.Kind)
		buf = append(buf, ",\n      \"id\": "...)
		buf = appendJSONString(buf, e.ID)
		buf = append(buf, ",\n      \"status\": "...)
		buf = appendJSONString(buf, e.Status)
		if e.Reason != "" {
			buf = append(buf, ",\n      \"reason\": "...)
			buf = appendJSONString(buf, e.Reason)
		}
		buf = append(buf, "\n    }"...)
		w.Write(buf)
	}
	if len(eps) > 0 {
		w.WriteString("\n  ")
	}
	w.WriteByte(']')
	w.Write(data[i+len(null):])
	w.WriteByte('\n')
	return w.Flush()
}

// writeRulesetFiles writes the tables (inet, then arp) into dir's
// RulesetFileName and RulesetJSONFileName, as writeStatus does with a
// ruleset, straight from the models to the files.
func writeRulesetFiles(dir string, models []*nft.Model) error {
	if dir == "" {
		return nil
	}
	text := writeFileAtomicWith(filepath.Join(dir, RulesetFileName), func(w io.Writer) error {
		for _, m := range models {
			if err := m.Print(w); err != nil {
				return err
			}
		}
		return nil
	})
	return errors.Join(text, writeFileAtomicWith(filepath.Join(dir, RulesetJSONFileName), func(w io.Writer) error {
		return writeTablesJSON(w, models)
	}))
}

// FormatStatuses prints endpoint statuses as a table, one endpoint a line:
//
//	KIND      ENDPOINT                   STATUS  REASON
//	workload  k8s/demo/pod-a/eth0        up
func FormatStatuses(w io.Writer, eps []EndpointStatus) {
	if len(eps) == 0 {
		fmt.Fprintln(w, "no endpoints")
		return
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tENDPOINT\tSTATUS\tREASON")
	for _, e := range eps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Kind, e.ID, e.Status, e.Reason)
	}
	tw.Flush()
	// tabwriter pads the empty reason of an up endpoint: trim it.
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		fmt.Fprint(w, strings.TrimRight(l, " \n"), strings.Repeat("\n", strings.Count(l, "\n")))
	}
}

// Format prints s for an operator: a header saying who wrote it and how the
// last apply went, then the endpoint table.
func (s *Status) Format(w io.Writer) {
	where := "host network namespace"
	if s.Namespace != "" {
		where = fmt.Sprintf("network namespace %q", s.Namespace)
	}
	src := s.Source
	if src == "" {
		src = "-"
	}
	fmt.Fprintf(w, "nftep %s (pid %d), table inet %s, %s, source %s\n", s.Mode, s.PID, s.Table, where, src)
	var state []string
	if !s.Stopped.IsZero() && s.Mode != "apply" {
		state = append(state, "stopped "+s.Stopped.Local().Format(time.DateTime)+" (the ruleset stays programmed)")
	}
	if !s.InSync {
		state = append(state, "waiting for Felix's in-sync: Felix's state is not programmed yet")
	}
	if !s.LastApply.IsZero() {
		state = append(state, "last apply "+s.LastApply.Local().Format(time.DateTime))
	}
	state = append(state, "written "+s.Updated.Local().Format(time.DateTime))
	fmt.Fprintln(w, strings.Join(state, "; "))
	if s.LastError != "" {
		fmt.Fprintf(w, "last error: %s\n", s.LastError)
	}
	if s.Takeover != nil {
		formatTakeover(w, s.Takeover)
	}
	fmt.Fprintln(w)
	FormatStatuses(w, s.Endpoints)
	if s.Overlay.InUse() {
		fmt.Fprintln(w)
		s.Overlay.Format(w)
	}
}

// formatTakeover prints what nftep removed of Calico's dataplane and what
// it could not remove, with the commands that would.
func formatTakeover(w io.Writer, r *takeover.Report) {
	if r.Sweeps > 0 || r.RemovedIPSets > 0 {
		fmt.Fprintf(w, "calico leftovers removed: %d tables, %d cali- chains, %d rules, %d ipsets (%d sweeps",
			r.RemovedTables, r.RemovedChains, r.RemovedRules, r.RemovedIPSets, r.Sweeps)
		if !r.LastSweep.IsZero() {
			fmt.Fprintf(w, ", last %s: %s", r.LastSweep.Local().Format(time.DateTime), r.LastRemoved)
		}
		fmt.Fprintln(w, ")")
	}
	if r.LastError != "" {
		fmt.Fprintf(w, "calico leftovers: last removal failed: %s\n", r.LastError)
	}
	for _, k := range r.IPSetsKept {
		fmt.Fprintf(w, "calico ipset kept, still referenced %d times: %s (ipset list -t %s)\n", k.References, k.Name, k.Name)
	}
	for _, t := range r.Legacy {
		counts := "rules unknown"
		if t.Rules >= 0 {
			counts = fmt.Sprintf("%d rules, %d cali- chains", t.Rules, t.CalicoChains)
		}
		fmt.Fprintf(w, "iptables-legacy table %s %s: %s; nftep cannot remove them and their drops still decide\n", t.Family, t.Table, counts)
		fmt.Fprintf(w, "  inspect: %s\n  remove Calico's: %s\n", t.Inspect, t.Remove)
	}
}

// EnsureRunDir makes sure dir can hold nftep's run files (the status, the
// records, the control socket): it creates it 0700, its parents 0755, or
// checks that the one there is a directory, not a symbolic link, owned by
// nftep's user, and narrows it to 0700. nftep overwrites files there as
// root: a run directory another user controls could point those writes
// anywhere. An empty dir (no run directory) is fine.
func EnsureRunDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return fmt.Errorf("run directory %q: %w", dir, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("run directory %q: %w", dir, err)
		}
		fi, err = os.Lstat(dir)
	}
	switch {
	case err != nil:
		return fmt.Errorf("run directory %q: %w", dir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("run directory %q is a symbolic link: refusing it (whoever controls the link could point nftep's writes elsewhere)", dir)
	case !fi.IsDir():
		return fmt.Errorf("run directory %q is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("run directory %q belongs to uid %d, not to nftep's user (uid %d): refusing it", dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("run directory %q: %w", dir, err)
		}
	}
	return nil
}
