package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func nftep(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e strings.Builder
	err = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

func TestCommands(t *testing.T) {
	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	runDir := t.TempDir()
	for _, tc := range []struct {
		name    string
		args    []string
		wantOut string
		wantErr string
	}{
		{"no command", nil, "", flag.ErrHelp.Error()},
		{"help", []string{"help"}, "Usage: nftep [global flags] <command> [flags]", ""},
		{"unknown command", []string{"frobnicate"}, "", `unknown command "frobnicate"`},
		{"apply needs a state file", []string{"apply"}, "", "apply: --state FILE is required"},
		{"run needs a state file", []string{"run"}, "", "run: --state FILE is required"},
		{"stray argument", []string{"show", "extra"}, "", `show: unexpected arguments ["extra"]`},
		{"bad log level", []string{"--log-level", "loud", "version"}, "", `--log-level "loud"`},
		{"version", []string{"version"}, "nftep ", ""},
		{"show dry run", []string{"show", "--state", demoState}, "# ruleset of " + demoState + " (dry run: nothing programmed)\ntable inet nftep {", ""},
		{"show dry run, other table", []string{"--table", "blue", "show", "--state", demoState}, "table inet blue {", ""},
		{"status dry run", []string{"status", "--state", demoState}, "workload  k8s/demo/pod-c/eth0  down    state is \"inactive\"", ""},
		{"status without a daemon", []string{"status", "--run-dir", runDir}, "", "status: no status file " + filepath.Join(runDir, "status.json")},
		{"show without a table", []string{"show", "--run-dir", runDir, "--table", "nftep-cmd-test"}, "", "show: the kernel holds no table inet nftep-cmd-test"},
		{"show without a record", []string{"show", "--record", "--run-dir", runDir, "--table", "nftep-cmd-test"}, "", "show: no record of a programmed ruleset in " + runDir},
		{"show --diff without a record", []string{"show", "--diff", "--run-dir", runDir, "--table", "nftep-cmd-test"}, "", "show: no record of a programmed ruleset in " + runDir + " to compare"},
		{"show flags exclude each other", []string{"show", "--diff", "--record"}, "", "show: --state, --record and --diff exclude each other"},
		{"bad state file", []string{"show", "--state", "/nonexistent.yaml"}, "", "read state file: open /nonexistent.yaml"},
		{"unknown namespace", []string{"--netns", "nftep-no-such-ns", "status"}, "", `open network namespace "nftep-no-such-ns"`},
		{"demo refuses --netns", []string{"demo", "--netns", "x"}, "", "demo: --netns does not apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// show without --state asks the kernel whether the table
			// exists, and nf_tables wants CAP_NET_ADMIN even to list.
			if slices.Contains(tc.args, "show") && !slices.Contains(tc.args, "--state") && !strings.HasPrefix(tc.wantErr, "show: --state") && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			out, _, err := nftep(t, tc.args...)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("stdout:\n%s\nwant it to contain:\n%s", out, tc.wantOut)
			}
		})
	}
}

func TestRunDir(t *testing.T) {
	for _, tc := range []struct {
		g    globals
		want string
	}{
		{globals{}, "/run/nftep"},
		{globals{netns: "n1"}, "/run/nftep/netns/n1"},
		{globals{table: "nftep"}, "/run/nftep"},
		{globals{table: "blue", netns: "n1"}, "/run/nftep/netns/n1/table/blue"},
		{globals{runDir: "/tmp/x", netns: "n1"}, "/tmp/x"},
	} {
		if got := (&env{g: tc.g}).runDir(); got != tc.want {
			t.Errorf("runDir(%+v) = %q, want %q", tc.g, got, tc.want)
		}
	}
}
