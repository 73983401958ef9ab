package dataplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFileValidatorOneChange is `run`'s validation of a new version of
// its state file that adds or removes one workload, at 1,000 and 10,000
// workloads: read, parse, fold, Diff against the last valid version and the
// dry run of the change (fileValidator.load). The loop's apply comes on
// top.
func BenchmarkFileValidatorOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			base := benchStateFile(b, n)
			// One more workload, on an interface of its own.
			extra := fmt.Sprintf(`,
{"workloadEndpointUpdate": {"id": {"orchestratorId": "k8s", "workloadId": "demo/extra", "endpointId": "eth0"},
 "endpoint": {"state": "active", "name": "caliextra", "ipv4Nets": ["10.250.0.1/32"], "profileIds": ["kns.demo"]}}}]}%s`, "\n")
			more := append(bytes.TrimSuffix(bytes.TrimSpace(bytes.Clone(base)), []byte("]}")), extra...)
			path := filepath.Join(b.TempDir(), "node.json")
			if err := os.WriteFile(path, base, 0o600); err != nil {
				b.Fatal(err)
			}
			fv := &fileValidator{path: path, opts: &Options{}}
			if _, _, err := fv.load(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				data := base
				if i%2 == 0 {
					data = more
				}
				if err := os.WriteFile(path, data, 0o600); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				_, ch, err := fv.load()
				if err != nil {
					b.Fatal(err)
				}
				if len(ch.msgs) != 1 {
					b.Fatalf("%d changes, want 1", len(ch.msgs))
				}
			}
		})
	}
}
