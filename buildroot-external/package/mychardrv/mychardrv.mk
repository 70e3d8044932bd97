################################################################################
#
# mychardrv
#
################################################################################

# The example module of the kprof repository, at the commit kprof.mk pins.
MYCHARDRV_VERSION = 0855489261d2104c324f2bbb93b102663a7f2240
MYCHARDRV_SITE = https://github.com/kprof/kprof.git
MYCHARDRV_SITE_METHOD = git
MYCHARDRV_MODULE_SUBDIRS = examples/mychardrv
MYCHARDRV_LICENSE = GPL-2.0
MYCHARDRV_LICENSE_FILES = examples/mychardrv/COPYING
# With MYCHARDRV_OVERRIDE_SRCDIR pointing at a kprof checkout, as for kprof.
MYCHARDRV_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude /target --exclude /target-* --exclude /kprof-captures \
	--exclude /fuzz/target

# Loaded at boot, so that /dev/mychardrv exists for the walk-through: Buildroot's
# S11modules (BusyBox and SysV init) and systemd-modules-load both read
# /etc/modules-load.d/.
define MYCHARDRV_LOAD_AT_BOOT
	$(INSTALL) -D -m 0644 $(MYCHARDRV_PKGDIR)/mychardrv-modules-load.conf \
		$(TARGET_DIR)/etc/modules-load.d/mychardrv.conf
endef
MYCHARDRV_POST_INSTALL_TARGET_HOOKS += MYCHARDRV_LOAD_AT_BOOT

$(eval $(kernel-module))
$(eval $(generic-package))
