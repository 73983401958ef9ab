package endpoints

import (
	"testing"

	"github.com/nftep/nftep/proto"
)

// Case 64: the combiner's precedence, error > down > up, with "" (no
// entry in a family) ignored unless every family has none.
func TestWorseStatus(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{[]string{StatusUp, StatusUp}, StatusUp},
		{[]string{StatusUp, StatusDown}, StatusDown},
		{[]string{StatusDown, StatusUp}, StatusDown},
		{[]string{StatusUp, StatusError}, StatusError},
		{[]string{StatusError, StatusDown}, StatusError},
		{[]string{StatusDown, StatusError}, StatusError},
		{[]string{StatusUp}, StatusUp}, // one family passes through
		{[]string{"", StatusDown}, StatusDown},
		{[]string{"", ""}, ""},
	} {
		if got := worseStatus(tc.in...); got != tc.want {
			t.Errorf("worseStatus(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// OnUpdate ignores what it does not handle, and malformed messages, without
// recording anything.
func TestOnUpdateIgnores(t *testing.T) {
	h := newHarness(t)
	h.step(hostIfaces()...)
	h.step(
		&proto.InSync{},
		&proto.IPSetUpdate{Id: "s:x"},
		&proto.WorkloadEndpointUpdate{Id: wlID4("pod-11")}, // no endpoint
		&proto.WorkloadEndpointUpdate{Endpoint: workloadEp(ifAB)},
		&proto.HostEndpointUpdate{Id: &proto.HostEndpointID{EndpointId: "id1"}},
		&proto.ActivePolicyUpdate{},
		"a string",
		nil,
	)
	h.wantEndpointChains()
	h.wantReports()
	h.wantCallbacks()
}

// A status for an ID is reported once per change: a policy re-render that
// changes nothing about the endpoint's status reports nothing.
func TestStatusReportedOnChangeOnly(t *testing.T) {
	h := newHarness(t)
	h.step(append(hostIfaces(), policyUpdate("policy1", "a"), ifaceUp(ifAB),
		wlUpdate("pod-11", workloadEp(ifAB, tier("default", "policy1"))))...)
	h.wantReports(wlKey("pod-11") + " up")
	h.step(policyUpdate("policy1", "b"))
	if h.renders.total != 1 {
		t.Errorf("selector change rendered %d endpoints, want 1", h.renders.total)
	}
	h.wantReports()
	// A new message for the endpoint is echoed even with the same status:
	// Felix's status file reporter keeps the endpoint it was sent.
	h.step(wlUpdate("pod-11", workloadEp(ifAB, tier("default", "policy1"))))
	h.wantReports(wlKey("pod-11") + " up")
}
