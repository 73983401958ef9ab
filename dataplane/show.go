package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nftep/nftep/nft"
)

// Programmed is what `nftep show` prints without a state file: the tables
// as nftep last programmed them, and whether the kernel still holds them.
// The ruleset comes from the daemon answering on the run directory's
// control socket (Live), or, when none answers, from the record in
// ruleset.nft that `nftep apply` and a stopping daemon write.
//
// This is nftep's record of what it programmed; ReadKernel decodes what the
// kernel holds, and KernelTables.Diff compares the two.
type Programmed struct {
	// Table is the table name.
	Table string
	// Ruleset is the programmed ruleset; empty when there is none.
	Ruleset string
	// Live is true when a running daemon answered; Recorded is then zero.
	Live bool
	// Recorded is when ruleset.nft was written.
	Recorded time.Time
	// DaemonErr is why a running daemon could not answer (its last
	// apply failed, say); the record is shown instead.
	DaemonErr error
	// InetExists and ARPExists say whether the kernel holds the tables now.
	InetExists, ARPExists bool
}

// ReadProgrammed asks the running daemon, or reads the run directory's
// record, for the programmed tables, and asks the kernel whether the
// tables exist.
func ReadProgrammed(opts Options) (*Programmed, error) {
	return readProgrammed(opts, controlRuleset, RulesetFileName)
}

// ReadProgrammedJSON is ReadProgrammed for `nftep show --json`: the same
// sources, asked for the tables as JSON (the control request
// "ruleset-json", or the record ruleset.json). Ruleset holds the JSON
// array of TableJSON.
func ReadProgrammedJSON(opts Options) (*Programmed, error) {
	return readProgrammed(opts, controlRulesetJSON, RulesetJSONFileName)
}

func readProgrammed(opts Options, request, file string) (*Programmed, error) {
	p := &Programmed{Table: tableName(opts)}
	var err error
	if p.InetExists, err = TableExists(opts.Namespace, nft.FamilyINet, p.Table); err != nil {
		return nil, err
	}
	if p.ARPExists, err = TableExists(opts.Namespace, nft.FamilyARP, p.Table); err != nil {
		return nil, err
	}
	body, err := askDaemon(opts.RunDir, request)
	if err == nil {
		p.Ruleset, p.Live = string(body), true
		return p, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		p.DaemonErr = err
	}
	path := filepath.Join(opts.RunDir, file)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read the programmed ruleset: %w", err)
	default:
		p.Ruleset = string(data)
		if fi, err := os.Stat(path); err == nil {
			p.Recorded = fi.ModTime()
		}
	}
	return p, nil
}
