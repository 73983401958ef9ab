package dataplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/overlay"
)

// RulesetJSONFileName holds the tables as last programmed, as a JSON array
// of TableJSON: written with RulesetFileName, at the same moments, so that
// `nftep show --json` reads the record when no daemon answers.
const RulesetJSONFileName = "ruleset.json"

// ShowJSON is what `nftep show --json` prints: nftep's tables as it
// programmed them (or as a state file would program them), with where the
// data came from. docs/json.md documents it.
type ShowJSON struct {
	// Source is "kernel" (the tables read from the kernel and decoded:
	// show --json), "daemon" (the running nftep answered on its control
	// socket: show --record --json), "record" (RUN-DIR/ruleset.json,
	// written by `nftep apply` and by a stopping daemon) or "dry-run"
	// (show --state FILE --json).
	Source string `json:"source"`
	// File is the record's or the state file's path; empty for "daemon".
	File string `json:"file,omitempty"`
	// Recorded is when the record was written ("record" only).
	Recorded string `json:"recorded,omitempty"`
	// TableExists says whether the kernel holds the inet table now; absent
	// for a dry run.
	TableExists *bool `json:"tableExists,omitempty"`
	// Warnings are what `nftep show` prints as "# WARNING:" lines.
	Warnings []string `json:"warnings,omitempty"`
	// Tables are the inet table, then the arp table (when ARP suppression
	// is on).
	Tables []TableJSON `json:"tables"`
	// ClusterNetworking is the node's tunnel devices, remote VTEPs and
	// cluster routes as the kernel holds them ("kernel" only; absent when
	// there are none).
	ClusterNetworking *overlay.Kernel `json:"clusterNetworking,omitempty"`
}

// DiffJSON is what `nftep show --diff --json` prints: the differences
// between the kernel's tables and nftep's record of them.
type DiffJSON struct {
	// Source is what the kernel was compared with: "daemon" or "record".
	Source string `json:"source"`
	// File is the record's path; empty for "daemon".
	File string `json:"file,omitempty"`
	// Recorded is when the record was written ("record" only).
	Recorded string `json:"recorded,omitempty"`
	// Warnings are what `nftep show --diff` prints as "# WARNING:" lines.
	Warnings []string `json:"warnings,omitempty"`
	// Differences are the lines `nftep show --diff` prints, one per rule,
	// chain, set or element: "+" in the kernel only (foreign), "-" in the
	// record only (missing), "~" changed. Empty when the two agree.
	Differences []string `json:"differences"`
}

// TableJSON is one table: its maps and sets, then its chains, each group in
// the order `nft list table` prints them.
type TableJSON struct {
	// Family is "inet" or "arp".
	Family string `json:"family"`
	// Name is the table's name.
	Name string `json:"name"`
	// Sets are the named sets and maps, sorted by name.
	Sets []SetJSON `json:"sets"`
	// Chains are the base chains sorted by name, then the regular chains
	// sorted by name.
	Chains []ChainJSON `json:"chains"`
}

// SetJSON is a named set or map.
type SetJSON struct {
	// Name is the set's name.
	Name string `json:"name"`
	// Kind is "set" or "map".
	Kind string `json:"kind"`
	// Key is the key's type, one entry per field of a concatenation
	// ("ifname", "ipv4_addr", …).
	Key []string `json:"key"`
	// Data is a map's value type: "verdict" or "mark"; absent for a set.
	Data string `json:"data,omitempty"`
	// Flags are the set's flags as nft names them ("interval").
	Flags []string `json:"flags,omitempty"`
	// Comment is the set's comment.
	Comment string `json:"comment,omitempty"`
	// Elements are in the order nft lists them.
	Elements []ElementJSON `json:"elements"`
}

// ElementJSON is one element of a set or map.
type ElementJSON struct {
	// Key is the key in nft syntax without quotes, fields of a
	// concatenation joined by " . " ("cali-a", "10.65.0.1",
	// "cali-a . 10.65.0.1").
	Key string `json:"key"`
	// Verdict is a verdict map's value ("goto filter-tw-cali-a").
	Verdict string `json:"verdict,omitempty"`
	// Mark is a mark map's value, as nft prints it ("0x00010000").
	Mark string `json:"mark,omitempty"`
	// Comment is the element's comment.
	Comment string `json:"comment,omitempty"`
}

// ChainJSON is one chain and its rules, in order.
type ChainJSON struct {
	// Name is the chain's name.
	Name string `json:"name"`
	// Base is set for a base chain only.
	Base *BaseChainJSON `json:"base,omitempty"`
	// Rules run in order.
	Rules []RuleJSON `json:"rules"`
}

// BaseChainJSON is what makes a chain a base chain.
type BaseChainJSON struct {
	// Type is the chain type ("filter").
	Type string `json:"type"`
	// Hook is the netfilter hook ("prerouting", "input", …).
	Hook string `json:"hook"`
	// Priority is the numeric priority (raw -300, mangle -150, filter 0).
	Priority int `json:"priority"`
	// Policy is the chain's default verdict ("accept" or "drop").
	Policy string `json:"policy"`
}

// RuleJSON is one rule.
type RuleJSON struct {
	// Text is the rule as `nft list` prints it, without its comment.
	Text string `json:"text"`
	// Comment says why the rule is there.
	Comment string `json:"comment,omitempty"`
}

// modelJSON converts a table's model.
func modelJSON(m *nft.Model) TableJSON {
	t := TableJSON{Family: string(m.Family), Name: m.Name, Sets: []SetJSON{}, Chains: []ChainJSON{}}
	sets, chains := m.PrintOrder()
	for _, name := range sets {
		t.Sets = append(t.Sets, setJSON(m.Set(name)))
	}
	for _, name := range chains {
		t.Chains = append(t.Chains, chainJSON(m.Chain(name)))
	}
	return t
}

func setJSON(s *nft.Set) SetJSON {
	js := SetJSON{Name: s.Name, Kind: "set", Data: string(s.Data), Comment: s.Comment, Elements: []ElementJSON{}}
	if s.Data != nft.DataNone {
		js.Kind = "map"
	}
	for _, k := range s.Key {
		js.Key = append(js.Key, string(k))
	}
	if s.Interval {
		js.Flags = []string{"interval"}
	}
	for _, e := range s.SortedElements() {
		je := ElementJSON{Key: e.Key, Comment: e.Comment}
		switch s.Data {
		case nft.DataVerdict:
			if e.Verdict != nil {
				je.Verdict = e.Verdict.String()
			}
		case nft.DataMark:
			je.Mark = fmt.Sprintf("0x%08x", e.Mark)
		}
		js.Elements = append(js.Elements, je)
	}
	return js
}

func chainJSON(c *nft.Chain) ChainJSON {
	jc := ChainJSON{Name: c.Name, Rules: make([]RuleJSON, 0, len(c.Rules))}
	if b := c.Base; b != nil {
		policy := b.Policy
		if policy == "" {
			policy = nft.PolicyAccept
		}
		jc.Base = &BaseChainJSON{Type: string(b.Type), Hook: string(b.Hook), Priority: b.Priority, Policy: string(policy)}
	}
	for _, r := range c.Rules {
		bare := *r
		bare.Comment = ""
		jc.Rules = append(jc.Rules, RuleJSON{Text: bare.String(), Comment: r.Comment})
	}
	return jc
}

// writeTablesJSON writes what json.Marshal of the models' TableJSONs
// writes, and a newline, a set or a chain at a time: at 10,000 endpoints
// the whole []TableJSON and its encoding held a few hundred megabytes at
// the end of a cold apply, when its peak memory is reached.
func writeTablesJSON(w io.Writer, ms []*nft.Model) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
	put := func(v any) {
		if err != nil {
			return
		}
		var data []byte
		if data, err = json.Marshal(v); err == nil {
			_, err = bw.Write(data)
		}
	}
	bw.WriteByte('[')
	for i, m := range ms {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString(`{"family":`)
		put(string(m.Family))
		bw.WriteString(`,"name":`)
		put(m.Name)
		bw.WriteString(`,"sets":[`)
		sets, chains := m.PrintOrder()
		for j, name := range sets {
			if j > 0 {
				bw.WriteByte(',')
			}
			put(setJSON(m.Set(name)))
		}
		bw.WriteString(`],"chains":[`)
		for j, name := range chains {
			if j > 0 {
				bw.WriteByte(',')
			}
			put(chainJSON(m.Chain(name)))
		}
		bw.WriteString("]}")
	}
	bw.WriteString("]\n")
	if err != nil {
		return err
	}
	return bw.Flush()
}

// tablesJSON is the engine's desired tables (what the kernel holds after a
// successful apply): inet, then arp.
func (e *engine) tablesJSON() []TableJSON {
	var out []TableJSON
	for _, m := range e.models() {
		out = append(out, modelJSON(m))
	}
	return out
}

// models are the engine's desired tables: inet, then arp.
func (e *engine) models() []*nft.Model {
	out := []*nft.Model{e.inet.Desired()}
	if e.arp != nil {
		out = append(out, e.arp.Desired())
	}
	return out
}
