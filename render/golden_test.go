package render

import (
	"regexp"
	"strings"
	"testing"

	"github.com/nftep/nftep/internal/testutil"
)

// configFor returns the default configuration adjusted by the case.
func (gc goldenCase) configFor() Config {
	cfg := DefaultConfig()
	if gc.config != nil {
		gc.config(&cfg)
	}
	return cfg
}

// TestGoldens renders every golden case and compares it with its nft text
// in testdata/<case>.nft (goldenFile); `go test -update` rewrites the
// files. Conventions (as in model_test.go): default marks (accept
// 0x00010000, pass 0x00020000, scratch0 0x00080000) except the
// endpoint-mark cases, which use Felix's test marks (accept 0x8, pass 0x10,
// endpoint field 0xff00, non-Cali 0x100) so the marks read as in Felix's
// own tests; workload IDs k8s/default/<pod>/eth0; host interface eth0.
// Policy and profile chains are not rendered here (the policy package owns
// them). Elements are listed in the order nft lists them.
func TestGoldens(t *testing.T) {
	files := map[string]string{}
	for _, gc := range goldenCaseList() {
		file := goldenFile(gc.name)
		if other, ok := files[file]; ok {
			t.Fatalf("cases %q and %q share the golden file %s", other, gc.name, file)
		}
		files[file] = gc.name
		t.Run(gc.name, func(t *testing.T) {
			cfg := gc.configFor()
			outs, extra := gc.render(cfg)
			testutil.Golden(t, file, outputText(cfg, outs, gc.arp, extra...))
		})
	}
}

var notInFileName = regexp.MustCompile(`[^a-z0-9.]+`)

// goldenFile is the file that holds the nft text of the case named name:
// testdata/<name in lower case, other characters than letters, digits and
// dots as dashes>.nft.
func goldenFile(name string) string {
	return "testdata/" + strings.Trim(notInFileName.ReplaceAllString(strings.ToLower(name), "-"), "-") + ".nft"
}
