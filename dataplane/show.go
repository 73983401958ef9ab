package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
)

// Programmed is what `nftep show` prints without a state file: the tables
// as nftep last programmed them, from the run directory, and whether the
// kernel still holds them.
//
// The nft package reads a table back only to compare it with a model (rule
// hashes in userdata), not into a model of its own, so this is nftep's record
// of its last successful apply, not a decoding of the kernel's rules; `nft
// list table inet <name>` shows the kernel's own view.
type Programmed struct {
	// Table is the table name.
	Table string
	// Ruleset is the content of ruleset.nft; empty when there is none.
	Ruleset string
	// Recorded is when ruleset.nft was written.
	Recorded time.Time
	// InetExists and ARPExists say whether the kernel holds the tables now.
	InetExists, ARPExists bool
}

// ReadProgrammed reads the run directory's record of the programmed tables
// and asks the kernel whether the tables exist.
func ReadProgrammed(opts Options) (*Programmed, error) {
	p := &Programmed{Table: opts.Table}
	if p.Table == "" {
		p.Table = render.DefaultTableName
		if s, err := ReadStatus(filepath.Join(opts.RunDir, StatusFileName)); err == nil && s.Table != "" {
			p.Table = s.Table
		}
	}
	var err error
	if p.InetExists, err = TableExists(opts.Namespace, nft.FamilyINet, p.Table); err != nil {
		return nil, err
	}
	if p.ARPExists, err = TableExists(opts.Namespace, nft.FamilyARP, p.Table); err != nil {
		return nil, err
	}
	path := filepath.Join(opts.RunDir, RulesetFileName)
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
