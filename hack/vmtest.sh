#!/usr/bin/env bash
# Runs the IPIP kernel test (TestKernelTwoNodesIPIP, package dataplane) in a
# virtual machine that boots Debian's stock kernel, which has IPIP
# (CONFIG_NET_IPIP=m): for a host whose own kernel lacks it, as this project's
# machines do. See docs/operations.md, "The IPIP test in a VM".
#
#   hack/vmtest.sh [extra test flags]     e.g. -test.run '^TestKernelTwoNodes'
#
# What it does:
#  1. builds the dataplane package's tests as one static binary;
#  2. fetches Debian's kernel package (the one linux-image-amd64 depends on)
#     with `apt-get download` and unpacks it into $VMTEST_CACHE (nothing is
#     installed on the host, nothing touches /boot);
#  3. builds an initramfs: busybox, the test binary, ip, bridge, nft, sysctl
#     and modprobe (kmod) with their shared libraries, the kernel modules the
#     test needs (with their dependencies, from modprobe --show-depends, and
#     a modules.dep made by depmod so the kernel can load more on demand), the
#     recordings the test replays, and an init that loads the modules, runs
#     the test with CI=true (so it fails rather than skips) and powers off;
#  4. boots it with qemu-system-x86_64 (KVM when /dev/kvm exists, else
#     software emulation) and exits with the test's exit code, which the init
#     prints as "vmtest: exit N"; 1 when the VM ends without it, 2 when a
#     step before the boot fails, 3 when a package it needs is missing.
#
# Needs root (apt-get download into the cache) and the Debian packages
# qemu-system-x86, busybox-static, cpio and kmod (.ci/run installs them:
# `apt-get install --no-install-recommends qemu-system-x86 busybox-static cpio kmod`).
#
# Environment:
#   VMTEST_CACHE    where the unpacked kernel is kept (/var/cache/nftep-vmtest)
#   VMTEST_KERNEL   a kernel package name to use instead of linux-image-amd64's
#   VMTEST_TIMEOUT  seconds before the VM is killed (900)
#   VMTEST_RUN      the -test.run pattern (^TestKernelTwoNodesIPIP$)
#   VMTEST_KEEP     if set, keep the work directory (initramfs, log)
set -o errexit -o nounset -o pipefail

cd "$(dirname "$0")/.."
repo=$PWD
cache=${VMTEST_CACHE:-/var/cache/nftep-vmtest}
timeout_s=${VMTEST_TIMEOUT:-900}
run=${VMTEST_RUN:-'^TestKernelTwoNodesIPIP$'}

say() { echo "vmtest: $*" >&2; }
die() {
	say "$*"
	exit 2
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v busybox >/dev/null || missing+=(busybox-static)
command -v cpio >/dev/null || missing+=(cpio)
command -v depmod >/dev/null || missing+=(kmod)
if [ "${#missing[@]}" -gt 0 ]; then
	say "missing ${missing[*]}: apt-get install --no-install-recommends ${missing[*]}"
	exit 3
fi
busybox=$(command -v busybox)
if ldd "$busybox" >/dev/null 2>&1; then
	say "$busybox is not static: apt-get install --no-install-recommends busybox-static"
	exit 3
fi

start=$(now)
work=$(mktemp -d /tmp/nftep-vmtest.XXXXXX)
if [ -z "${VMTEST_KEEP:-}" ]; then
	trap 'rm -rf "$work"' EXIT
else
	say "work directory $work"
fi

# 1. The test binary.
t0=$(now)
CGO_ENABLED=0 go test -c -o "$work/dataplane.test" ./dataplane
say "test binary built in $(since "$t0") s"

# 2. The kernel: Debian's, unpacked once per version into the cache.
t0=$(now)
pkg=${VMTEST_KERNEL:-}
if [ -z "$pkg" ]; then
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ { print $2; exit }')
	if [ -z "$pkg" ]; then
		apt-get update -qq
		pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
	fi
	[ -n "$pkg" ] || die "no kernel package: apt-cache depends linux-image-amd64 names none"
fi
kroot=$cache/$pkg
if [ ! -e "$kroot/.done" ]; then
	rm -rf "$kroot"
	mkdir -p "$kroot/deb"
	(cd "$kroot/deb" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) || true
	deb=$(ls "$kroot"/deb/*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || die "apt-get download $pkg: no package"
	dpkg-deb -x "$deb" "$kroot/root"
	rm -rf "$kroot/deb"
	touch "$kroot/.done"
fi
vmlinuz=$(ls "$kroot"/root/boot/vmlinuz-* | head -1)
kver=${vmlinuz##*/vmlinuz-}
kmods=$kroot/root/lib/modules/$kver
[ -e "$kmods/modules.dep" ] || depmod -b "$kroot/root" "$kver"
say "kernel $pkg ($kver) ready in $(since "$t0") s"

# 3. The initramfs.
t0=$(now)
root=$work/root
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,etc,root} "$root/usr/sbin" "$root/usr/bin"
mkdir -p "$root/var" && ln -s ../run "$root/var/run"
cp "$busybox" "$root/bin/busybox"
for a in sh mount mkdir cat echo poweroff sleep ls ln; do ln -s busybox "$root/bin/$a"; done

# Host binaries, at the same paths, with the libraries ldd names.
copy_bin() {
	local src=$1 dst=$2
	mkdir -p "$(dirname "$root$dst")"
	cp -L "$src" "$root$dst"
	ldd "$src" | awk '/=> \// { print $3 } /^\t\// { print $1 }' | while read -r lib; do
		[ -e "$root$lib" ] && continue
		mkdir -p "$(dirname "$root$lib")"
		cp -L "$lib" "$root$lib"
	done
}
for b in ip bridge nft sysctl; do
	p=$(command -v "$b") || die "$b not found on the host (iproute2, nftables, procps)"
	copy_bin "$p" "$p"
done
copy_bin "$(command -v kmod)" /sbin/kmod
ln -s kmod "$root/sbin/modprobe"

# Modules: what the test uses, with their dependencies (xfrm_user: a
# vishvananda/netlink handle opens an XFRM socket too; ip_set: nftep lists
# Calico's leftover ipsets at start). The nf_tables
# expressions are all there so the kernel can load whichever the table uses.
mods="ipip tunnel4 ip_tunnel veth bridge vxlan dummy nf_tables nfnetlink nf_conntrack nf_nat
	nf_flow_table nf_flow_table_inet nft_meta_bridge nf_reject_ipv4 nf_reject_ipv6 xfrm_user ip_set"
for d in net/netfilter net/ipv4/netfilter net/ipv6/netfilter; do
	for f in "$kmods/kernel/$d"/nft_*.ko "$kmods/kernel/$d"/nf_*.ko; do
		[ -e "$f" ] || continue
		n=${f##*/}
		mods="$mods ${n%.ko}"
	done
done
modprobe -d "$kroot/root" -S "$kver" --show-depends -a $mods 2>/dev/null | awk '$1 == "insmod" { print $2 }' | sort -u |
	while read -r f; do
		rel=${f#"$kroot/root"}
		mkdir -p "$(dirname "$root$rel")"
		cp "$f" "$root$rel"
	done
cp "$kmods"/modules.{order,builtin,builtin.modinfo} "$root/lib/modules/$kver/"
depmod -b "$root" "$kver"
nmods=$(find "$root/lib/modules" -name '*.ko*' | wc -l)

# The test and what it reads: the recordings, found from the working
# directory up to the go.mod (internal/testutil).
cp "$work/dataplane.test" "$root/test.bin"
mkdir -p "$root/src/dataplane" "$root/src/testdata/felix"
cp go.mod "$root/src/"
cp -r testdata/felix/two-node "$root/src/testdata/felix/"
printf '%s\n' "$run" >"$root/test.run"
printf '%s\n' "$@" >"$root/test.args"
# The tests' own switches (NFTEP_TEST_LOG=1: the dataplanes' debug log).
env | grep '^NFTEP_TEST_' | sed 's/^/export /' >"$root/test.env" || true

cat >"$root/init" <<'EOF'
#!/bin/sh
# The VM's init: mounts, modules, the test, its exit code, power off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp CI=true
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
# The kernel loads the rest on demand (nf_tables expressions) with kmod's
# modprobe. (This shell runs busybox's applets before PATH; the test's
# commands find the host's ip, bridge, nft and sysctl first in PATH.)
echo /sbin/modprobe >/proc/sys/kernel/modprobe
/sbin/modprobe -a ipip veth bridge vxlan nf_tables nf_conntrack nf_nat || echo "vmtest: modprobe failed"
ip link set lo up
echo "vmtest: kernel $(cat /proc/sys/kernel/osrelease), booted in $(cut -d' ' -f1 /proc/uptime) s"
. /test.env
cd /src/dataplane
set -- -test.v -test.count=1 -test.timeout=10m -test.run "$(cat /test.run)"
while read -r a; do [ -n "$a" ] && set -- "$@" "$a"; done </test.args
/test.bin "$@"
echo "vmtest: exit $? after $(cut -d' ' -f1 /proc/uptime) s"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) | gzip -1 >"$work/initrd.gz"
say "initramfs built in $(since "$t0") s: $(du -h "$work/initrd.gz" | cut -f1) ($nmods modules)"

# 4. Boot.
accel=(-accel tcg -cpu max)
if [ -w /dev/kvm ]; then
	accel=(-accel kvm -cpu host)
fi
say "booting $kver with ${accel[1]} (timeout ${timeout_s} s)"
t0=$(now)
log=$work/console.log
status=0
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 "${accel[@]}" -m 2G -smp 2 \
	-nodefaults -no-user-config -display none -serial stdio -no-reboot \
	-kernel "$vmlinuz" -initrd "$work/initrd.gz" \
	-append 'console=ttyS0 panic=-1 quiet loglevel=3 random.trust_cpu=on' </dev/null 2>&1 |
	tr -d '\r' | tee "$log" || status=$?
say "VM ran for $(since "$t0") s"
code=$(sed -n 's/^vmtest: exit \([0-9]*\) after .*/\1/p' "$log" | tail -1)
if [ -z "$code" ]; then
	say "the VM ended without the test's exit code (qemu/timeout status $status)"
	exit 1
fi
verdict=passed
[ "$code" -eq 0 ] || verdict="failed (exit $code)"
say "result: $run $verdict on Debian's kernel $kver (qemu, ${accel[1]}) in $(since "$start") s in all"
exit "$code"
