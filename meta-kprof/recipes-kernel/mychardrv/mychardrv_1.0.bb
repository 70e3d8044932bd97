SUMMARY = "Example character device driver profiled in the kprof walk-through"
DESCRIPTION = "An out-of-tree kernel module with a busy read path, used to show kernel module \
               profiling with kprof: load it, read /dev/mychardrv under kprof-agent, report with kprofctl."
HOMEPAGE = "https://github.com/kprof/kprof"
BUGTRACKER = "https://github.com/kprof/kprof/issues"
SECTION = "kernel"
LICENSE = "GPL-2.0-only"
LIC_FILES_CHKSUM = "file://mychardrv.c;beginline=1;endline=1;md5=50d2ba0afecd20f74c12a4bdbcfcfe61"

SRC_URI = "git://github.com/kprof/kprof.git;protocol=https;branch=main;destsuffix=kprof"
# Bumped together with kprof-agent's SRCREV (ci/checks/check-srcrev checks both).
SRCREV = "0855489261d2104c324f2bbb93b102663a7f2240"

# whinlatter and later unpack into UNPACKDIR; scarthgap has none and unpacks into WORKDIR.
S = "${@d.getVar('UNPACKDIR') or d.getVar('WORKDIR')}/kprof/examples/mychardrv"

inherit module

# The example's Makefile builds against KERNEL_SRC (set by module.bbclass) and installs with
# modules_install, the class default.

# The module on the board is the very file the host symbolizes: kept with its symbols and
# DWARF (no strip, no split), so kprofctl can also read it straight off the target.
INHIBIT_PACKAGE_STRIP = "1"
INHIBIT_PACKAGE_DEBUG_SPLIT = "1"

RPROVIDES:${PN} += "kernel-module-mychardrv"

# Loaded at boot (modules-load.d), so that /dev/mychardrv is there for the walk-through: without
# it, `echo 10000 > /dev/mychardrv` on a devtmpfs /dev quietly writes a regular file.
KERNEL_MODULE_AUTOLOAD += "mychardrv"
