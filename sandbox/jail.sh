#!/bin/sh
# The local backend's jail: run as root inside fresh namespaces, e.g.
#   env -i unshare --net --pid --mount --ipc --uts --fork --kill-child \
#       sh sandbox/jail.sh WORKDIR SLOTS UID_BASE SCRATCH_MB PYTHON CGROUP BUILD_UID_OFFSET [executor args...]
# Builds a minimal root on a tmpfs (read-only binds of /usr, /bin, /lib*, the executor dir;
# /dev with null/zero/random/urandom; a fresh /proc of the new pid namespace; one tmpfs scratch dir
# per slot owned by the slot's uid, mounted noexec; one tmpfs build dir per slot at /build/<i>, the
# only place with exec allowed, owned by the slot's build uid UID+BUILD_UID_OFFSET with the slot
# uid's group, mode 0750: see languages.py), pivots into it, remounts it read-only and execs the executor
# as pid 1 of the new pid namespace. WORKDIR/run (host side) becomes /run/mucode (the sockets);
# WORKDIR/root is the mount point of the new root. CGROUP ("-" for none) names cgroup-v1 dirs
# /sys/fs/cgroup/{cpu,memory,pids}/CGROUP/slot<i> made by the backend: they are bound at
# /cgroup/<controller> and the executor puts each test process into its slot's cgroups. Nothing of the host's /home, /root, /etc, /tmp,
# /var or /work is visible inside.
set -eu
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
W=$1 SLOTS=$2 UIDB=$3 SMB=$4 PY=$5 CG=$6 BOFF=$7
shift 7
HERE=$(cd "$(dirname "$0")" && pwd)
R=$W/root

mount --make-rprivate /
mount -t tmpfs -o size=8m,mode=755 mucode-jail "$R"
for d in usr bin sbin lib lib32 lib64 libx32; do
    if [ -L "/$d" ]; then
        ln -s "$(readlink "/$d")" "$R/$d"
    elif [ -d "/$d" ]; then
        mkdir "$R/$d"
        mount --bind "/$d" "$R/$d"
        mount -o remount,bind,ro,nosuid,nodev "$R/$d"
    fi
done
mkdir -p "$R/etc" "$R/dev" "$R/proc" "$R/opt/sandbox" "$R/run/mucode" "$R/scratch" "$R/build" "$R/.old"
[ -f /etc/ld.so.cache ] && touch "$R/etc/ld.so.cache" && mount --bind -o ro /etc/ld.so.cache "$R/etc/ld.so.cache"
# Debian's BLAS/LAPACK (numpy, scipy) are found through /etc/alternatives symlinks into /usr.
if [ -d /etc/alternatives ]; then
    mkdir "$R/etc/alternatives"
    mount --bind /etc/alternatives "$R/etc/alternatives"
    mount -o remount,bind,ro,nosuid,nodev "$R/etc/alternatives"
fi
# Debian's JDKs keep their configuration (jvm.cfg, security) under /etc/java-<version>-openjdk.
for d in /etc/java-*; do
    [ -d "$d" ] || continue
    mkdir "$R$d"
    mount --bind "$d" "$R$d"
    mount -o remount,bind,ro,nosuid,nodev "$R$d"
done
for n in null zero random urandom; do
    touch "$R/dev/$n"
    mount --bind "/dev/$n" "$R/dev/$n"
done
ln -s /proc/self/fd "$R/dev/fd"
ln -s /proc/self/fd/0 "$R/dev/stdin"
ln -s /proc/self/fd/1 "$R/dev/stdout"
ln -s /proc/self/fd/2 "$R/dev/stderr"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount --bind "$HERE" "$R/opt/sandbox"
mount -o remount,bind,ro,nosuid,nodev "$R/opt/sandbox"
mount --bind "$W/run" "$R/run/mucode"
CGARGS=""
if [ "$CG" != "-" ]; then
    for c in cpu memory pids; do
        if [ -d "/sys/fs/cgroup/$c/$CG" ]; then
            mkdir -p "$R/cgroup/$c"
            mount --bind "/sys/fs/cgroup/$c/$CG" "$R/cgroup/$c"
            mount -o remount,bind,nosuid,nodev,noexec "$R/cgroup/$c"
        fi
    done
    CGARGS="--cgroup-dir /cgroup"
fi
i=0
while [ "$i" -lt "$SLOTS" ]; do
    u=$((UIDB + i))
    mkdir "$R/scratch/$i"
    # nr_inodes bounds the kernel memory a slot's files can hold beyond their size (about 1 KiB per
    # inode or hard link; docker_engine.SCRATCH_INODES is the same number)
    mount -t tmpfs -o "size=${SMB}m,nr_inodes=32768,uid=$u,gid=$u,mode=0700,nosuid,nodev,noexec" "mucode-slot$i" "$R/scratch/$i"
    mkdir "$R/build/$i"
    mount -t tmpfs -o "size=${SMB}m,nr_inodes=4096,uid=$((u + BOFF)),gid=$u,mode=0750,nosuid,nodev" "mucode-build$i" "$R/build/$i"
    i=$((i + 1))
done
cd "$R"
pivot_root . .old
umount -l /.old
rmdir /.old
mount -o remount,ro,bind /
cd /
exec /usr/bin/env -i PATH=/usr/bin:/bin LANG=C.UTF-8 "$PY" -I -S /opt/sandbox/executor.py \
    --socket /run/mucode/executor.sock --slots "$SLOTS" --uid-base "$UIDB" --scratch /scratch \
    --build /build --build-uid-offset "$BOFF" $CGARGS "$@"
