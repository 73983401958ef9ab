package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDedent(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\n\t\tchain c {\n\t\t\taccept\n\t\t}\n\t\t", "chain c {\n\taccept\n}\n"},
		{"\n\ta\n\t \n\tb", "a\n\nb"},
		{"no indent\n", "no indent\n"},
	} {
		if got := Dedent(c.in); got != c.want {
			t.Errorf("Dedent(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestGoldenMatches(t *testing.T) {
	if *update {
		t.Skip("-update rewrites instead of comparing")
	}
	path := filepath.Join(t.TempDir(), "case.nft")
	if err := os.WriteFile(path, []byte("table inet t {\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Golden(t, path, "table inet t {\n}\n")
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, "three polls", func() bool { n++; return n == 3 })
}
