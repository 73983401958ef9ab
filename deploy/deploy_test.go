// Package deploy holds nftep's packaging (systemd unit, calico-node
// overlay, Containerfile); its tests check them without a cluster.
package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit, with
// ExecStart pointing at a freshly built nftep (verify checks that the
// binary exists). Any warning fails the test: systemd only warns about
// unknown keys.
func TestSystemdUnitVerifies(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found and CI is set: install Debian's systemd package (.ci/run does)")
		}
		t.Skip("systemd-analyze not found: install Debian's systemd package to verify deploy/systemd/nftep.service")
	}
	unit, err := os.ReadFile(filepath.Join("systemd", "nftep.service"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "nftep")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/nftep").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const installed = "/usr/local/bin/nftep"
	if !bytes.Contains(unit, []byte("ExecStart="+installed+" run --state /etc/nftep/node.yaml")) {
		t.Fatalf("ExecStart does not run %s run --state /etc/nftep/node.yaml", installed)
	}
	path := filepath.Join(dir, "nftep.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte(installed), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSystemdUnitPrivileges: the unit grants CAP_NET_ADMIN and nothing
// else, and keeps the hardening docs/operations.md describes.
func TestSystemdUnitPrivileges(t *testing.T) {
	unit := readUnit(t)
	for key, want := range map[string]string{
		"CapabilityBoundingSet": "CAP_NET_ADMIN",
		"AmbientCapabilities":   "CAP_NET_ADMIN",
		"NoNewPrivileges":       "yes",
		"ProtectSystem":         "strict",
		"RuntimeDirectory":      "nftep",
		"Restart":               "on-failure",
	} {
		if got := unit[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	// /proc/sys must stay writable: the per-interface net sysctls.
	if v := unit["ProtectKernelTunables"]; len(v) > 0 && v[0] == "yes" {
		t.Error("ProtectKernelTunables=yes would make /proc/sys/net read-only")
	}
	if exec := strings.Join(unit["ExecStart"], " "); strings.Contains(exec, "--netns") {
		t.Error("ExecStart uses --netns, which needs CAP_SYS_ADMIN")
	}
	docs := readDocs(t)
	for _, c := range append(unit["CapabilityBoundingSet"], unit["AmbientCapabilities"]...) {
		if !strings.Contains(docs, c) {
			t.Errorf("the unit grants %s, which docs/operations.md does not name", c)
		}
	}
}

func readUnit(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("systemd", "nftep.service"))
	if err != nil {
		t.Fatal(err)
	}
	kv := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '[' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		kv[k] = append(kv[k], v)
	}
	return kv
}

func readDocs(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCalicoNodePatch decodes the overlay strictly into k8s.io/api types
// (an unknown or misspelt field fails) and checks how it wires nftep into
// calico-node.
func TestCalicoNodePatch(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("kubernetes", "calico-node-nftep.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		t.Fatalf("strict decode: %v", err)
	}
	if ds.Kind != "DaemonSet" || ds.APIVersion != "apps/v1" || ds.Name != "calico-node" {
		t.Fatalf("patches %s %s %q, want apps/v1 DaemonSet calico-node", ds.APIVersion, ds.Kind, ds.Name)
	}
	spec := ds.Spec.Template.Spec

	vol := find(t, spec.Volumes, func(v corev1.Volume) string { return v.Name }, "nftep-bin")
	if vol.EmptyDir == nil {
		t.Error("nftep-bin is not an emptyDir")
	}
	init := find(t, spec.InitContainers, func(c corev1.Container) string { return c.Name }, "install-nftep")
	initMount := find(t, init.VolumeMounts, func(m corev1.VolumeMount) string { return m.Name }, "nftep-bin")
	if len(init.Command) != 3 || init.Command[0] != "cp" || init.Command[1] != "/usr/local/bin/nftep-felix-driver" ||
		filepath.Dir(init.Command[2]) != initMount.MountPath {
		t.Errorf("init container copies %q, want the driver into %s", init.Command, initMount.MountPath)
	}

	node := find(t, spec.Containers, func(c corev1.Container) string { return c.Name }, "calico-node")
	env := map[string]string{}
	for _, e := range node.Env {
		env[e.Name] = e.Value
	}
	mount := find(t, node.VolumeMounts, func(m corev1.VolumeMount) string { return m.Name }, "nftep-bin")
	if env["FELIX_USEINTERNALDATAPLANEDRIVER"] != "false" {
		t.Errorf("FELIX_USEINTERNALDATAPLANEDRIVER = %q", env["FELIX_USEINTERNALDATAPLANEDRIVER"])
	}
	if want := filepath.Join(mount.MountPath, filepath.Base(init.Command[2])); env["FELIX_DATAPLANEDRIVER"] != want {
		t.Errorf("FELIX_DATAPLANEDRIVER = %q, want %q (the copied driver as calico-node mounts it)", env["FELIX_DATAPLANEDRIVER"], want)
	}
	port := find(t, node.Ports, func(p corev1.ContainerPort) string { return p.Name }, "nftep-metrics")
	if !strings.HasSuffix(env["FELIX_NFTEPMETRICSADDR"], ":"+itoa(port.ContainerPort)) {
		t.Errorf("FELIX_NFTEPMETRICSADDR = %q does not listen on the declared port %d", env["FELIX_NFTEPMETRICSADDR"], port.ContainerPort)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", node.LivenessProbe, "/livez"}, {"readiness", node.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != port.Name {
			t.Errorf("%s probe = %+v, want GET %s on %s", p.name, p.probe, p.path, port.Name)
			continue
		}
		if p.probe.Exec != nil {
			t.Errorf("%s probe keeps an exec handler", p.name)
		}
	}

	// Capabilities: the overlay names only those docs/operations.md does.
	docs := readDocs(t)
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
			continue
		}
		caps := c.SecurityContext.Capabilities
		if len(caps.Add) > 0 {
			t.Errorf("container %s adds capabilities %v; the docs say the overlay adds none", c.Name, caps.Add)
		}
		for _, d := range caps.Drop {
			if !regexp.MustCompile(`drop[^\n]*\b` + string(d) + `\b`).MatchString(docs) {
				t.Errorf("container %s drops %s, which docs/operations.md does not say", c.Name, d)
			}
		}
	}
}

func find[T any](t *testing.T, xs []T, name func(T) string, want string) T {
	t.Helper()
	for _, x := range xs {
		if name(x) == want {
			return x
		}
	}
	t.Fatalf("no %q", want)
	var zero T
	return zero
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// TestContainerfileBuildsLikeCI: the image's build stage runs `make
// build-static`, the target CI runs, and that target builds both binaries
// statically.
func TestContainerfileBuildsLikeCI(t *testing.T) {
	cf, err := os.ReadFile("Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stage string
	var runs []string
	for _, line := range strings.Split(string(cf), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && strings.EqualFold(f[0], "FROM") && strings.EqualFold(f[2], "AS"):
			stage = f[3]
		case len(f) >= 2 && strings.EqualFold(f[0], "FROM"):
			stage = ""
		case len(f) >= 2 && strings.EqualFold(f[0], "RUN") && stage == "build":
			runs = append(runs, strings.Join(f[1:], " "))
		}
	}
	if !slices.ContainsFunc(runs, func(r string) bool { return strings.HasPrefix(r, "make build-static") }) {
		t.Errorf("the build stage's RUN lines %q do not run make build-static", runs)
	}
	ci, err := os.ReadFile(filepath.Join("..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make build-static$`).Match(ci) {
		t.Error(".ci/run does not run make build-static")
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^build-static:\n\t(.*)$`).FindSubmatch(mk)
	if recipe == nil {
		t.Fatal("no build-static target in the Makefile")
	}
	want := "CGO_ENABLED=0 $(GO) build -trimpath -o $(STATIC_DIR)/ ./cmd/nftep ./cmd/nftep-felix-driver"
	if string(recipe[1]) != want {
		t.Errorf("build-static runs %q, want %q", recipe[1], want)
	}
	if !regexp.MustCompile(`COPY --from=build /out/nftep /out/nftep-felix-driver `).Match(cf) ||
		!strings.Contains(string(cf), "make build-static STATIC_DIR=/out") {
		t.Error("the final stage does not copy the binaries build-static wrote")
	}
}
