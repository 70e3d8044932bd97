SUMMARY = "kprof on-board profiler: system-wide perf_event_open sampling to perf.data"
DESCRIPTION = "kprof-agent samples the whole system (kernel, modules and user code) with \
               perf_event_open and writes perf.data plus a manifest of the loaded images and \
               their build-ids into one archive, which kprofctl on the host symbolizes \
               against the build tree."
HOMEPAGE = "https://github.com/kprof/kprof"
BUGTRACKER = "https://github.com/kprof/kprof/issues"
SECTION = "devel"
LICENSE = "MIT | Apache-2.0"
# Dual-licensed like the Rust ecosystem: both licence texts sit at the repository top.
LIC_FILES_CHKSUM = "file://LICENSE-APACHE;md5=22a53954e4e0ec258dfce4391e905dac \
                    file://LICENSE-MIT;md5=faa355e0cab4191e1e09a7811d03b111"

SRC_URI = "git://github.com/kprof/kprof.git;protocol=https;branch=main;destsuffix=kprof"
# A user's bitbake fetches this commit, not the layer's checkout: its licence files and
# Cargo.lock must match LIC_FILES_CHKSUM and kprof-agent-crates.inc (ci/checks/check-srcrev).
# To bump: set it here and in mychardrv, then run ci/checks/gen-crates-inc on its Cargo.lock.
SRCREV = "0855489261d2104c324f2bbb93b102663a7f2240"

# whinlatter and later unpack into UNPACKDIR; scarthgap has none and unpacks into WORKDIR.
S = "${@d.getVar('UNPACKDIR') or d.getVar('WORKDIR')}/kprof"

inherit cargo cargo-update-recipe-crates

# The agent is one member of the repository's cargo workspace: its manifest is in agent/,
# the lock file at the top. Cargo resolves the whole workspace even for one member, so the
# crates list covers the whole Cargo.lock.
CARGO_SRC_DIR = "agent"
CARGO_LOCK_PATH = "${S}/Cargo.lock"

require ${BPN}-crates.inc

# The workspace's `agent` profile (what ci/build-agent uses for boards): optimised for size,
# debug = "limited", never stripped by cargo, so ${PN}-dbg gets the DWARF when the package
# step splits it off.
BUILD_MODE = "${@['--profile agent', ''][d.getVar('DEBUG_BUILD') == '1']}"
BUILD_DIR = "${@['agent', 'debug'][d.getVar('DEBUG_BUILD') == '1']}"
export CARGO_PROFILE_AGENT_STRIP = "none"

# perf_event_open: the agent runs as root on the board; it has no runtime dependency beyond libc.

# kprof/marker.h, for applications that mark their phases on kprof's timeline
# (docs/markers.md): packaged in ${PN}-dev, so it reaches the SDK and the sysroot of recipes
# that depend on kprof-agent.
do_install:append() {
    install -D -m 0644 ${S}/include/kprof/marker.h ${D}${includedir}/kprof/marker.h
}
