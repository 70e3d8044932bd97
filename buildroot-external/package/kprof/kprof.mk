################################################################################
#
# kprof
#
################################################################################

KPROF_VERSION = 0.1.0
# The kprof repository this external tree lives in (see docs/buildroot.md for
# building a pinned release from git instead).
KPROF_SITE = $(BR2_EXTERNAL_KPROF_PATH)/..
KPROF_SITE_METHOD = local
KPROF_SUBDIR = agent
KPROF_LICENSE = MIT or Apache-2.0
KPROF_LICENSE_FILES = LICENSE-APACHE LICENSE-MIT
# Host build outputs and captures of a developer checkout are no source.
KPROF_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude /target --exclude /target-* --exclude /kprof-captures \
	--exclude /fuzz/target

# The agent is one member of a cargo workspace (lock file at the top): the
# download step that vendors crates for git/tarball sites does not run for a
# local site, so vendor here, like support/download/cargo-post-process does.
define KPROF_VENDOR_CRATES
	mkdir -p $(@D)/.cargo $(BR_CARGO_HOME)
	cd $(@D) && $(HOST_MAKE_ENV) $(PKG_COMMON_CARGO_ENV) \
		flock $(BR_CARGO_HOME)/.br-lock \
		cargo vendor --locked --manifest-path $(KPROF_SUBDIR)/Cargo.toml \
		VENDOR > $(@D)/.cargo/config.toml
endef
KPROF_PRE_BUILD_HOOKS += KPROF_VENDOR_CRATES

# Keep DWARF in the build directory's copy of the agent: Buildroot strips the
# target copy, the unstripped one goes to images/kprof-symbols.
KPROF_CARGO_ENV = \
	CARGO_PROFILE_RELEASE_DEBUG=limited \
	CARGO_PROFILE_RELEASE_STRIP=none

# The kernel options kprof needs: the same fragment the Yocto layer and the
# virtual board use, plus the one of the kernel architecture if there is one.
KPROF_KCONFIG_DIR = $(BR2_EXTERNAL_KPROF_PATH)/../meta-kprof/recipes-kernel/linux/files
KPROF_KCONFIG_ARCH = $(if $(filter x86_64 i386 x86,$(KERNEL_ARCH)),x86,$(KERNEL_ARCH))
KPROF_KCONFIG_FRAGMENTS = \
	$(KPROF_KCONFIG_DIR)/kprof.cfg \
	$(wildcard $(KPROF_KCONFIG_DIR)/kprof-$(KPROF_KCONFIG_ARCH).cfg)
KPROF_KCONFIG_ON = \
	$(shell sed -n 's/^\(CONFIG_[A-Z0-9_]*\)=y$$/\1/p' $(KPROF_KCONFIG_FRAGMENTS))
KPROF_KCONFIG_OFF = \
	$(shell sed -n 's/^# \(CONFIG_[A-Z0-9_]*\) is not set$$/\1/p' $(KPROF_KCONFIG_FRAGMENTS))

define KPROF_LINUX_CONFIG_FIXUPS
	$(foreach opt,$(KPROF_KCONFIG_ON),$(call KCONFIG_ENABLE_OPT,$(opt))$(sep))
	$(foreach opt,$(KPROF_KCONFIG_OFF),$(call KCONFIG_DISABLE_OPT,$(opt))$(sep))
endef

ifeq ($(BR2_PACKAGE_KPROF_MODULE_DEBUG_INFO),y)
define KPROF_UNSTRIP_TARGET_MODULES
	$(BR2_EXTERNAL_KPROF_PATH)/package/kprof/kprof-symbols unstrip-modules \
		$(TARGET_DIR) $(LINUX_DIR) $(BUILD_DIR) $(TARGET_READELF)
endef
KPROF_TARGET_FINALIZE_HOOKS += KPROF_UNSTRIP_TARGET_MODULES
endif

ifeq ($(BR2_PACKAGE_KPROF_EXPORT_SYMBOLS),y)
define KPROF_EXPORT_SYMBOLS
	$(BR2_EXTERNAL_KPROF_PATH)/package/kprof/kprof-symbols export \
		$(TARGET_DIR) $(LINUX_DIR) $(BUILD_DIR) $(TARGET_READELF) \
		$(BINARIES_DIR)/kprof-symbols \
		$(@D)/target/$(RUSTC_TARGET_NAME)/release/kprof-agent
endef
KPROF_TARGET_FINALIZE_HOOKS += KPROF_EXPORT_SYMBOLS
endif

$(eval $(cargo-package))
