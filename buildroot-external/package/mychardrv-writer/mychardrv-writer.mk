################################################################################
#
# mychardrv-writer
#
################################################################################

# The example program of the kprof repository, at the commit kprof.mk pins.
MYCHARDRV_WRITER_VERSION = 0855489261d2104c324f2bbb93b102663a7f2240
MYCHARDRV_WRITER_SITE = https://github.com/kprof/kprof.git
MYCHARDRV_WRITER_SITE_METHOD = git
MYCHARDRV_WRITER_LICENSE = MIT or Apache-2.0
MYCHARDRV_WRITER_LICENSE_FILES = LICENSE-APACHE LICENSE-MIT

define MYCHARDRV_WRITER_BUILD_CMDS
	$(TARGET_MAKE_ENV) $(MAKE) -C $(@D)/examples/mychardrv-writer \
		CC="$(TARGET_CC)" CFLAGS="$(TARGET_CFLAGS)" LDFLAGS="$(TARGET_LDFLAGS)"
endef

define MYCHARDRV_WRITER_INSTALL_TARGET_CMDS
	$(TARGET_MAKE_ENV) $(MAKE) -C $(@D)/examples/mychardrv-writer \
		DESTDIR=$(TARGET_DIR) PREFIX=/usr install
endef

$(eval $(generic-package))
