SUMMARY = "kprof profiling on the target"
DESCRIPTION = "What the tools-kprof image feature puts on an image: the kprof agent, \
               plus whatever KPROF_EXTRA_PACKAGES names (for instance the kernel module \
               being profiled). The host side stays in the build directory."
HOMEPAGE = "https://github.com/kprof/kprof"
BUGTRACKER = "https://github.com/kprof/kprof/issues"
SECTION = "devel"

# Machine specific: KPROF_EXTRA_PACKAGES may name kernel module packages.
PACKAGE_ARCH = "${MACHINE_ARCH}"

inherit packagegroup

# Set in local.conf, e.g. KPROF_EXTRA_PACKAGES = "kernel-module-mychardrv".
KPROF_EXTRA_PACKAGES ??= ""

RDEPENDS:${PN} = "${KPROF_EXTRA_PACKAGES} kprof-agent"
