package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/internal/netnstest"
)

// TestKernelShow applies the demo state to a namespace and checks that
// `nftep show` prints what `nft list table` prints, line for line, even
// without a run directory; that `show --diff` finds nothing to report; and
// that it names a rule another process inserted, and a rule it deleted.
func TestKernelShow(t *testing.T) {
	ns := netnstest.New(t)
	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	runDir := t.TempDir()
	if err := run(t.Context(), []string{"--netns", ns.Name, "--run-dir", runDir, "apply", "--state", demoState}, io.Discard, io.Discard); err != nil {
		t.Fatalf("apply: %v", err)
	}

	// No run directory: show reads the kernel only.
	out, _, err := nftep(t, "--netns", ns.Name, "--run-dir", filepath.Join(t.TempDir(), "none"), "show")
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	want := ns.Run(t, "nft", "list", "table", "inet", "nftep") + ns.Run(t, "nft", "list", "table", "arp", "nftep")
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(out, "\n")); diff != "" {
		t.Errorf("show differs from nft list table (-nft +show):\n%s", diff)
	}

	out, _, err = nftep(t, "--netns", ns.Name, "--run-dir", runDir, "show", "--diff")
	if err != nil {
		t.Fatalf("show --diff: %v", err)
	}
	if !strings.HasSuffix(out, "# no differences\n") {
		t.Errorf("show --diff right after apply:\n%s", out)
	}

	// A foreign rule, and a rule of ours deleted.
	ns.Run(t, "nft", "insert", "rule", "inet", "nftep", "filter-fw-cali-a", "drop")
	handles := ns.Run(t, "nft", "-a", "list", "chain", "inet", "nftep", "filter-tw-cali-b")
	var handle, deleted string
	for _, l := range strings.Split(handles, "\n") {
		if i := strings.Index(l, " # handle "); i > 0 && strings.Contains(l, "ct state") {
			handle, deleted = l[i+len(" # handle "):], strings.TrimSpace(l[:i])
			break
		}
	}
	if handle == "" {
		t.Fatalf("no ct state rule in filter-tw-cali-b:\n%s", handles)
	}
	ns.Run(t, "nft", "delete", "rule", "inet", "nftep", "filter-tw-cali-b", "handle", handle)

	out, _, err = nftep(t, "--netns", ns.Name, "--run-dir", runDir, "show", "--diff")
	if err != nil {
		t.Fatalf("show --diff: %v", err)
	}
	for _, w := range []string{
		"+ chain filter-fw-cali-a rule 1: drop (foreign)\n",
		"- chain filter-tw-cali-b rule 1: " + deleted + " (missing)\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("show --diff does not say %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "\n+ ") + strings.Count(out, "\n- ") + strings.Count(out, "\n~ "); n != 2 {
		t.Errorf("show --diff reports %d differences, want 2:\n%s", n, out)
	}
	t.Logf("show --diff:\n%s", out)

	// Objects added later are listed in creation order, wherever their
	// names sort; show keeps the kernel's order.
	ns.Run(t, "nft", "add", "chain", "inet", "nftep", "aaa-foreign")
	ns.Run(t, "nft", "add", "rule", "inet", "nftep", "aaa-foreign", "meta", "l4proto", "tcp", "tcp", "flags", "syn", "counter", "masquerade", "persistent")
	ns.Run(t, "nft", "add", "set", "inet", "nftep", "aaa-set", "{ type ipv4_addr; }")
	out, _, err = nftep(t, "--netns", ns.Name, "show")
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	want = ns.Run(t, "nft", "list", "table", "inet", "nftep") + ns.Run(t, "nft", "list", "table", "arp", "nftep")
	// nft knows the foreign rule's expressions; nftep prints them as unknown
	// (a persistent masquerade is not nftep's).
	want = strings.Replace(want, "tcp flags syn counter packets 0 bytes 0 masquerade persistent",
		"meta l4proto tcp # unknown expression payload # unknown expression bitwise # unknown expression cmp counter packets 0 bytes 0 # unknown expression masq", 1)
	if diff := cmp.Diff(strings.Split(want, "\n"), strings.Split(out, "\n")); diff != "" {
		t.Errorf("show after foreign additions differs from nft list table (-nft +show):\n%s", diff)
	}
	out, _, err = nftep(t, "--netns", ns.Name, "--run-dir", runDir, "show", "--diff")
	if err != nil {
		t.Fatalf("show --diff: %v", err)
	}
	for _, w := range []string{"+ chain aaa-foreign (foreign, 1 rules)\n", "+ set aaa-set (foreign)\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("show --diff does not say %q:\n%s", w, out)
		}
	}
}
