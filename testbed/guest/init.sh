#!/bin/busybox sh
# /init of the vmtest guest. It prints "VMTEST ..." marker lines the host
# harness waits for; everything else on the console is for a person.
/bin/busybox mkdir -p /usr/local/bin
/bin/busybox --install -s /usr/local/bin
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /run/sshd
chmod 700 /root

fail() {
	echo "VMTEST SETUP FAIL: $*"
	echo "VMTEST RESULT FAIL"
	reboot -f
}

echo "VMTEST KERNEL $(uname -r)"
modprobe virtio_pci 2>/dev/null
modprobe virtio_net 2>/dev/null
# 6.1's rdma_rxe uses the crc32 crypto algorithm without declaring it
# (without one, `rdma link add` fails with ENOENT), and siw needs crc32c.
# Newer kernels build crc32 in: the image holds what its kernel has.
for m in crc32-pclmul crc32_generic crc32c-intel crc32c_generic; do
	modprobe $m 2>/dev/null
done
modprobe rdma_rxe || fail "modprobe rdma_rxe"
modprobe rdma_ucm || fail "modprobe rdma_ucm"

ip link set lo up
ip link set eth0 up || fail "no eth0"
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"
# eth1 and eth2 are on networks of their own (10.0.3.0/24, 10.0.4.0/24).
if ip link set eth1 up 2>/dev/null; then
	ip addr add 10.0.3.15/24 dev eth1
	rdma link add rxe1 type rxe netdev eth1 || fail "rdma link add rxe1"
fi
if ip link set eth2 up 2>/dev/null; then
	ip addr add 10.0.4.15/24 dev eth2
	if modprobe siw 2>/dev/null; then
		rdma link add siw0 type siw netdev eth2 || fail "rdma link add siw0"
	fi
fi
ulimit -l unlimited

if [ -s /root/.ssh/authorized_keys ]; then
	chmod 700 /root/.ssh
	chmod 600 /root/.ssh/authorized_keys
	/usr/sbin/sshd -E /tmp/sshd.log || fail "sshd"
fi
echo "VMTEST READY"

if [ -x /vmtest/run ]; then
	cd /vmtest
	if ./run; then
		echo "VMTEST RESULT PASS"
	else
		echo "VMTEST RESULT FAIL rc=$?"
	fi
	sync
	reboot -f
fi
# No script: stay up for ssh until the host stops qemu.
while :; do sleep 3600; done
