#!/usr/bin/env bash
# Runs every test, kernel tests included, with the race detector, and closes
# with one summary line ("N passed, N failed, N skipped") and the list of
# skipped tests with their reasons, so a run that skipped kernel tests is
# visible at a glance.
#
# Needs: Go; root for the kernel tests (network namespaces, nf_tables, veth);
# the nft and ip commands (Debian packages nftables and iproute2) for the
# tests that compare with the real CLI. With CI set, kernel tests fail instead
# of skipping when they cannot run.
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT

status=0
go test -race -count=1 -v "$@" ./... >"$log" 2>&1 || status=$?
# The tests the race detector slows too much run again without it, at full
# size (see each test).
go test -count=1 -v -run '^(TestMillionMemberIPSet|TestARPAndIPSetChangesAreConstant|TestPolicyScaleChangeBatchConstant)$' "$@" ./dataplane >>"$log" 2>&1 || status=$?

# On a kernel without IPIP (CONFIG_NET_IPIP unset, as on this project's
# machines) TestKernelTwoNodesIPIP skips after its probe; then it runs in a
# VM on Debian's stock kernel, which has IPIP (hack/vmtest.sh, about 1-2
# minutes under software emulation), and its result counts here. Without
# the VM's packages it is not run, and with CI set that fails.
vmrun=
if [[ " $* " != *" -short "* ]] && grep -q 'kernel lacks IPIP (CONFIG_NET_IPIP)' "$log"; then
	vmlog=$(mktemp)
	vm=0
	./hack/vmtest.sh >"$vmlog" 2>&1 || vm=$?
	cat "$vmlog" >>"$log"
	vmrun=$(grep -E '^vmtest: (missing|the VM ended|result:)' "$vmlog" || tail -5 "$vmlog")
	rm -f "$vmlog"
	if [ "$vm" -eq 3 ] && [ -z "${CI:-}" ]; then
		vmrun="$vmrun (not run: TestKernelTwoNodesIPIP stays skipped)"
	elif [ "$vm" -ne 0 ]; then
		status=1
	fi
fi

# Top-level results and package lines; failures in full.
grep -E '^(--- (PASS|FAIL|SKIP)|ok |FAIL|panic:)' "$log" || true
if [ -n "$vmrun" ]; then
	echo "$vmrun"
fi
if [ "$status" -ne 0 ]; then
	echo
	echo "=== output of failing tests"
	# Each line belongs to the test named by the last "=== RUN/NAME/CONT"
	# line before it; print what every failed test (subtests too) logged.
	awk '
		/^=== (RUN|NAME|CONT|PAUSE) / { cur = $3; next }
		{ out[cur] = out[cur] $0 "\n" }
		match($0, /--- FAIL: [^ ]+/) { name = substr($0, RSTART + 10, RLENGTH - 10); if (!(name in seen)) { seen[name] = 1; order[++n] = name } }
		END { for (i = 1; i <= n; i++) printf "=== %s\n%s", order[i], out[order[i]] }
	' "$log" | head -400
	grep -E '^(# |.*\.go:[0-9]+:[0-9]+: )' "$log" | head -50 || true
fi

skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)
if [ -n "$vmrun" ] && [ "${vm:-1}" -eq 0 ]; then
	# The VM ran the IPIP test the host had to skip, and it passed: its
	# host skip is not a test that did not run.
	skipped=$((skipped - 1))
	echo "TestKernelTwoNodesIPIP: skipped on this kernel (no IPIP), passed in the VM: not counted as skipped"
fi
if [ "$skipped" -gt 0 ]; then
	echo
	echo "=== skipped tests"
	# A top-level test's reason comes before its skip line (after its
	# "=== RUN"), a subtest's after it, indented: print both.
	awk '
		/^=== RUN / { cur = $3; out[cur] = ""; next }
		/^=== (NAME|CONT|PAUSE) / { cur = $3; next }
		/^--- SKIP/ { print; printf "%s", out[cur]; inskip = 1; next }
		/^[[:space:]]+--- SKIP/ { print; inskip = 1; next }
		inskip && /^[[:space:]]+[^-=[:space:]]/ { print; next }
		{ inskip = 0; out[cur] = out[cur] $0 "\n" }
	' "$log" | head -60
fi
passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
	failed=1 # a build failure or panic outside a test
fi
# A short pass of every fuzz target (their seeds ran above as tests):
# 300 generated inputs each. `make fuzz FUZZTIME=10m` is the long run.
if [[ " $* " != *" -short "* ]]; then
	echo
	FUZZTIME=300x ./hack/fuzz.sh || { status=1; failed=$((failed + 1)); }
fi
echo
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit "$status"
