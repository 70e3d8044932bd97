# shellcheck shell=bash
# Shared by ci/board/* scripts (sourced). Cache layout and content hashes.
#
# $KPROF_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/kprof) holds
#   board/<kernel-hash>/            one Buildroot-like output dir per kernel input set (and arch)
#     build/linux-<ver>/            kernel tree, vmlinux with DWARF
#     build/mychardrv-1.0/          module build, unstripped mychardrv.ko
#     build/mychardrv-writer-1.0/   the example program, unstripped (stripped in target/)
#     target/                       initramfs root (stripped module, busybox, dropbear, agent)
#     images/bzImage (x86_64), images/Image (aarch64) or images/zImage (armv7),
#     images/rootfs.cpio.gz
#     images/kprof-symbols/         what kprofctl gets as --symbols (links into build/)
#     keys/id_ed25519               test key authorized for root on the board
#   board/accel                     cached "kvm" or "tcg" for this machine (x86_64 board)
#   board/debs-aarch64/<hash>/      unpacked arm64 Debian packages for the aarch64 rootfs
#   board/debs-armv7/<hash>/        unpacked armhf Debian packages for the armv7 rootfs
# $KPROF_BOARD_STATE (default $KPROF_CACHE/board/run, board/run-aarch64 and board/run-armv7
# for the Arm boards) holds pid, port and the serial log.
#
# Every script sourcing this calls board_init "$@" first: it takes --arch x86_64|aarch64|armv7
# (default $KPROF_BOARD_ARCH, else x86_64) and sets the per-architecture variables.

board_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
board_top=$(cd "$board_here/../.." && pwd)
KPROF_CACHE=${KPROF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kprof}
board_cache=$KPROF_CACHE/board
kprof_cfg=$board_top/meta-kprof/recipes-kernel/linux/files/kprof.cfg

board_log() { echo "board: $*" >&2; }
board_die() { echo "board: error: $*" >&2; exit 1; }

# Packages the board needs on a Debian 12 host; installed when missing (board_init adds the
# cross toolchain and QEMU of the board's architecture).
board_packages=(linux-source-6.1 dropbear-bin cpio xz-utils bzip2 curl
  bc flex bison libelf-dev libssl-dev dwarves build-essential openssh-client util-linux)

# usage: board_init [--arch x86_64|aarch64|armv7] (the script's own arguments). Sets
#   board_arch          x86_64, aarch64 or armv7 (exported as KPROF_BOARD_ARCH for the helpers)
#   board_image         kernel image name under images/ (bzImage, Image, zImage)
#   board_rust_target   the agent's Rust target
#   board_cross         the Arm boards' CROSS_COMPILE prefix (Debian's cross gcc)
#   board_kfrag         the kernel arch of meta-kprof's kprof-<arch>.cfg (Arm boards)
#   board_deb_arch      the Debian architecture of the Arm boards' userland packages
#   KPROF_BOARD_STATE   default $board_cache/run (x86_64), $board_cache/run-<arch>
board_init() {
  board_arch=${KPROF_BOARD_ARCH:-x86_64}
  while [ $# -gt 0 ]; do
    case $1 in
      --arch) [ $# -ge 2 ] || board_die "--arch needs a value (x86_64, aarch64 or armv7)"
        board_arch=$2; shift 2 ;;
      --arch=*) board_arch=${1#--arch=}; shift ;;
      *) board_die "unknown argument $1 (usage: $(basename "$0") [--arch x86_64|aarch64|armv7])" ;;
    esac
  done
  case $board_arch in
    x86_64|amd64|x86)
      board_arch=x86_64 board_image=bzImage board_rust_target=x86_64-unknown-linux-gnu
      KPROF_BOARD_STATE=${KPROF_BOARD_STATE:-$board_cache/run}
      board_packages+=(qemu-system-x86) ;;
    aarch64|arm64)
      board_arch=aarch64 board_image=Image board_rust_target=aarch64-unknown-linux-gnu
      board_cross=aarch64-linux-gnu- board_kfrag=arm64 board_deb_arch=arm64
      KPROF_BOARD_STATE=${KPROF_BOARD_STATE:-$board_cache/run-aarch64}
      board_packages+=(qemu-system-arm qemu-user-static gcc-aarch64-linux-gnu
        binutils-aarch64-linux-gnu libc6-dev-arm64-cross) ;;
    armv7|arm|armhf|armv7l)
      board_arch=armv7 board_image=zImage board_rust_target=armv7-unknown-linux-gnueabihf
      board_cross=arm-linux-gnueabihf- board_kfrag=arm board_deb_arch=armhf
      KPROF_BOARD_STATE=${KPROF_BOARD_STATE:-$board_cache/run-armv7}
      board_packages+=(qemu-system-arm qemu-user-static gcc-arm-linux-gnueabihf
        binutils-arm-linux-gnueabihf libc6-dev-armhf-cross device-tree-compiler) ;;
    *) board_die "unsupported board architecture '$board_arch' (x86_64, aarch64 or armv7)" ;;
  esac
  export KPROF_BOARD_ARCH=$board_arch
}

# The scripts that configure and build the kernel: the x86_64 ones keep their original names
# (and bytes, so that the x86 board's input hash and its cached kernel stay valid).
board_kernel_script() {
  if [ "$board_arch" = x86_64 ]; then echo "$board_here/$1"; else echo "$board_here/$1-$board_arch"; fi
}

board_ensure_packages() {
  local missing=() p
  for p in "${board_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  board_log "installing ${missing[*]}"
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq >&2 || board_log "apt-get update failed, trying the install anyway"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2 ||
    board_die "apt-get install ${missing[*]} failed"
}

pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }

# How the kernel is built from its .config (ci/board/build-kernel's make invocation). Bump it
# when that changes so that cached kernels are rebuilt.
board_kernel_recipe=1

# Input key: the source package, both fragments, the config and build scripts, the compiler.
# The x86_64 key is computed exactly as before the aarch64 board existed; an Arm board's
# names the architecture and covers its scripts, fragments and cross compiler.
board_input_hash() {
  if [ "$board_arch" != x86_64 ]; then
    {
      echo "arch $board_arch"
      echo "linux-source-6.1 $(pkg_version linux-source-6.1) recipe $board_kernel_recipe"
      "${board_cross}gcc" --version | head -n1
      sha256sum "$board_here/build-kernel-$board_arch" "$board_here/kernel-config-$board_arch" \
        "$board_here/qemu-$board_arch.cfg" "$board_here/check-kconfig" \
        "$kprof_cfg" "${kprof_cfg%.cfg}-$board_kfrag.cfg" | cut -d' ' -f1
    } | sha256sum | cut -c1-16
    return 0
  fi
  {
    echo "linux-source-6.1 $(pkg_version linux-source-6.1) recipe $board_kernel_recipe"
    gcc --version | head -n1
    sha256sum "$board_here/build-kernel" "$board_here/kernel-config" "$board_here/qemu-x86_64.cfg" \
      "$kprof_cfg" | cut -d' ' -f1
    if [ -f "${kprof_cfg%.cfg}-x86.cfg" ]; then sha256sum "${kprof_cfg%.cfg}-x86.cfg" | cut -d' ' -f1; fi
  } | sha256sum | cut -c1-16
}

# Kernel key: what the kernel is made of, i.e. the resolved .config (which records the
# compiler version) plus the source package version and the recipe. Edits to the fragments
# that do not change the resolved configuration (comments, options another symbol already
# implies) thus reuse the cached kernel.
board_config_hash() {
  {
    [ "$board_arch" = x86_64 ] || echo "arch $board_arch"
    echo "linux-source-6.1 $(pkg_version linux-source-6.1) recipe $board_kernel_recipe"
    grep -v '^# Linux/' "$1"
  } | sha256sum | cut -c1-16
}

# Prints the output dir for the current inputs. An input key seen before maps straight to its
# kernel dir (board/index/<input-hash>); a new one costs one configuration run (~30 s: unpack
# the source, tinyconfig, merge, olddefconfig) to find the kernel key.
board_kernel_dir() {
  local ihash index kdir tmp chash
  ihash=$(board_input_hash)
  index=$board_cache/index/$ihash
  if [ -f "$index" ]; then
    kdir=$board_cache/$(cat "$index")
    [ -d "$kdir" ] && { echo "$kdir"; return 0; }
  fi
  mkdir -p "$board_cache/index"
  board_log "resolving the kernel configuration for new inputs ($ihash)"
  tmp=$(mktemp -d "$board_cache/.config-XXXXXX")
  tar -C "$tmp" -xJf /usr/src/linux-source-6.1.tar.xz ||
    { rm -rf "$tmp"; board_die "cannot unpack /usr/src/linux-source-6.1.tar.xz"; }
  "$(board_kernel_script kernel-config)" "$tmp/linux-source-6.1" >"$tmp/config.log" 2>&1 || {
    cat "$tmp/config.log" >&2
    rm -rf "$tmp"
    board_die "kernel configuration failed"
  }
  chash=$(board_config_hash "$tmp/linux-source-6.1/.config")
  rm -rf "$tmp"
  echo "$chash" >"$index"
  echo "$board_cache/$chash"
}

# Builds the kernel unless the dir for the current inputs already has one. Concurrent callers
# serialize on a lock; a half-finished build (no stamp) is redone from scratch.
board_ensure_kernel() {
  local dir=$1
  mkdir -p "$dir/logs"
  exec 8>"$dir/.kernel.lock"
  flock 8
  if [ -f "$dir/.kernel-done" ]; then
    exec 8>&-
    return 0
  fi
  local log=$dir/logs/kernel-build.log start=$SECONDS
  board_log "building the $board_arch kernel into $dir (about 4 min on 2 idle cores; log: $log)"
  if ! "$(board_kernel_script build-kernel)" "$dir" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    exec 8>&-
    board_die "kernel build failed, full log: $log"
  fi
  echo "$((SECONDS - start))" >"$dir/logs/kernel-build-seconds"
  touch "$dir/.kernel-done"
  board_log "kernel built in $((SECONDS - start)) s"
  exec 8>&-
}

# mychardrv: rebuilt when its sources or build-module change (the kernel is implied by $dir).
board_ensure_module() {
  local dir=$1 hash
  hash=$(cat "$board_top"/examples/mychardrv/{mychardrv.c,mychardrv_trace.h,Kbuild,Makefile} \
    "$board_top"/include/kprof/marker.h \
    "$board_top"/examples/mychardrv-writer/{mychardrv_writer.c,Makefile} "$board_here/build-module" |
    sha256sum | cut -c1-16)
  if [ "$(cat "$dir/build/mychardrv-1.0/.stamp" 2>/dev/null)" = "$hash" ]; then
    return 0
  fi
  board_log "building mychardrv.ko"
  "$board_here/build-module" "$dir" >"$dir/logs/mychardrv-build.log" 2>&1 || {
    tail -n 30 "$dir/logs/mychardrv-build.log" >&2
    board_die "mychardrv build failed, full log: $dir/logs/mychardrv-build.log"
  }
  echo "$hash" >"$dir/build/mychardrv-1.0/.stamp"
}

# The build directory of busybox under output dir $1 (fails when there is none).
board_busybox_dir() {
  local d
  for d in "$1"/build/busybox-*/; do
    [ -d "$d" ] && { echo "${d%/}"; return 0; }
  done
  return 1
}

# busybox with symbols and frame pointers: rebuilt when build-busybox changes.
board_ensure_busybox() {
  local dir=$1 hash bdir
  hash=$(sha256sum "$board_here/build-busybox" | cut -c1-16)
  if bdir=$(board_busybox_dir "$dir") && [ "$(cat "$bdir/.stamp" 2>/dev/null)" = "$hash" ]; then
    return 0
  fi
  board_log "building busybox (under a minute on 2 cores)"
  "$board_here/build-busybox" "$dir" >"$dir/logs/busybox-build.log" 2>&1 || {
    tail -n 30 "$dir/logs/busybox-build.log" >&2
    board_die "busybox build failed, full log: $dir/logs/busybox-build.log"
  }
  bdir=$(board_busybox_dir "$dir")
  echo "$hash" >"$bdir/.stamp"
}

# The ssh test key (root's authorized key on the board) and the board's fixed host key live
# outside the per-kernel dirs so that they survive kernel rebuilds.
board_ensure_keys() {
  local k=$board_cache/keys
  mkdir -p "$k"
  chmod 700 "$k"
  [ -f "$k/id_ed25519" ] ||
    ssh-keygen -q -t ed25519 -N '' -C kprof-board-test -f "$k/id_ed25519" >&2
  if [ ! -f "$k/dropbear_ed25519_host_key" ]; then
    dropbearkey -t ed25519 -f "$k/dropbear_ed25519_host_key" >/dev/null 2>&1 ||
      board_die "dropbearkey could not create a host key"
  fi
  [ -f "$k/host_key.pub" ] ||
    dropbearkey -y -f "$k/dropbear_ed25519_host_key" | grep '^ssh-' | cut -d' ' -f1,2 >"$k/host_key.pub"
}

# The agent is always rebuilt by cargo (a no-op when current) and re-copied. If it cannot be
# built the board still boots, without /usr/bin/kprof-agent (kprofctl deploy can add it).
# KPROF_BOARD_AGENT=PATH uses that binary instead; KPROF_BOARD_AGENT=none leaves it out.
board_agent() {
  case ${KPROF_BOARD_AGENT:-} in
    none) return 0 ;;
    "") ;;
    *) [ -x "$KPROF_BOARD_AGENT" ] || board_die "KPROF_BOARD_AGENT=$KPROF_BOARD_AGENT is not an executable"
      echo "$KPROF_BOARD_AGENT"; return 0 ;;
  esac
  local log=$board_cache/agent-build.log path
  [ "$board_arch" = x86_64 ] || log=$board_cache/agent-build-$board_arch.log
  if path=$("$board_top/ci/build-agent" "$board_rust_target" 2>"$log" | tail -n1) && [ -x "$path" ]; then
    echo "$path"
  else
    tail -n 15 "$log" >&2
    board_log "WARNING: ci/build-agent failed (log: $log); the board boots without kprof-agent"
  fi
}

# Where the board's userland comes from: the host itself for x86_64; for aarch64 (armv7),
# Debian's arm64 (armhf) packages unpacked (dpkg-deb -x, nothing installed, dpkg's
# architectures untouched) by ci/apt-multiarch into
# $board_cache/debs-<board arch>/<hash of the package versions>.
# dropbear is dynamic: its libraries (and scp's) are in the list; build-rootfs fails naming
# any library the dynamic loader cannot find there.
board_arm_debs=(dropbear-bin openssh-client libc6 libcrypt1 libtomcrypt1
  libtommath1 libgmp10 zlib1g)
board_userland() {
  if [ "$board_arch" = x86_64 ]; then
    echo /
    return 0
  fi
  local specs=() versions p v hash root
  # One list set per foreign architecture (ci/apt-multiarch): an armhf index that fails
  # verification cannot hide a suite from the arm64 board's fetch.
  export KPROF_APT_FOREIGN_ARCH=$board_deb_arch
  versions=$("$board_top/ci/apt-multiarch" version "${board_arm_debs[@]/%/:$board_deb_arch}") ||
    board_die "$board_deb_arch packages missing: ${board_arm_debs[*]}"
  while read -r p v; do specs+=("$p=$v"); done <<<"$versions"
  hash=$(printf '%s\n' "${specs[@]}" | sha256sum | cut -c1-16)
  root=$board_cache/debs-$board_arch/$hash
  if [ ! -d "$root" ]; then
    board_log "fetching the $board_deb_arch userland: ${specs[*]}"
    "$board_top/ci/apt-multiarch" unpack "$root" "${specs[@]}" >&2 ||
      board_die "could not fetch the $board_deb_arch packages ${specs[*]}"
  fi
  echo "$root"
}

board_ensure_rootfs() {
  local dir=$1 agent sysroot
  agent=$(board_agent)
  sysroot=$(board_userland)
  "$board_here/build-rootfs" "$dir" "$board_cache/keys/id_ed25519" \
    "$board_cache/keys/dropbear_ed25519_host_key" "$agent" "$sysroot" >"$dir/logs/rootfs.log" 2>&1 || {
    cat "$dir/logs/rootfs.log" >&2
    board_die "initramfs assembly failed"
  }
  # Hard links, not symlinks: whatever indexes this dir sees plain files.
  local s=$dir/images/kprof-symbols
  rm -rf "$s"
  mkdir -p "$s"
  ln "$dir/build/linux-$(cat "$dir/kernel-version")/vmlinux" "$s/vmlinux"
  ln "$dir/build/mychardrv-1.0/mychardrv.ko" "$s/mychardrv.ko"
  ln "$dir/build/mychardrv-writer-1.0/mychardrv-writer" "$s/mychardrv-writer"
  ln "$(board_busybox_dir "$dir")/busybox_unstripped" "$s/busybox"
  [ -z "$agent" ] || cp "$agent" "$s/kprof-agent"
}

# Digest of what the board boots, to tell whether a running board is still current (for
# aarch64 that includes whether QEMU counts instructions, KPROF_BOARD_ICOUNT; for armv7 the
# CPU QEMU models, KPROF_BOARD_CPU).
board_image_digest() {
  local dir=$1
  { [ "$board_arch" = x86_64 ] || echo "icount ${KPROF_BOARD_ICOUNT:-0}"
    if [ "$board_arch" = armv7 ]; then echo "cpu ${KPROF_BOARD_CPU:-$board_armv7_cpu}"; fi
    sha256sum "$dir/images/$board_image" | cut -d' ' -f1
    (cd "$dir/target" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
    (cd "$dir/target" && find . -type l -printf '%p %l\n' | LC_ALL=C sort)
  } | sha256sum | cut -c1-16
}

board_qemu_alive() {
  local pid
  pid=$(cat "$KPROF_BOARD_STATE/qemu.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q qemu-system
}

board_ssh() {
  local port=$1
  shift
  ssh -i "$board_cache/keys/id_ed25519" -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=5 \
    -p "$port" root@127.0.0.1 "$@"
}

board_port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

board_pick_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 20000))
    board_port_free "$p" && { echo "$p"; return 0; }
  done
  board_die "no free loopback port found in 20000-39999"
}

# Starts QEMU in the background. Returns 1 if QEMU refused to start (e.g. the port was taken
# between the check and the bind); its error is in $KPROF_BOARD_STATE/qemu.err.
board_qemu_start() {
  local dir=$1 accel=$2 port=$3 console=$4
  local machine_args
  rm -f "$KPROF_BOARD_STATE/qemu.pid" "$console"
  if [ "$board_arch" = aarch64 ]; then
    # TCG only (no KVM for an arm64 guest on x86). -cpu max has the PMUv3 QEMU emulates:
    # cycles count its 1 GHz virtual clock; instructions need -icount (KPROF_BOARD_ICOUNT=1,
    # about twice as slow to boot, single-threaded TCG).
    machine_args=(qemu-system-aarch64 -machine virt -accel tcg -cpu max)
    [ "${KPROF_BOARD_ICOUNT:-0}" = 1 ] && machine_args=(qemu-system-aarch64 -machine virt -accel tcg
      -cpu cortex-a57 -icount shift=0)
    machine_args+=(-kernel "$dir/images/Image" -append "console=ttyAMA0 panic=-1 loglevel=6")
  elif [ "$board_arch" = armv7 ]; then
    local cpu=${KPROF_BOARD_CPU:-$board_armv7_cpu} dtb
    machine_args=(qemu-system-arm -machine virt -accel tcg -cpu "$cpu"
      -kernel "$dir/images/zImage" -append "console=ttyAMA0 panic=-1 loglevel=6")
    dtb=$(board_armv7_dtb "$cpu") || return 1
    [ -z "$dtb" ] || machine_args+=(-dtb "$dtb")
  else
    machine_args=(qemu-system-x86_64 -machine q35 -accel tcg -cpu max)
    [ "$accel" = kvm ] && machine_args=(qemu-system-x86_64 -machine q35 -enable-kvm -cpu host)
    machine_args+=(-kernel "$dir/images/bzImage" -append "console=ttyS0 panic=-1 loglevel=6")
  fi
  "${machine_args[@]}" -smp 2 -m 512M -initrd "$dir/images/rootfs.cpio.gz" \
    -netdev "user,id=net0,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=net0,romfile= \
    -device virtio-rng-pci \
    -display none -monitor none -serial "file:$console" -no-reboot \
    -daemonize -pidfile "$KPROF_BOARD_STATE/qemu.pid" 2>"$KPROF_BOARD_STATE/qemu.err" 7>&- 8>&- 9>&-
}

# The armv7 board's CPU (KPROF_BOARD_CPU overrides it). QEMU's cortex-a15 (and a7, a9) model
# no PMU: its device tree has no pmu node and only cpu-clock samples. `max` (an AArch32
# Cortex-A57) has the PMUv3 QEMU emulates, which the device tree names arm,armv8-pmuv3; Linux
# 6.1 has no arm32 driver for that compatible (drivers/perf/arm_pmuv3.c serves arm32 only
# from 6.4), so board_armv7_dtb renames it. Measured: docs/virtual-board.md, "armv7 board".
board_armv7_cpu=max

# Prints the device tree the armv7 board boots with CPU $1, or nothing for QEMU's own. When
# QEMU describes a PMUv3 (arm,armv8-pmuv3), the tree is QEMU's own (dumped with the board's
# -smp/-m) with that node's compatible changed to arm,cortex-a15-pmu: 6.1's ARMv7 PMU driver
# (arch/arm/kernel/perf_event_v7.c) then binds it, as vendor trees do for 32-bit kernels on
# ARMv8 cores; PMUv3's AArch32 registers and the common event numbers (0x11 cycles, 0x08
# instructions) are those of the ARMv7 PMU. Said on stderr, never silently.
board_armv7_dtb() {
  local cpu=$1 raw=$KPROF_BOARD_STATE/virt-$1.dtb.qemu dtb=$KPROF_BOARD_STATE/virt-$1.dtb dts
  command -v dtc >/dev/null || { echo "board: dtc missing (apt-get install device-tree-compiler)" >&2; return 1; }
  rm -f "$raw" "$dtb"
  qemu-system-arm -machine "virt,dumpdtb=$raw" -accel tcg -cpu "$cpu" -smp 2 -m 512M \
    -display none >/dev/null 2>&1 || { echo "board: qemu-system-arm -cpu $cpu could not dump its device tree" >&2; return 1; }
  dts=$(dtc -q -I dtb -O dts "$raw") || { echo "board: dtc cannot read QEMU's device tree $raw" >&2; return 1; }
  if ! grep -q '"arm,armv8-pmuv3"' <<<"$dts"; then
    board_log "armv7: QEMU's -cpu $cpu device tree has no PMU node: booting it as is (cpu-clock only)"
    return 0
  fi
  dtc -q -I dts -O dtb -o "$dtb" - <<<"${dts//\"arm,armv8-pmuv3\"/\"arm,cortex-a15-pmu\"}" ||
    { echo "board: dtc could not rewrite $raw" >&2; return 1; }
  board_log "armv7: -cpu $cpu's PMUv3 node renamed arm,armv8-pmuv3 -> arm,cortex-a15-pmu in $dtb (6.1 arm32 has no armv8-pmuv3 driver)"
  echo "$dtb"
}

board_stop() {
  local pid
  pid=$(cat "$KPROF_BOARD_STATE/qemu.pid" 2>/dev/null) || return 0
  if board_qemu_alive; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      [ -e "/proc/$pid" ] || break
      sleep 0.2
    done
    [ -e "/proc/$pid" ] && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$KPROF_BOARD_STATE/qemu.pid" "$KPROF_BOARD_STATE/target"
}

# KVM only when a bounded boot under it reaches our init (on some nested VMs /dev/kvm answers
# ioctls but guests never run). The verdict is cached per machine in $board_cache/accel;
# KPROF_BOARD_ACCEL=kvm|tcg overrides it.
board_accel() {
  local dir=$1
  if [ "$board_arch" != x86_64 ]; then
    echo tcg
    return 0
  fi
  if [ -n "${KPROF_BOARD_ACCEL:-}" ]; then
    echo "$KPROF_BOARD_ACCEL"
    return 0
  fi
  local verdict=$board_cache/accel
  if [ -f "$verdict" ]; then
    cat "$verdict"
    return 0
  fi
  if [ ! -w /dev/kvm ]; then
    echo tcg | tee "$verdict"
    return 0
  fi
  board_log "probing KVM with a bounded boot (up to 30 s)"
  local port console=$KPROF_BOARD_STATE/kvm-probe.log result=tcg
  port=$(board_pick_port)
  if board_qemu_start "$dir" kvm "$port" "$console"; then
    for _ in $(seq 1 60); do
      grep -q 'kprof-board: ready' "$console" 2>/dev/null && { result=kvm; break; }
      board_qemu_alive || break
      sleep 0.5
    done
    board_stop
  fi
  board_log "KVM probe: using $result (verdict cached in $verdict)"
  echo "$result" | tee "$verdict"
}

# KPROF_BOARD_DEBUGINFOD=1: a real elfutils debuginfod (-F) over the output dir, as a Buildroot
# user would serve it (docs/debuginfod.md, Buildroot): vmlinux, every unstripped .ko of the
# kernel tree, the other build/* packages (the module's and the writer's unstripped files and
# their sources), images/kprof-symbols/, staging/ when there is one. Its state (database,
# log, pid, port) lives in $KPROF_BOARD_STATE/debuginfod/, never in the output dir.
#
# The served .ko files are ET_REL; debuginfod reads their DWARF without applying the
# .rela.debug_* relocations, so every source path of a module comes out as the string at
# offset 0 (the comp_dir) and /buildid/ID/source/PATH answers 404. Copies relocated with
# `eu-strip --reloc-debug-sections-only` (what Fedora's find-debuginfo does to kernel modules;
# same build-id, debug sections already relocated) are served too, from the state dir.
board_debuginfod_paths() {
  local dir=$1 relocated=$2 ver p ko rel
  ver=$(cat "$dir/kernel-version")
  echo "$dir/build/linux-$ver/vmlinux"
  for p in "$dir"/build/*; do
    [ -d "$p" ] && [ "$p" != "$dir/build/linux-$ver" ] && echo "$p"
  done
  # The trailing slash: Buildroot's staging is a symlink (to host/<tuple>/sysroot), and
  # debuginfod walks a symlinked path as the link itself, silently indexing nothing.
  for p in "$dir/images/kprof-symbols" "$dir/staging"; do
    [ -d "$p" ] && echo "$p/"
  done
  rm -rf "$relocated"
  mkdir -p "$relocated"
  while IFS= read -r -d '' ko; do
    rel=${ko#"$dir"/build/}
    mkdir -p "$relocated/$(dirname "$rel")"
    eu-strip --reloc-debug-sections-only -o "$relocated/$rel" "$ko" >&2 ||
      board_die "eu-strip --reloc-debug-sections-only $ko failed (elfutils >= 0.180 needed)"
  done < <(find "$dir/build" -name '*.ko' -type f -print0)
  echo "$relocated"
}

board_debuginfod_alive() {
  local pid
  pid=$(cat "$KPROF_BOARD_STATE/debuginfod/pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q debuginfod
}

# True once debuginfod has walked every path once and scanned every file it queued (its
# Prometheus /metrics, the readiness check elfutils' own tests use).
board_debuginfod_indexed() {
  local metrics
  # shellcheck disable=SC2016 # $1 is the inner shell's
  metrics=$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" &&
    printf "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n" >&3 && tr -d "\r" <&3' _ "$1" 2>/dev/null) ||
    return 1
  grep -q '^thread_work_total{role="traverse"} [1-9]' <<<"$metrics" &&
    grep -q '^thread_work_pending{role="scan"} 0$' <<<"$metrics" &&
    grep -q '^thread_busy{role="scan"} 0$' <<<"$metrics"
}

# Starts (or reuses) the board's debuginfod over DIR; prints its URL. Waits for the first full
# index (KPROF_BOARD_DEBUGINFOD_TIMEOUT seconds, default 300).
board_debuginfod_start() {
  local dir=$1 state=$KPROF_BOARD_STATE/debuginfod port paths=() p pid start
  command -v debuginfod >/dev/null || board_die "debuginfod missing (Debian package debuginfod)"
  command -v eu-strip >/dev/null || board_die "eu-strip missing (Debian package elfutils)"
  if board_debuginfod_alive && [ "$(cat "$state/dir" 2>/dev/null)" = "$dir" ]; then
    echo "http://127.0.0.1:$(cat "$state/port")"
    return 0
  fi
  board_debuginfod_stop
  mkdir -p "$state"
  while IFS= read -r p; do paths+=("$p"); done < <(board_debuginfod_paths "$dir" "$state/relocated")
  for _ in 1 2 3; do
    port=$(board_pick_port)
    rm -f "$state"/db.sqlite*
    # -t0: one scan, no periodic rescans (the board's files change only with a new `up`);
    # -g0: nothing to groom. It listens on all interfaces (elfutils 0.188 has no bind option).
    setsid debuginfod -d "$state/db.sqlite" -p "$port" -t0 -g0 -F "${paths[@]}" \
      </dev/null >"$state/log" 2>&1 7>&- 8>&- 9>&- &
    pid=$!
    echo "$pid" >"$state/pid"
    start=$SECONDS
    # Twice in a row: a scanner that has just taken the last file may not count itself busy yet.
    until board_debuginfod_indexed "$port" && sleep 0.3 && board_debuginfod_indexed "$port"; do
      [ -e "/proc/$pid" ] || break
      [ $((SECONDS - start)) -lt "${KPROF_BOARD_DEBUGINFOD_TIMEOUT:-300}" ] || {
        board_debuginfod_stop
        board_die "debuginfod on port $port did not finish indexing $dir in ${KPROF_BOARD_DEBUGINFOD_TIMEOUT:-300} s (log: $state/log)"
      }
      sleep 0.5
    done
    if [ -e "/proc/$pid" ]; then
      echo "$port" >"$state/port"
      echo "$dir" >"$state/dir"
      board_log "debuginfod indexed $dir in $((SECONDS - start)) s (pid $pid, log: $state/log)"
      echo "http://127.0.0.1:$port"
      return 0
    fi
    board_log "debuginfod exited at start (port $port taken?): $(tail -n 3 "$state/log")"
  done
  board_die "debuginfod did not start; log: $state/log"
}

board_debuginfod_stop() {
  local state=$KPROF_BOARD_STATE/debuginfod pid
  if board_debuginfod_alive; then
    pid=$(cat "$state/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      [ -e "/proc/$pid" ] || break
      sleep 0.1
    done
    [ -e "/proc/$pid" ] && kill -9 "$pid" 2>/dev/null
    board_log "debuginfod stopped (pid $pid)"
  fi
  rm -f "$state/pid" "$state/port"
}
