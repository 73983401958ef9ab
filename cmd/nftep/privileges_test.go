package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
)

// TestBinariesRunNoPrograms: nftep and nftep-felix-driver never run a shell
// or any other program: neither links os/exec, and no non-test source
// starts a process another way.
func TestBinariesRunNoPrograms(t *testing.T) {
	for _, cmd := range []string{".", "../nftep-felix-driver"} {
		out, err := exec.Command("go", "list", "-deps", cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", cmd, err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if pkg == "os/exec" {
				t.Errorf("%s links os/exec", cmd)
			}
		}
	}
	out, _ := exec.Command("grep", "-rlE", "--include=*.go", `syscall\.(Exec|ForkExec|StartProcess)|os\.StartProcess`, "../..").CombinedOutput()
	for _, f := range strings.Fields(string(out)) {
		if !strings.HasSuffix(f, "_test.go") {
			t.Errorf("%s starts a process", f)
		}
	}
}

// buildNftep builds the nftep binary into a directory every user can read.
func buildNftep(t *testing.T) string {
	t.Helper()
	dir := worldReadableDir(t)
	bin := filepath.Join(dir, "nftep")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// worldReadableDir is a temporary directory the nobody user can enter.
func worldReadableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestKernelApplyWithOnlyNetAdmin runs `nftep apply` as the nobody user
// with CAP_NET_ADMIN as its one capability, in a namespace with a pod on a
// veth: the tables, the pod's route and its interface sysctls are all
// programmed, and the run directory and its files are private (0700, 0600).
// Without CAP_NET_ADMIN the same apply fails, saying what is missing.
func TestKernelApplyWithOnlyNetAdmin(t *testing.T) {
	netnstest.RequireRoot(t)
	bin := buildNftep(t)
	dir := worldReadableDir(t)
	state := filepath.Join(dir, "node.yaml")
	demo, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, demo, 0o644); err != nil {
		t.Fatal(err)
	}
	node, pod := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, node, "cali-a", pod, "eth0")
	const nobody = 65534

	apply := func(caps []uintptr, runDir string) (string, error) {
		if err := os.MkdirAll(runDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(runDir, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--run-dir", runDir, "apply", "--state", state)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential:  &syscall.Credential{Uid: nobody, Gid: nobody},
			AmbientCaps: caps,
		}
		// Started from a thread in the node's namespace, the child is
		// born there: no --netns (and no CAP_SYS_ADMIN) needed.
		err := node.Do(cmd.Run)
		return out.String(), err
	}

	out, err := apply(nil, filepath.Join(dir, "run-none"))
	if err == nil {
		t.Fatalf("apply without capabilities succeeded:\n%s", out)
	}
	if !strings.Contains(out, "nftep needs CAP_NET_ADMIN in the network namespace it programs") {
		t.Errorf("apply without CAP_NET_ADMIN does not say what is missing:\n%s", out)
	}
	t.Logf("without CAP_NET_ADMIN: %s", strings.TrimSpace(out))
	if ok, _ := tableExists(node); ok {
		t.Errorf("apply without CAP_NET_ADMIN left a table")
	}

	runDir := filepath.Join(dir, "run")
	out, err = apply([]uintptr{12 /* CAP_NET_ADMIN */}, runDir)
	if err != nil {
		t.Fatalf("apply as nobody with CAP_NET_ADMIN: %v\n%s", err, out)
	}
	if ok, err := tableExists(node); !ok {
		t.Errorf("no table inet nftep after apply: %v", err)
	}
	if routes := node.Run(t, "ip", "route", "show", "dev", "cali-a"); !strings.Contains(routes, "10.65.0.1") {
		t.Errorf("the pod's route is missing:\n%s", routes)
	}
	var proxyARP []byte
	if err := node.Do(func() (err error) {
		proxyARP, err = os.ReadFile("/proc/sys/net/ipv4/conf/cali-a/proxy_arp")
		return err
	}); err != nil || strings.TrimSpace(string(proxyARP)) != "1" {
		t.Errorf("proxy_arp of cali-a: %q, %v; want 1", proxyARP, err)
	}
	fi, err := os.Stat(runDir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("run directory mode %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	files, _ := os.ReadDir(runDir)
	if len(files) == 0 {
		t.Errorf("apply wrote nothing to the run directory")
	}
	for _, f := range files {
		if info, err := f.Info(); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f.Name(), info.Mode().Perm())
		}
	}
}

func tableExists(ns *netnstest.NS) (bool, error) {
	k, err := nft.ReadKernelTable(context.Background(), ns.Fd(), nft.FamilyINet, "nftep")
	if err != nil {
		return false, err
	}
	return k.Exists, nil
}
