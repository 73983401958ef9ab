package render

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// configFor returns the default configuration adjusted by the case.
func (gc goldenCase) configFor() Config {
	cfg := DefaultConfig()
	if gc.config != nil {
		gc.config(&cfg)
	}
	return cfg
}

// TestGoldens renders every golden case and compares it with its nft text.
func TestGoldens(t *testing.T) {
	var printed strings.Builder
	for _, gc := range goldenCaseList() {
		t.Run(gc.name, func(t *testing.T) {
			cfg := gc.configFor()
			outs, extra := gc.render(cfg)
			got := outputText(cfg, outs, gc.arp, extra...)
			if printGoldens != "" {
				fmt.Fprintf(&printed, "\t%q: `\n%s`,\n", gc.name, indentLines(got, "\t\t"))
				return
			}
			want, ok := goldenWants[gc.name]
			if !ok {
				t.Fatalf("%s: no golden text for %q", gc.line, gc.name)
			}
			assertGolden(t, gc.line, want, got)
		})
	}
	if printGoldens != "" {
		if err := os.WriteFile(printGoldens, []byte(printed.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func indentLines(s, ind string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = ind + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// goldenWants holds each case's nft text. Conventions (as in model_test.go):
// default marks (accept 0x00010000, pass 0x00020000, scratch0 0x00080000)
// except the endpoint-mark cases, which use Felix's test marks (accept 0x8,
// pass 0x10, endpoint field 0xff00, non-Cali 0x100) so the marks read as in
// Felix's own tests; workload IDs k8s/default/<pod>/eth0; host interface
// eth0. Policy and profile chains are not rendered here (the policy package
// owns them). Elements are listed in the order nft lists them.
var goldenWants = map[string]string{
	"41 minimal workload": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"41 minimal workload with endpoint marks": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xffffffe7 comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xffffffe7 comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-sm-cali1234 {
			meta mark set meta mark & 0xffffd4ff | 0x0000d400 comment "endpoint k8s/default/pod-1/eth0: Set endpoint mark"
		}
		map filter-epmark {
			type ifname : verdict
			comment "interface → set-endpoint-mark chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-sm-cali1234 }
		}
		map filter-from-epmark {
			type mark : verdict
			comment "endpoint mark → from-endpoint chain"
			elements = { 0x0000d400 comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"42 disabled workload": `
		chain filter-tw-cali1234 {
			drop comment "endpoint k8s/default/pod-1/eth0: Endpoint admin disabled"
		}
		chain filter-fw-cali1234 {
			drop comment "endpoint k8s/default/pod-1/eth0: Endpoint admin disabled"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"43 fully loaded": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.ai comment "endpoint k8s/default/pod-1/eth0: Policy default.ai"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.bi comment "endpoint k8s/default/pod-1/eth0: Policy default.bi"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			jump filter-pri-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			jump filter-pri-prof2 comment "endpoint k8s/default/pod-1/eth0: Profile prof2"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-default.ae comment "endpoint k8s/default/pod-1/eth0: Policy default.ae"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-default.be comment "endpoint k8s/default/pod-1/eth0: Policy default.be"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			jump filter-pro-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			jump filter-pro-prof2 comment "endpoint k8s/default/pod-1/eth0: Profile prof2"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"43 fully loaded with flow logs": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.ai comment "endpoint k8s/default/pod-1/eth0: Policy default.ai"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.bi comment "endpoint k8s/default/pod-1/eth0: Policy default.bi"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 log prefix "DPI|default" group 1 comment "endpoint k8s/default/pod-1/eth0: Log end of tier default"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			jump filter-pri-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			jump filter-pri-prof2 comment "endpoint k8s/default/pod-1/eth0: Profile prof2"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			log prefix "DRI" group 1 comment "endpoint k8s/default/pod-1/eth0: Log no profile matched"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-default.ae comment "endpoint k8s/default/pod-1/eth0: Policy default.ae"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-default.be comment "endpoint k8s/default/pod-1/eth0: Policy default.be"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 log prefix "DPE|default" group 2 comment "endpoint k8s/default/pod-1/eth0: Log end of tier default"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			jump filter-pro-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			jump filter-pro-prof2 comment "endpoint k8s/default/pod-1/eth0: Profile prof2"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			log prefix "DRE" group 2 comment "endpoint k8s/default/pod-1/eth0: Log no profile matched"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"43 fully loaded, one selector: a group chain": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-gi-SIglQIxEhFHNB-eUKfai comment "endpoint k8s/default/pod-1/eth0: Policy group SIglQIxEhFHNB-eUKfai: 2 policies of tier default"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			jump filter-pri-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			jump filter-pri-prof2 comment "endpoint k8s/default/pod-1/eth0: Profile prof2"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-go-CiyjBL21RtOjyhijeDbL comment "endpoint k8s/default/pod-1/eth0: Policy group CiyjBL21RtOjyhijeDbL: 2 policies of tier default"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			jump filter-pro-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			jump filter-pro-prof2 comment "endpoint k8s/default/pod-1/eth0: Profile prof2"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-gi-SIglQIxEhFHNB-eUKfai {
			jump filter-pi-default.ai comment "Policy default.ai"
			meta mark & 0x00030000 == 0x00000000 jump filter-pi-default.bi comment "Policy default.bi"
		}
		chain filter-go-CiyjBL21RtOjyhijeDbL {
			jump filter-po-default.ae comment "Policy default.ae"
			meta mark & 0x00030000 == 0x00000000 jump filter-po-default.be comment "Policy default.be"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"44 staged policies": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.ai comment "endpoint k8s/default/pod-1/eth0: Policy default.ai"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 log prefix "DPI|default" group 1 comment "endpoint k8s/default/pod-1/eth0: Log end of tier default"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			log prefix "DRI" group 1 comment "endpoint k8s/default/pod-1/eth0: Log no profile matched"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 log prefix "PPE|default" group 2 comment "endpoint k8s/default/pod-1/eth0: Log pass at end of tier default"
			log prefix "DRE" group 2 comment "endpoint k8s/default/pod-1/eth0: Log no profile matched"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"45 tier default action pass": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier tier1"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-tier1.ai comment "endpoint k8s/default/pod-1/eth0: Policy tier1.ai"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			jump filter-pri-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			jump filter-pro-prof1 comment "endpoint k8s/default/pod-1/eth0: Profile prof1"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if profile accepted"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"46 host filter chains": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xffffffe7 comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xffffffef comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00000010 == 0x00000000 jump filter-po-default.ae comment "host endpoint hep1: Policy default.ae"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if policy accepted"
			meta mark & 0x00000010 == 0x00000000 drop comment "host endpoint hep1: End of tier default. Drop if no policies passed packet"
			jump filter-pro-prof1 comment "host endpoint hep1: Profile prof1"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if profile accepted"
			drop comment "host endpoint hep1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xffffffe7 comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xffffffef comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00000010 == 0x00000000 jump filter-pi-default.ai comment "host endpoint hep1: Policy default.ai"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if policy accepted"
			meta mark & 0x00000010 == 0x00000000 drop comment "host endpoint hep1: End of tier default. Drop if no policies passed packet"
			jump filter-pri-prof1 comment "host endpoint hep1: Profile prof1"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if profile accepted"
			drop comment "host endpoint hep1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			meta mark set meta mark & 0xffffffe7 comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xffffffef comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00000010 == 0x00000000 jump filter-po-default.afe comment "host endpoint hep1: Policy default.afe"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if policy accepted"
			meta mark & 0x00000010 == 0x00000000 drop comment "host endpoint hep1: End of tier default. Drop if no policies passed packet"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			meta mark set meta mark & 0xffffffe7 comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xffffffef comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00000010 == 0x00000000 jump filter-pi-default.afi comment "host endpoint hep1: Policy default.afi"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if policy accepted"
			meta mark & 0x00000010 == 0x00000000 drop comment "host endpoint hep1: End of tier default. Drop if no policies passed packet"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00000008 comment "host endpoint hep1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xffffffe7 comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xffffffef comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00000010 == 0x00000000 jump mangle-po-default.ae comment "host endpoint hep1: Policy default.ae"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if policy accepted"
			meta mark & 0x00000010 == 0x00000000 drop comment "host endpoint hep1: End of tier default. Drop if no policies passed packet"
			jump mangle-pro-prof1 comment "host endpoint hep1: Profile prof1"
			meta mark & 0x00000008 == 0x00000008 return comment "host endpoint hep1: Return if profile accepted"
			drop comment "host endpoint hep1: Drop if no profiles matched"
		}
		chain filter-sm-eth0 {
			meta mark set meta mark & 0xffffa2ff | 0x0000a200 comment "host endpoint hep1: Set endpoint mark"
		}
		map filter-epmark {
			type ifname : verdict
			comment "interface → set-endpoint-mark chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-sm-eth0 }
		}
		map filter-from-epmark {
			type mark : verdict
			comment "endpoint mark → from-endpoint chain"
			elements = { 0x0000a200 comment "host endpoint hep1" : goto filter-fhfw-eth0 }
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-thfw-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto mangle-th-eth0 }
		}
`,
	"47 raw untracked and mangle pre-DNAT": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			drop comment "host endpoint hep1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			drop comment "host endpoint hep1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint hep1: Allow forwarded traffic by default"
			return comment "host endpoint hep1: Return for accepted forward traffic"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint hep1: Allow forwarded traffic by default"
			return comment "host endpoint hep1: Return for accepted forward traffic"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint hep1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			drop comment "host endpoint hep1: Drop if no profiles matched"
		}
		chain mangle-fh-eth0 {
			ct state established,related accept comment "host endpoint hep1: Allow established and related"
			ct state invalid drop comment "host endpoint hep1: Drop conntrack invalid"
			jump mangle-failsafe-in comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump mangle-pi-default.pi comment "host endpoint hep1: Policy default.pi"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep1: Return if policy accepted"
		}
		chain raw-th-eth0 {
			jump raw-failsafe-out comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump raw-po-default.ue comment "host endpoint hep1: Policy default.ue"
			meta mark & 0x00010000 == 0x00010000 notrack comment "host endpoint hep1: Untrack if policy accepted"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep1: Return if policy accepted"
		}
		chain raw-fh-eth0 {
			jump raw-failsafe-in comment "host endpoint hep1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint hep1: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump raw-pi-default.ui comment "host endpoint hep1: Policy default.ui"
			meta mark & 0x00010000 == 0x00010000 notrack comment "host endpoint hep1: Untrack if policy accepted"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep1: Return if policy accepted"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-thfw-eth0 }
		}
		map mangle-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto mangle-fh-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto mangle-th-eth0 }
		}
		map raw-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto raw-fh-eth0 }
		}
		map raw-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto raw-th-eth0 }
		}
`,
	"48 QoS limits": `
		chain filter-tw-cali1234 {
			limit rate over 2000/second burst 4000 packets drop comment "endpoint k8s/default/pod-1/eth0: Drop packets over ingress packet rate limit"
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta l4proto tcp ct count over 10 reject with tcp reset comment "endpoint k8s/default/pod-1/eth0: Reject connections over ingress connection limit"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			limit rate over 1000/second burst 2000 packets drop comment "endpoint k8s/default/pod-1/eth0: Drop packets over egress packet rate limit"
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta l4proto tcp ct count over 20 reject with tcp reset comment "endpoint k8s/default/pod-1/eth0: Reject connections over egress connection limit"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"49 no invalid check, allow action return": `
		chain filter-tw-cali1234 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "endpoint k8s/default/pod-1/eth0: Mark established and related as accepted"
			ct state established,related return comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "endpoint k8s/default/pod-1/eth0: Mark established and related as accepted"
			ct state established,related return comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"50 VXLAN allowed": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"50 IPIP allowed, reject": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid reject comment "endpoint k8s/default/pod-1/eth0: Reject conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			reject comment "endpoint k8s/default/pod-1/eth0: Reject if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid reject comment "endpoint k8s/default/pod-1/eth0: Reject conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 reject comment "endpoint k8s/default/pod-1/eth0: Reject VXLAN encapped packets originating in workloads"
			reject comment "endpoint k8s/default/pod-1/eth0: Reject if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"51 policy group": `
		chain filter-tw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-gi-3dxOkMM3zXHKUSCe91N9 comment "endpoint k8s/default/pod-1/eth0: Policy group 3dxOkMM3zXHKUSCe91N9: 7 policies of tier default"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1234 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-default.single comment "endpoint k8s/default/pod-1/eth0: Policy default.single"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-gi-3dxOkMM3zXHKUSCe91N9 {
			jump filter-pi-default.p1 comment "Policy default.p1"
			meta mark & 0x00030000 == 0x00000000 jump filter-pi-default.p2 comment "Policy default.p2"
			meta mark & 0x00030000 == 0x00000000 jump filter-pi-default.p3 comment "Policy default.p3"
			meta mark & 0x00030000 == 0x00000000 jump filter-pi-default.p4 comment "Policy default.p4"
			meta mark & 0x00030000 == 0x00000000 jump filter-pi-default.p5 comment "Policy default.p5"
			meta mark & 0x00030000 != 0x00000000 return comment "Return on verdict"
			jump filter-pi-default.p6 comment "Policy default.p6"
			meta mark & 0x00030000 == 0x00000000 jump filter-pi-default.p7 comment "Policy default.p7"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1234 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1234" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1234 }
		}
`,
	"52 workload dispatch": `
		chain filter-from-wl-dispatch {
			iifname vmap @filter-from-wl comment "Dispatch to endpoint chain by interface"
			drop comment "Unknown interface"
		}
		chain filter-to-wl-dispatch {
			oifname vmap @filter-to-wl comment "Dispatch to endpoint chain by interface"
			drop comment "Unknown interface"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "tap1" comment "endpoint k8s/default/tap1/eth0" : goto filter-fw-tap1,
				     "cali2333" comment "endpoint k8s/default/cali2333/eth0" : goto filter-fw-cali2333,
				     "cali1234" comment "endpoint k8s/default/cali1234/eth0" : goto filter-fw-cali1234,
				     "cali2444" comment "endpoint k8s/default/cali2444/eth0" : goto filter-fw-cali2444 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "tap1" comment "endpoint k8s/default/tap1/eth0" : goto filter-tw-tap1,
				     "cali2333" comment "endpoint k8s/default/cali2333/eth0" : goto filter-tw-cali2333,
				     "cali1234" comment "endpoint k8s/default/cali1234/eth0" : goto filter-tw-cali1234,
				     "cali2444" comment "endpoint k8s/default/cali2444/eth0" : goto filter-tw-cali2444 }
		}
`,
	"52 endpoint mark dispatch": `
		chain filter-epmark-dispatch {
			iifname vmap @filter-epmark comment "Set the endpoint mark of the input interface"
			iifname "cali*" drop comment "Unknown endpoint"
			iifname "tap*" drop comment "Unknown endpoint"
			meta mark set meta mark & 0xffff01ff | 0x00000100 comment "Non-Cali endpoint mark"
		}
		chain filter-from-epmark-dispatch {
			meta mark & 0x0000ff00 vmap @filter-from-epmark comment "Dispatch to endpoint chain by endpoint mark"
			drop comment "Unknown interface"
		}
		chain filter-forward-check {
			ct state established,related return comment "Established IPVS connections were checked on their first packet"
			tcp dport 30000-32767 goto filter-epmark-dispatch comment "To kubernetes NodePort service"
			udp dport 30000-32767 goto filter-epmark-dispatch comment "To kubernetes NodePort service"
		}
		chain filter-forward-epmark {
			meta mark & 0x0000ff00 != 0x00000100 jump filter-from-epmark-dispatch comment "From endpoint policy"
			oifname "cali*" jump filter-to-wl-dispatch comment "To workload"
			oifname "tap*" jump filter-to-wl-dispatch comment "To workload"
			jump filter-to-hep-fwd-dispatch comment "To host endpoint forward policy"
			meta mark set meta mark & 0xffff00ff comment "Clear endpoint mark"
			meta mark & 0x00000008 == 0x00000008 accept comment "Policy explicitly accepted packet"
		}
		map filter-epmark {
			type ifname : verdict
			comment "interface → set-endpoint-mark chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-sm-eth0,
				     "cali2333" comment "endpoint k8s/default/cali2333/eth0" : goto filter-sm-cali2333,
				     "cali1234" comment "endpoint k8s/default/cali1234/eth0" : goto filter-sm-cali1234,
				     "cali2444" comment "endpoint k8s/default/cali2444/eth0" : goto filter-sm-cali2444 }
		}
		map filter-from-epmark {
			type mark : verdict
			comment "endpoint mark → from-endpoint chain"
			elements = { 0x00005200 comment "endpoint k8s/default/cali2444/eth0" : goto filter-fw-cali2444, 0x0000a200 comment "host endpoint hep1" : goto filter-fhfw-eth0, 0x0000a700 comment "endpoint k8s/default/cali2333/eth0" : goto filter-fw-cali2333, 0x0000d400 comment "endpoint k8s/default/cali1234/eth0" : goto filter-fw-cali1234 }
		}
`,
	"53 host dispatch without *": `
		chain filter-from-hep-dispatch {
			iifname vmap @filter-from-hep comment "Dispatch to endpoint chain by interface"
		}
		chain filter-to-hep-dispatch {
			oifname vmap @filter-to-hep comment "Dispatch to endpoint chain by interface"
		}
		chain filter-from-hep-fwd-dispatch {
			iifname vmap @filter-from-hep-fwd comment "Dispatch to endpoint chain by interface"
		}
		chain filter-to-hep-fwd-dispatch {
			oifname vmap @filter-to-hep-fwd comment "Dispatch to endpoint chain by interface"
		}
		chain mangle-from-hep-dispatch {
			iifname vmap @mangle-from-hep comment "Dispatch to endpoint chain by interface"
		}
		chain mangle-to-hep-dispatch {
			oifname vmap @mangle-to-hep comment "Dispatch to endpoint chain by interface"
		}
		chain raw-from-hep-dispatch {
			iifname vmap @raw-from-hep comment "Dispatch to endpoint chain by interface"
		}
		chain raw-to-hep-dispatch {
			oifname vmap @raw-to-hep comment "Dispatch to endpoint chain by interface"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto filter-thfw-eth0 }
		}
		map mangle-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto mangle-fh-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto mangle-th-eth0 }
		}
		map raw-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto raw-fh-eth0 }
		}
		map raw-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep1" : goto raw-th-eth0 }
		}
`,
	"53 host dispatch with *": `
		chain filter-th-any-interface-at-all {
			ct state established,related accept comment "host endpoint hep-star: Allow established and related"
			ct state invalid drop comment "host endpoint hep-star: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint hep-star: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep-star: Clear accept and pass marks"
			drop comment "host endpoint hep-star: Drop if no profiles matched"
		}
		chain filter-fh-any-interface-at-all {
			ct state established,related accept comment "host endpoint hep-star: Allow established and related"
			ct state invalid drop comment "host endpoint hep-star: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint hep-star: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep-star: Clear accept and pass marks"
			drop comment "host endpoint hep-star: Drop if no profiles matched"
		}
		chain filter-thfw-any-interface-at-all {
			ct state established,related accept comment "host endpoint hep-star: Allow established and related"
			ct state invalid drop comment "host endpoint hep-star: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep-star: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint hep-star: Allow forwarded traffic by default"
			return comment "host endpoint hep-star: Return for accepted forward traffic"
		}
		chain filter-fhfw-any-interface-at-all {
			ct state established,related accept comment "host endpoint hep-star: Allow established and related"
			ct state invalid drop comment "host endpoint hep-star: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep-star: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint hep-star: Allow forwarded traffic by default"
			return comment "host endpoint hep-star: Return for accepted forward traffic"
		}
		chain mangle-th-any-interface-at-all {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint hep-star: Mark established and related as accepted"
			ct state established,related return comment "host endpoint hep-star: Allow established and related"
			ct state invalid drop comment "host endpoint hep-star: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint hep-star: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep-star: Clear accept and pass marks"
			drop comment "host endpoint hep-star: Drop if no profiles matched"
		}
		chain mangle-fh-any-interface-at-all {
			ct state established,related accept comment "host endpoint hep-star: Allow established and related"
			ct state invalid drop comment "host endpoint hep-star: Drop conntrack invalid"
			jump mangle-failsafe-in comment "host endpoint hep-star: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep-star: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint hep-star: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump mangle-pi-default.p comment "host endpoint hep-star: Policy default.p"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep-star: Return if policy accepted"
		}
		chain filter-from-hep-dispatch {
			iifname vmap @filter-from-hep comment "Dispatch to endpoint chain by interface"
			goto filter-fh-any-interface-at-all comment "Host endpoint *"
		}
		chain filter-to-hep-dispatch {
			oifname vmap @filter-to-hep comment "Dispatch to endpoint chain by interface"
			goto filter-th-any-interface-at-all comment "Host endpoint *"
		}
		chain filter-from-hep-fwd-dispatch {
			iifname vmap @filter-from-hep-fwd comment "Dispatch to endpoint chain by interface"
			goto filter-fhfw-any-interface-at-all comment "Host endpoint *"
		}
		chain filter-to-hep-fwd-dispatch {
			oifname vmap @filter-to-hep-fwd comment "Dispatch to endpoint chain by interface"
			goto filter-thfw-any-interface-at-all comment "Host endpoint *"
		}
		chain mangle-from-hep-dispatch {
			iifname vmap @mangle-from-hep comment "Dispatch to endpoint chain by interface"
			goto mangle-fh-any-interface-at-all comment "Host endpoint *"
		}
		chain mangle-to-hep-dispatch {
			oifname vmap @mangle-to-hep comment "Dispatch to endpoint chain by interface"
			oifname "cali*" return comment "Skip egress WHEP policy for traffic to local workload"
			oifname "tap*" return comment "Skip egress WHEP policy for traffic to local workload"
			goto mangle-th-any-interface-at-all comment "Host endpoint *"
		}
		chain raw-from-hep-dispatch {
			iifname vmap @raw-from-hep comment "Dispatch to endpoint chain by interface"
		}
		chain raw-to-hep-dispatch {
			oifname vmap @raw-to-hep comment "Dispatch to endpoint chain by interface"
		}
`,
	"10.1-3 host endpoint with tierA": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint id1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump mangle-po-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-thfw-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto mangle-th-eth0 }
		}
`,
	"10.1-7 untracked host endpoint": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint id1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain raw-th-eth0 {
			jump raw-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump raw-po-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 notrack comment "host endpoint id1: Untrack if policy accepted"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
		}
		chain raw-fh-eth0 {
			jump raw-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump raw-pi-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 notrack comment "host endpoint id1: Untrack if policy accepted"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-thfw-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto mangle-th-eth0 }
		}
		map raw-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto raw-fh-eth0 }
		}
		map raw-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto raw-th-eth0 }
		}
`,
	"10.1-8 apply-on-forward host endpoint": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint id1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-thfw-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto mangle-th-eth0 }
		}
`,
	"10.1-8 pre-DNAT host endpoint": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint id1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain mangle-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump mangle-pi-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-thfw-eth0 }
		}
		map mangle-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto mangle-fh-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto mangle-th-eth0 }
		}
`,
	"10.1-9 ingress-only host endpoint": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint id1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-thfw-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto mangle-th-eth0 }
		}
`,
	"10.1-9 egress-only host endpoint": `
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint id1: Allow forwarded traffic by default"
			return comment "host endpoint id1: Return for accepted forward traffic"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint id1: Mark established and related as accepted"
			ct state established,related return comment "host endpoint id1: Allow established and related"
			ct state invalid drop comment "host endpoint id1: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint id1: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint id1: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint id1: Start of tier tierA"
			meta mark & 0x00020000 == 0x00000000 jump mangle-po-tierA.polA comment "host endpoint id1: Policy tierA.polA"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint id1: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint id1: End of tier tierA. Drop if no policies passed packet"
			drop comment "host endpoint id1: Drop if no profiles matched"
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-fhfw-eth0 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto filter-thfw-eth0 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint id1" : goto mangle-th-eth0 }
		}
`,
	"rpf skip and arp": `
		chain filter-arp-cali23456-cd {
			oifname "cali23456-cd" arp operation reply arp saddr ip 10.65.0.7 drop comment "endpoint k8s/default/pod-7/eth0: Drop proxy-ARP reply claiming its own address"
		}
		map filter-arp {
			type ifname : verdict
			comment "workload interface → ARP suppression chain"
			elements = { "cali23456-cd" comment "endpoint k8s/default/pod-7/eth0" : goto filter-arp-cali23456-cd }
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali23456-cd" comment "endpoint k8s/default/pod-7/eth0" : goto filter-fw-cali23456-cd }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali23456-cd" comment "endpoint k8s/default/pod-7/eth0" : goto filter-tw-cali23456-cd }
		}
		set raw-rpf-skip-v4 {
			type ifname . ipv4_addr
			flags interval
			comment "workload interface . allowed spoofed IPv4 source"
			elements = { "cali23456-cd" . 8.8.8.8 comment "endpoint k8s/default/pod-7/eth0" }
		}
		set raw-rpf-skip-v6 {
			type ifname . ipv6_addr
			flags interval
			comment "workload interface . allowed spoofed IPv6 source"
			elements = { "cali23456-cd" . 2001:feed::/64 comment "endpoint k8s/default/pod-7/eth0" }
		}
`,
	"arp suppression, several addresses": `
		chain filter-arp-cali1 {
			oifname "cali1" arp operation reply arp saddr ip 10.65.0.7 drop comment "endpoint k8s/default/pod-8/eth0: Drop proxy-ARP reply claiming its own address"
			oifname "cali1" arp operation reply arp saddr ip 10.65.1.9 drop comment "endpoint k8s/default/pod-8/eth0: Drop proxy-ARP reply claiming its own address"
			oifname "cali1" arp operation reply arp saddr ip 192.168.3.4 drop comment "endpoint k8s/default/pod-8/eth0: Drop proxy-ARP reply claiming its own address"
		}
		map filter-arp {
			type ifname : verdict
			comment "workload interface → ARP suppression chain"
			elements = { "cali1" comment "endpoint k8s/default/pod-8/eth0" : goto filter-arp-cali1 }
		}
`,
	"hostile names and overlapping spoofed prefixes": `
		chain filter-tw-cali1 {
			ct state established,related accept comment "endpoint k8s_/ns/pod_/e_0: Allow established and related"
			ct state invalid drop comment "endpoint k8s_/ns/pod_/e_0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s_/ns/pod_/e_0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s_/ns/pod_/e_0: Start of tier t_x"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-_hohE1HO18QX9ut22bDcJM1WyjvXOl_Toq3cJi6PXAm0 comment "endpoint k8s_/ns/pod_/e_0: Policy t_x.p_q_"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s_/ns/pod_/e_0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 log prefix "DPI|t_x" group 1 comment "endpoint k8s_/ns/pod_/e_0: Log end of tier t_x"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s_/ns/pod_/e_0: End of tier t_x. Drop if no policies passed packet"
			jump filter-pri-_wCB6TBML5lKOHdRlm-bbM5lIEPuaeq6Q78d89pDIrSM comment "endpoint k8s_/ns/pod_/e_0: Profile prof__"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s_/ns/pod_/e_0: Return if profile accepted"
			log prefix "DRI" group 1 comment "endpoint k8s_/ns/pod_/e_0: Log no profile matched"
			drop comment "endpoint k8s_/ns/pod_/e_0: Drop if no profiles matched"
		}
		chain filter-fw-cali1 {
			ct state established,related accept comment "endpoint k8s_/ns/pod_/e_0: Allow established and related"
			ct state invalid drop comment "endpoint k8s_/ns/pod_/e_0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s_/ns/pod_/e_0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s_/ns/pod_/e_0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s_/ns/pod_/e_0: Drop IPinIP encapped packets originating in workloads"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s_/ns/pod_/e_0: Start of tier é_éééééééééééééééééééééééééééééééééééééééé"
			meta mark & 0x00020000 == 0x00000000 jump filter-po-_D-nK2FegUHpY_bUv7JS4VA25f9gS3GX_7aJFHphM3VU comment "endpoint k8s_/ns/pod_/e_0: Policy é_éééééééééééééééééééééééééééééééééééééééé.pol"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s_/ns/pod_/e_0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 log prefix "DPE|é_é__8or-W5Bg1CgXuujr0qDvvN0fpiR7k5BIpax-1scAH_ééééé" group 2 comment "endpoint k8s_/ns/pod_/e_0: Log end of tier é_éééééééééééééééééééééééééééééééééééééééé"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s_/ns/pod_/e_0: End of tier é_éééééééééééééééééééééééééééééééééééééééé. Drop"
			jump filter-pro-_wCB6TBML5lKOHdRlm-bbM5lIEPuaeq6Q78d89pDIrSM comment "endpoint k8s_/ns/pod_/e_0: Profile prof__"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s_/ns/pod_/e_0: Return if profile accepted"
			log prefix "DRE" group 2 comment "endpoint k8s_/ns/pod_/e_0: Log no profile matched"
			drop comment "endpoint k8s_/ns/pod_/e_0: Drop if no profiles matched"
		}
		chain filter-arp-cali1 {
			oifname "cali1" arp operation reply arp saddr ip 10.65.0.7 drop comment "endpoint k8s_/ns/pod_/e_0: Drop proxy-ARP reply claiming its own address"
		}
		chain filter-th-eth0 {
			ct state established,related accept comment "host endpoint hep___: Allow established and related"
			ct state invalid drop comment "host endpoint hep___: Drop conntrack invalid"
			jump filter-failsafe-out comment "host endpoint hep___: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep___: Clear accept and pass marks"
			jump filter-pro-_wCB6TBML5lKOHdRlm-bbM5lIEPuaeq6Q78d89pDIrSM comment "host endpoint hep___: Profile prof__"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep___: Return if profile accepted"
			log prefix "DRE" group 2 comment "host endpoint hep___: Log no profile matched"
			drop comment "host endpoint hep___: Drop if no profiles matched"
		}
		chain filter-fh-eth0 {
			ct state established,related accept comment "host endpoint hep___: Allow established and related"
			ct state invalid drop comment "host endpoint hep___: Drop conntrack invalid"
			jump filter-failsafe-in comment "host endpoint hep___: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep___: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "host endpoint hep___: Start of tier t_x"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-_hohE1HO18QX9ut22bDcJM1WyjvXOl_Toq3cJi6PXAm0 comment "host endpoint hep___: Policy t_x.p_q_"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep___: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 log prefix "DPI|t_x" group 1 comment "host endpoint hep___: Log end of tier t_x"
			meta mark & 0x00020000 == 0x00000000 drop comment "host endpoint hep___: End of tier t_x. Drop if no policies passed packet"
			jump filter-pri-_wCB6TBML5lKOHdRlm-bbM5lIEPuaeq6Q78d89pDIrSM comment "host endpoint hep___: Profile prof__"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep___: Return if profile accepted"
			log prefix "DRI" group 1 comment "host endpoint hep___: Log no profile matched"
			drop comment "host endpoint hep___: Drop if no profiles matched"
		}
		chain filter-thfw-eth0 {
			ct state established,related accept comment "host endpoint hep___: Allow established and related"
			ct state invalid drop comment "host endpoint hep___: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep___: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint hep___: Allow forwarded traffic by default"
			return comment "host endpoint hep___: Return for accepted forward traffic"
		}
		chain filter-fhfw-eth0 {
			ct state established,related accept comment "host endpoint hep___: Allow established and related"
			ct state invalid drop comment "host endpoint hep___: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep___: Clear accept and pass marks"
			meta mark set meta mark | 0x00010000 comment "host endpoint hep___: Allow forwarded traffic by default"
			return comment "host endpoint hep___: Return for accepted forward traffic"
		}
		chain mangle-th-eth0 {
			ct state established,related meta mark set meta mark | 0x00010000 comment "host endpoint hep___: Mark established and related as accepted"
			ct state established,related return comment "host endpoint hep___: Allow established and related"
			ct state invalid drop comment "host endpoint hep___: Drop conntrack invalid"
			jump mangle-failsafe-out comment "host endpoint hep___: Failsafe ports"
			meta mark set meta mark & 0xfffcffff comment "host endpoint hep___: Clear accept and pass marks"
			jump mangle-pro-_wCB6TBML5lKOHdRlm-bbM5lIEPuaeq6Q78d89pDIrSM comment "host endpoint hep___: Profile prof__"
			meta mark & 0x00010000 == 0x00010000 return comment "host endpoint hep___: Return if profile accepted"
			log prefix "DRE" group 2 comment "host endpoint hep___: Log no profile matched"
			drop comment "host endpoint hep___: Drop if no profiles matched"
		}
		map filter-arp {
			type ifname : verdict
			comment "workload interface → ARP suppression chain"
			elements = { "cali1" comment "endpoint k8s_/ns/pod_/e_0" : goto filter-arp-cali1 }
		}
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep___" : goto filter-fh-eth0 }
		}
		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep___" : goto filter-fhfw-eth0 }
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1" comment "endpoint k8s_/ns/pod_/e_0" : goto filter-fw-cali1 }
		}
		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep___" : goto filter-th-eth0 }
		}
		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep___" : goto filter-thfw-eth0 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1" comment "endpoint k8s_/ns/pod_/e_0" : goto filter-tw-cali1 }
		}
		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "eth0" comment "host endpoint hep___" : goto mangle-th-eth0 }
		}
		set raw-rpf-skip-v4 {
			type ifname . ipv4_addr
			flags interval
			comment "workload interface . allowed spoofed IPv4 source"
			elements = { "cali1" . 10.0.0.0/8 comment "endpoint k8s_/ns/pod_/e_0",
				     "cali1" . 192.168.0.0/24 comment "endpoint k8s_/ns/pod_/e_0" }
		}
		set raw-rpf-skip-v6 {
			type ifname . ipv6_addr
			flags interval
			comment "workload interface . allowed spoofed IPv6 source"
			elements = { "cali1" . 2001:db8::/32 comment "endpoint k8s_/ns/pod_/e_0" }
		}
`,
	"IPv6 off": `
		chain filter-tw-cali1 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			meta mark set meta mark & 0xfffdffff comment "endpoint k8s/default/pod-1/eth0: Start of tier default"
			meta mark & 0x00020000 == 0x00000000 jump filter-pi-default.ai comment "endpoint k8s/default/pod-1/eth0: Policy default.ai"
			meta mark & 0x00010000 == 0x00010000 return comment "endpoint k8s/default/pod-1/eth0: Return if policy accepted"
			meta mark & 0x00020000 == 0x00000000 drop comment "endpoint k8s/default/pod-1/eth0: End of tier default. Drop if no policies passed packet"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-fw-cali1 {
			ct state established,related accept comment "endpoint k8s/default/pod-1/eth0: Allow established and related"
			ct state invalid drop comment "endpoint k8s/default/pod-1/eth0: Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "endpoint k8s/default/pod-1/eth0: Clear accept and pass marks"
			udp dport 4789 drop comment "endpoint k8s/default/pod-1/eth0: Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "endpoint k8s/default/pod-1/eth0: Drop IPinIP encapped packets originating in workloads"
			drop comment "endpoint k8s/default/pod-1/eth0: Drop if no profiles matched"
		}
		chain filter-arp-cali1 {
			oifname "cali1" arp operation reply arp saddr ip 10.65.0.7 drop comment "endpoint k8s/default/pod-1/eth0: Drop proxy-ARP reply claiming its own address"
		}
		chain raw-ep-prerouting {
			meta mark set meta mark & 0xffe4ffff comment "Clear nftep marks"
			iifname "cali*" meta mark set meta mark | 0x00080000 comment "Mark packets from workloads"
			meta mark & 0x00080000 == 0x00080000 iifname . ip saddr @raw-rpf-skip-v4 accept comment "Allowed spoofed IPv4 source"
			meta mark & 0x00080000 == 0x00080000 fib saddr . mark . iif oif 0 drop comment "Drop packets from workloads that fail the strict RPF check"
			meta mark & 0x00080000 == 0x00000000 jump raw-from-hep-dispatch comment "Untracked host endpoint policy"
			meta mark & 0x00010000 == 0x00010000 accept comment "Untracked policy accepted packet"
		}
		chain filter-wl-to-host {
			jump filter-from-wl-dispatch comment "Workload egress policy"
			drop comment "Configured DefaultEndpointToHostAction"
		}
		chain filter-failsafe-in {
			tcp dport 22 accept comment "Failsafe inbound tcp:22"
			ip saddr 10.0.0.0/8 tcp dport 179 accept comment "Failsafe inbound tcp:10.0.0.0/8:179"
		}
		map filter-arp {
			type ifname : verdict
			comment "workload interface → ARP suppression chain"
			elements = { "cali1" comment "endpoint k8s/default/pod-1/eth0" : goto filter-arp-cali1 }
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1" comment "endpoint k8s/default/pod-1/eth0" : goto filter-fw-cali1 }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1" comment "endpoint k8s/default/pod-1/eth0" : goto filter-tw-cali1 }
		}
		set raw-rpf-skip-v4 {
			type ifname . ipv4_addr
			flags interval
			comment "workload interface . allowed spoofed IPv4 source"
			elements = { "cali1" . 8.8.8.8 comment "endpoint k8s/default/pod-1/eth0",
				     "cali1" . 9.9.9.9 comment "endpoint k8s/default/pod-1/eth0" }
		}
`,
	"shared endpoint chains": `
		chain filter-tw-_pOrqAejn4YQ4trsu83U0 {
			ct state established,related accept comment "Allow established and related"
			ct state invalid drop comment "Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "Clear accept and pass marks"
			jump filter-pri-kns.default comment "Profile kns.default"
			meta mark & 0x00010000 == 0x00010000 return comment "Return if profile accepted"
			drop comment "Drop if no profiles matched"
		}
		chain filter-fw-_46Mkb92w_S6zZcI2rLXr {
			ct state established,related accept comment "Allow established and related"
			ct state invalid drop comment "Drop conntrack invalid"
			meta mark set meta mark & 0xfffcffff comment "Clear accept and pass marks"
			udp dport 4789 drop comment "Drop VXLAN encapped packets originating in workloads"
			meta l4proto ipencap drop comment "Drop IPinIP encapped packets originating in workloads"
			jump filter-pro-kns.default comment "Profile kns.default"
			meta mark & 0x00010000 == 0x00010000 return comment "Return if profile accepted"
			drop comment "Drop if no profiles matched"
		}
		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1" comment "endpoint k8s/default/pod-a/eth0" : goto filter-fw-_46Mkb92w_S6zZcI2rLXr,
				     "cali2" comment "endpoint k8s/default/pod-b/eth0" : goto filter-fw-_46Mkb92w_S6zZcI2rLXr }
		}
		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
			elements = { "cali1" comment "endpoint k8s/default/pod-a/eth0" : goto filter-tw-_pOrqAejn4YQ4trsu83U0,
				     "cali2" comment "endpoint k8s/default/pod-b/eth0" : goto filter-tw-_pOrqAejn4YQ4trsu83U0 }
		}
`,
}
