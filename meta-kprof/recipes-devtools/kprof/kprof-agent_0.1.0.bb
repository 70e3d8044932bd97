SUMMARY = "kprof on-board profiler: system-wide perf_event_open sampling to perf.data"
DESCRIPTION = "kprof-agent samples the whole system (kernel, modules and user code) with \
               perf_event_open and writes perf.data plus a manifest of the loaded images and \
               their build-ids into one archive, which kprofctl on the host symbolizes \
               against the build tree."
HOMEPAGE = "https://github.com/kprof/kprof"
BUGTRACKER = "https://github.com/kprof/kprof/issues"
SECTION = "devel"
LICENSE = "MIT | Apache-2.0"
# The workspace manifest states the licence of every crate of the repository.
LIC_FILES_CHKSUM = "file://Cargo.toml;beginline=9;endline=9;md5=86b31c7756a1a7962f28b62856ed4f05"

SRC_URI = "git://github.com/kprof/kprof.git;protocol=https;branch=main;destsuffix=kprof"
SRCREV = "48e934b9435d9dcc97d7ddee75b49bd2b2cfc94d"

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
