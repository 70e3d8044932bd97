# shellcheck shell=bash
# Shared by ci/board/* scripts (sourced). Cache layout and content hashes.
#
# $KPROF_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/kprof) holds
#   board/<kernel-hash>/            one Buildroot-like output dir per kernel input set
#     build/linux-<ver>/            kernel tree, vmlinux with DWARF
#     build/mychardrv-1.0/          module build, unstripped mychardrv.ko
#     target/                       initramfs root (stripped module, busybox, dropbear, agent)
#     images/bzImage, images/rootfs.cpio.gz
#     images/kprof-symbols/         what kprofctl gets as --symbols (links into build/)
#     keys/id_ed25519               test key authorized for root on the board
#   board/kvm-verdict               cached "kvm" or "tcg" for this machine
# $KPROF_BOARD_STATE (default $KPROF_CACHE/board/run) holds pid, port and the serial log.

board_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
board_top=$(cd "$board_here/../.." && pwd)
KPROF_CACHE=${KPROF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kprof}
board_cache=$KPROF_CACHE/board
KPROF_BOARD_STATE=${KPROF_BOARD_STATE:-$board_cache/run}
kprof_cfg=$board_top/meta-kprof/recipes-kernel/linux/files/kprof.cfg

board_log() { echo "board: $*" >&2; }
board_die() { echo "board: error: $*" >&2; exit 1; }

# Packages the board needs on a Debian 12 host; installed when missing.
board_packages=(linux-source-6.1 qemu-system-x86 busybox-static dropbear-bin cpio xz-utils
  bc flex bison libelf-dev libssl-dev dwarves build-essential openssh-client util-linux)

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
board_input_hash() {
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
  "$board_here/kernel-config" "$tmp/linux-source-6.1" >"$tmp/config.log" 2>&1 || {
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
  board_log "building the kernel into $dir (about 15 min on 2 cores; log: $log)"
  if ! "$board_here/build-kernel" "$dir" >"$log" 2>&1; then
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
  hash=$(cat "$board_top"/examples/mychardrv/{mychardrv.c,Kbuild,Makefile} "$board_here/build-module" |
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
  if path=$("$board_top/ci/build-agent" 2>"$log" | tail -n1) && [ -x "$path" ]; then
    echo "$path"
  else
    tail -n 15 "$log" >&2
    board_log "WARNING: ci/build-agent failed (log: $log); the board boots without kprof-agent"
  fi
}

board_ensure_rootfs() {
  local dir=$1 agent
  agent=$(board_agent)
  "$board_here/build-rootfs" "$dir" "$board_cache/keys/id_ed25519" \
    "$board_cache/keys/dropbear_ed25519_host_key" "$agent" >"$dir/logs/rootfs.log" 2>&1 || {
    cat "$dir/logs/rootfs.log" >&2
    board_die "initramfs assembly failed"
  }
  # Hard links, not symlinks: whatever indexes this dir sees plain files.
  local s=$dir/images/kprof-symbols
  rm -rf "$s"
  mkdir -p "$s"
  ln "$dir/build/linux-$(cat "$dir/kernel-version")/vmlinux" "$s/vmlinux"
  ln "$dir/build/mychardrv-1.0/mychardrv.ko" "$s/mychardrv.ko"
  [ -z "$agent" ] || cp "$agent" "$s/kprof-agent"
}

# Digest of what the board boots, to tell whether a running board is still current.
board_image_digest() {
  local dir=$1
  { sha256sum "$dir/images/bzImage" | cut -d' ' -f1
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
  local accel_args=(-accel tcg -cpu max)
  [ "$accel" = kvm ] && accel_args=(-enable-kvm -cpu host)
  rm -f "$KPROF_BOARD_STATE/qemu.pid" "$console"
  qemu-system-x86_64 -machine q35 "${accel_args[@]}" -smp 2 -m 512M \
    -kernel "$dir/images/bzImage" -initrd "$dir/images/rootfs.cpio.gz" \
    -append "console=ttyS0 panic=-1 loglevel=6" \
    -netdev "user,id=net0,hostfwd=tcp:127.0.0.1:$port-:22" -device virtio-net-pci,netdev=net0,romfile= \
    -device virtio-rng-pci \
    -display none -monitor none -serial "file:$console" -no-reboot \
    -daemonize -pidfile "$KPROF_BOARD_STATE/qemu.pid" 2>"$KPROF_BOARD_STATE/qemu.err" 7>&- 8>&- 9>&-
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
