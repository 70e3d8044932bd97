# The kprof kernel configuration fragment, applied only when the kprof override is active
# (the kprof/profiling configuration fragment or conf/distro/include/kprof-profiling.inc), so
# adding the layer alone leaves the kernel's signature untouched.
FILESEXTRAPATHS:prepend:kprof := "${THISDIR}/files:"

SRC_URI:append:kprof = " file://kprof.cfg ${@kprof_arch_fragment(d)}"

# Options that exist on one architecture only live in their own fragment, so that the
# kernel-yocto configuration audit does not warn about symbols the architecture lacks.
def kprof_arch_fragment(d):
    fragments = {
        'x86': 'file://kprof-x86.cfg',
        'arm64': 'file://kprof-arm64.cfg',
    }
    return fragments.get(d.getVar('ARCH'), '')
