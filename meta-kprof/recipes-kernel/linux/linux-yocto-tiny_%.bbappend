require linux-yocto-kprof.inc
