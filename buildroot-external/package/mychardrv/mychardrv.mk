################################################################################
#
# mychardrv
#
################################################################################

MYCHARDRV_VERSION = 1.0
# The example module of the kprof repository this external tree lives in.
MYCHARDRV_SITE = $(BR2_EXTERNAL_KPROF_PATH)/../examples/mychardrv
MYCHARDRV_SITE_METHOD = local
MYCHARDRV_LICENSE = GPL-2.0

$(eval $(kernel-module))
$(eval $(generic-package))
