package dataplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFileValidatorIncremental: `run` validates each new version of its
// state file by sending only what changed through the dry-run engine of the
// last valid version, and ends with the ruleset a from-scratch dry run of
// the same file computes. A rejected version leaves the last valid one in
// place; a configuration change, or a version after a rejected one, is
// validated from scratch.
func TestFileValidatorIncremental(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	wep := func(i int, policy string) string {
		tiers := ""
		if policy != "" {
			tiers = fmt.Sprintf(", tiers: [{name: default, ingressPolicies: [{name: %s}]}]", policy)
		}
		return fmt.Sprintf("  - workloadEndpointUpdate: {id: {orchestratorId: k8s, workloadId: ns/p%d, endpointId: eth0}, endpoint: {name: cali%d, ipv4Nets: [10.0.0.%d/32], profileIds: [prof]%s}}\n", i, i, i, tiers)
	}
	head := func(cfg string) string {
		return "config: {" + cfg + "}\nupdates:\n" +
			"  - ipsetUpdate: {id: 's:a', type: NET, members: [10.1.0.0/16]}\n" +
			"  - activePolicyUpdate: {id: {name: pol}, policy: {tier: default, inboundRules: [{action: allow, srcIpSetIds: ['s:a']}]}}\n" +
			"  - activeProfileUpdate: {id: {name: prof}, profile: {outboundRules: [{action: allow}]}}\n"
	}
	write := func(s string) {
		require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	}
	fv := &fileValidator{path: path, opts: &Options{}}
	step := func(name, content string, incremental bool) *validated {
		t.Helper()
		write(content)
		v, ch, err := fv.load()
		require.NoError(t, err, name)
		assert.Equal(t, incremental, ch.base != nil, "%s: validated incrementally", name)
		scratch, err := validateStateFile(path, &Options{}, nil)
		require.NoError(t, err, name)
		assert.Equal(t, scratch.dry.ruleset(), v.dry.ruleset(), "%s: incremental and from-scratch dry runs differ", name)
		return v
	}

	v1 := step("first", head("")+wep(1, "pol")+wep(2, ""), false)
	v2 := step("endpoint added", head("")+wep(1, "pol")+wep(2, "")+wep(3, "pol"), true)
	assert.Same(t, v1.dry, v2.dry, "the dry engine is kept")
	step("endpoint changed and one removed", head("")+wep(1, "")+wep(3, "pol"), true)

	// A rejected version: the last valid one stays, and the next version
	// is validated against it.
	write(head("") + wep(1, "nope"))
	_, _, err := fv.load()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "policy nope is not defined")
	require.NotNil(t, fv.last, "a file rejected before the dry run keeps the last valid version")
	step("after a rejected file", head("")+wep(1, "pol"), true)

	// A configuration change starts from scratch.
	step("configuration changed", head("DefaultEndpointToHostAction: ACCEPT")+wep(1, "pol"), false)
	step("and on from there", head("DefaultEndpointToHostAction: ACCEPT")+wep(1, "pol")+wep(4, ""), true)
	assert.True(t, strings.Contains(fv.last.dry.ruleset(), "cali4"))
}
