package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
)

// withEnv makes the commands see env as the process environment.
func withEnv(t *testing.T, env ...string) {
	t.Helper()
	old := environ
	environ = func() []string { return env }
	t.Cleanup(func() { environ = old })
}

func TestStatusJSON(t *testing.T) {
	withEnv(t)
	dir := t.TempDir()
	want := dataplane.Status{
		Mode: "run", Source: "/etc/nftep/node.yaml", Table: "nftep", PID: 42, InSync: true,
		Updated:   time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		LastApply: time.Date(2026, 1, 2, 3, 4, 4, 0, time.UTC),
		Endpoints: []dataplane.EndpointStatus{{Kind: "workload", ID: "k8s/ns/a/eth0", Status: "up"}},
	}
	data, _ := json.Marshal(want)
	if err := dataplane.WriteFileAtomic(filepath.Join(dir, dataplane.StatusFileName), data); err != nil {
		t.Fatal(err)
	}
	out, _, err := nftep(t, "status", "--run-dir", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got dataplane.Status
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status --json (-want +got):\n%s", diff)
	}

	// A dry run prints the same shape.
	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	out, _, err = nftep(t, "status", "--state", demoState, "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Mode != "dry-run" || len(got.Endpoints) == 0 {
		t.Errorf("status --state --json = %+v, %v\n%s", got, err, out)
	}
}

// TestSettingsFromFileAndEnvironment: --config and FELIX_ variables reach
// the dataplane (the environment wins), and a malformed value fails the
// command naming the key.
func TestSettingsFromFileAndEnvironment(t *testing.T) {
	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	cfg := filepath.Join(t.TempDir(), "felix.cfg")
	if err := os.WriteFile(cfg, []byte("[global]\nNftepTableName = blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	withEnv(t)
	if out, _, err := nftep(t, "--config", cfg, "show", "--state", demoState); err != nil || !strings.Contains(out, "table inet blue {") {
		t.Errorf("--config: %v\n%.300s", err, out)
	}
	withEnv(t, "FELIX_NFTEPTABLENAME=green", "FELIX_LOGSEVERITYSCREEN=Info")
	out, stderr, err := nftep(t, "--config", cfg, "show", "--state", demoState)
	if err != nil || !strings.Contains(out, "table inet green {") {
		t.Errorf("environment over --config: %v\n%.300s", err, out)
	}
	if !strings.Contains(stderr, "settings nftep does not know are ignored") || !strings.Contains(stderr, "FELIX_LOGSEVERITYSCREEN") {
		t.Errorf("no warning about the unknown setting:\n%s", stderr)
	}
	withEnv(t, "FELIX_IPV6SUPPORT=perhaps")
	if _, _, err := nftep(t, "show", "--state", demoState); err == nil || !strings.Contains(err.Error(), `Ipv6Support="perhaps": not a boolean`) {
		t.Errorf("malformed environment value: %v", err)
	}
	withEnv(t)
	if _, _, err := nftep(t, "run", "--state", demoState, "--metrics-addr", "nine"); err == nil || !strings.Contains(err.Error(), "bad port") {
		t.Errorf("bad --metrics-addr: %v", err)
	}
}

// TestKernelRunServesMetricsAndHealth runs `nftep run` on the demo state in
// a namespace of its own, with metrics on: /readyz turns 200 after the
// first apply, /livez is 200, and /metrics carries the apply and endpoints.
func TestKernelRunServesMetricsAndHealth(t *testing.T) {
	ns := netnstest.New(t)
	withEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	demoState := filepath.Join("..", "..", "examples", "demo.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr strings.Builder
	go func() {
		done <- run(ctx, []string{"--netns", ns.Name, "--run-dir", t.TempDir(), "run", "--state", demoState, "--metrics-addr", addr}, io.Discard, &stderr)
	}()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := get("/readyz")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("/readyz never 200 (last %d)\n%s", code, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := get("/livez"); code != http.StatusOK {
		t.Errorf("/livez: %d %s", code, body)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`nftep_apply_duration_seconds_count{table="inet"} `,
		`nftep_endpoints{kind="workload",status="down"} `,
		"nftep_last_apply_success_timestamp_seconds ",
		"go_goroutines ",
	} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "felix_int_dataplane") {
		t.Error("Felix's metric names in run mode")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
}
