SUMMARY = "Example program driving /dev/mychardrv, for user-to-kernel call paths"
DESCRIPTION = "A small C program that writes to the mychardrv example driver through functions \
               of its own, built like any package of the image (optimised, no frame pointers, \
               stripped on the target): kprofctl run --call-graph dwarf shows the path from its \
               functions through libc's write() into the module."
HOMEPAGE = "https://github.com/kprof/kprof"
BUGTRACKER = "https://github.com/kprof/kprof/issues"
SECTION = "devel"
LICENSE = "MIT | Apache-2.0"
LIC_FILES_CHKSUM = "file://mychardrv_writer.c;beginline=1;endline=1;md5=55ecc515da66af0919eadb7a07d9bc4f"

SRC_URI = "git://github.com/kprof/kprof.git;protocol=https;branch=main;destsuffix=kprof"
# Bumped together with kprof-agent's SRCREV (ci/checks/check-srcrev checks all three).
SRCREV = "0855489261d2104c324f2bbb93b102663a7f2240"

# whinlatter and later unpack into UNPACKDIR; scarthgap has none and unpacks into WORKDIR.
S = "${@d.getVar('UNPACKDIR') or d.getVar('WORKDIR')}/kprof/examples/mychardrv-writer"

# The Makefile takes CC, CFLAGS and LDFLAGS from the environment bitbake sets up (the image's
# flags: -O2 -g and the distro's hardening, no frame pointers); -e lets them override its
# defaults.
EXTRA_OEMAKE = "-e"

do_install() {
    oe_runmake install DESTDIR=${D} PREFIX=${prefix}
}

RRECOMMENDS:${PN} = "kernel-module-mychardrv"
