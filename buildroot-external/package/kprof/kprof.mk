################################################################################
#
# kprof
#
################################################################################

# A commit of the kprof repository; mychardrv.mk pins the same one.
KPROF_VERSION = 0855489261d2104c324f2bbb93b102663a7f2240
KPROF_SITE = https://github.com/kprof/kprof.git
KPROF_SITE_METHOD = git
# The agent is a member of the workspace at the top of the repository: the
# download step vendors every crate of the workspace's Cargo.lock, and cargo
# writes to the workspace's target/ directory, $(KPROF_DIR)/target.
KPROF_SUBDIR = agent
# (ci/buildroot/crate-licenses writes this block from the download tarball; Buildroot's
# cargo infrastructure alone would say "vendored dependencies licenses probably not listed").
# Licences: the agent's and those of the vendored crates compiled into it
KPROF_LICENSE = \
	MIT or Apache-2.0 (kprof), \
	0BSD or MIT or Apache-2.0 (adler2), \
	Apache-2.0 WITH LLVM-exception or Apache-2.0 or MIT (linux-raw-sys, rustix), \
	BSD-3-Clause (zstd-safe, zstd-sys), \
	MIT (generic-array, simd-adler32, zmij), \
	MIT or Apache-2.0 (bitflags, block-buffer, cfg-if, cpufeatures, crc32fast, crypto-common, digest, errno, filetime, flate2, itoa, libc, serde, serde_core, serde_json, sha2, tar, typenum, xattr), \
	MIT or Zlib or Apache-2.0 (miniz_oxide), \
	Unlicense or MIT (memchr), \
	Zlib (zlib-rs)
KPROF_LICENSE_FILES = \
	LICENSE-APACHE \
	LICENSE-MIT \
	VENDOR/adler2/LICENSE-0BSD \
	VENDOR/adler2/LICENSE-APACHE \
	VENDOR/adler2/LICENSE-MIT \
	VENDOR/bitflags/LICENSE-APACHE \
	VENDOR/bitflags/LICENSE-MIT \
	VENDOR/block-buffer-0.10.4/LICENSE-APACHE \
	VENDOR/block-buffer-0.10.4/LICENSE-MIT \
	VENDOR/cfg-if/LICENSE-APACHE \
	VENDOR/cfg-if/LICENSE-MIT \
	VENDOR/cpufeatures-0.2.17/LICENSE-APACHE \
	VENDOR/cpufeatures-0.2.17/LICENSE-MIT \
	VENDOR/crc32fast/LICENSE-APACHE \
	VENDOR/crc32fast/LICENSE-MIT \
	VENDOR/crypto-common-0.1.7/LICENSE-APACHE \
	VENDOR/crypto-common-0.1.7/LICENSE-MIT \
	VENDOR/digest-0.10.7/LICENSE-APACHE \
	VENDOR/digest-0.10.7/LICENSE-MIT \
	VENDOR/errno/LICENSE-APACHE \
	VENDOR/errno/LICENSE-MIT \
	VENDOR/filetime/LICENSE-APACHE \
	VENDOR/filetime/LICENSE-MIT \
	VENDOR/flate2/LICENSE-APACHE \
	VENDOR/flate2/LICENSE-MIT \
	VENDOR/generic-array/LICENSE \
	VENDOR/itoa/LICENSE-APACHE \
	VENDOR/itoa/LICENSE-MIT \
	VENDOR/libc/LICENSE-APACHE \
	VENDOR/libc/LICENSE-MIT \
	VENDOR/linux-raw-sys/LICENSE-APACHE \
	VENDOR/linux-raw-sys/LICENSE-MIT \
	VENDOR/memchr/COPYING \
	VENDOR/memchr/LICENSE-MIT \
	VENDOR/memchr/UNLICENSE \
	VENDOR/miniz_oxide/LICENSE \
	VENDOR/miniz_oxide/LICENSE-APACHE.md \
	VENDOR/miniz_oxide/LICENSE-MIT.md \
	VENDOR/miniz_oxide/LICENSE-ZLIB.md \
	VENDOR/rustix/LICENSE-APACHE \
	VENDOR/rustix/LICENSE-MIT \
	VENDOR/serde/LICENSE-APACHE \
	VENDOR/serde/LICENSE-MIT \
	VENDOR/serde_core/LICENSE-APACHE \
	VENDOR/serde_core/LICENSE-MIT \
	VENDOR/serde_json/LICENSE-APACHE \
	VENDOR/serde_json/LICENSE-MIT \
	VENDOR/sha2-0.10.9/LICENSE-APACHE \
	VENDOR/sha2-0.10.9/LICENSE-MIT \
	VENDOR/simd-adler32/LICENSE.md \
	VENDOR/tar/LICENSE-APACHE \
	VENDOR/tar/LICENSE-MIT \
	VENDOR/typenum/LICENSE \
	VENDOR/typenum/LICENSE-APACHE \
	VENDOR/typenum/LICENSE-MIT \
	VENDOR/xattr/LICENSE-APACHE \
	VENDOR/xattr/LICENSE-MIT \
	VENDOR/zlib-rs/LICENSE \
	VENDOR/zmij/LICENSE-MIT \
	VENDOR/zstd-safe/LICENSE \
	VENDOR/zstd-sys/LICENSE \
	VENDOR/zstd-sys/LICENSE.BSD-3-Clause \
	VENDOR/zstd-sys/zstd/COPYING \
	VENDOR/zstd-sys/zstd/LICENSE
# (end of the licences written by ci/buildroot/crate-licenses)

# With KPROF_OVERRIDE_SRCDIR (a checkout, see docs/buildroot.md) Buildroot
# rsyncs the checkout and skips the download step, which is what vendors the
# crates for a git site: vendor them from the checkout's Cargo.lock, as
# support/download/cargo-post-process does. Before the build, not after the
# rsync, because host-rustc is only a dependency of the build.
ifneq ($(KPROF_OVERRIDE_SRCDIR),)
KPROF_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = \
	--exclude /target --exclude /target-* --exclude /kprof-captures \
	--exclude /fuzz/target
define KPROF_VENDOR_CRATES
	mkdir -p $(KPROF_DIR)/.cargo $(BR_CARGO_HOME)
	cd $(KPROF_DIR) && $(HOST_MAKE_ENV) $(PKG_COMMON_CARGO_ENV) \
		flock $(BR_CARGO_HOME)/.br-lock \
		cargo vendor --locked --manifest-path $(KPROF_SUBDIR)/Cargo.toml \
		VENDOR > $(KPROF_DIR)/.cargo/config.toml
endef
KPROF_PRE_BUILD_HOOKS += KPROF_VENDOR_CRATES
endif

# cargo refuses --profile next to the --release the cargo infrastructure
# passes, so the release profile is made the workspace's size-optimised
# [profile.agent], which Yocto and ci/build-agent build
# (ci/checks/check-br-profile keeps the two equal). These come after the
# infrastructure's CARGO_PROFILE_RELEASE_* and win. DWARF stays in the build
# directory's copy for images/kprof-symbols; Buildroot strips the target's.
KPROF_CARGO_ENV = \
	CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
	CARGO_PROFILE_RELEASE_LTO=fat \
	CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
	CARGO_PROFILE_RELEASE_PANIC=abort \
	CARGO_PROFILE_RELEASE_DEBUG=limited \
	CARGO_PROFILE_RELEASE_STRIP=none

# The infrastructure builds the dev profile (target/<triple>/debug) with
# BR2_ENABLE_DEBUG, the release one otherwise.
KPROF_AGENT_UNSTRIPPED = \
	$(KPROF_DIR)/target/$(RUSTC_TARGET_NAME)/$(if $(BR2_ENABLE_DEBUG),debug,release)/kprof-agent

# The kernel options kprof needs: the fragments of the Yocto layer, copied
# here so that this tree works on its own (ci/checks/check-br-standalone
# keeps the copies equal), the one of the kernel architecture if there is one.
KPROF_KCONFIG_ARCH = $(if $(filter x86_64 i386 x86,$(KERNEL_ARCH)),x86,$(KERNEL_ARCH))
KPROF_KCONFIG_FRAGMENTS = \
	$(KPROF_PKGDIR)/kprof.cfg \
	$(wildcard $(KPROF_PKGDIR)/kprof-$(KPROF_KCONFIG_ARCH).cfg)
KPROF_KCONFIG_ON = \
	$(shell sed -n 's/^\(CONFIG_[A-Z0-9_]*\)=y$$/\1/p' $(KPROF_KCONFIG_FRAGMENTS))
KPROF_KCONFIG_OFF = \
	$(shell sed -n 's/^# \(CONFIG_[A-Z0-9_]*\) is not set$$/\1/p' $(KPROF_KCONFIG_FRAGMENTS))

define KPROF_LINUX_CONFIG_FIXUPS
	$(foreach opt,$(KPROF_KCONFIG_ON),$(call KCONFIG_ENABLE_OPT,$(opt))$(sep))
	$(foreach opt,$(KPROF_KCONFIG_OFF),$(call KCONFIG_DISABLE_OPT,$(opt))$(sep))
endef

# Target-finalize hooks run in Buildroot's top directory, not in a package's
# build directory ($(@D) is "."): every path is absolute.
ifeq ($(BR2_PACKAGE_KPROF_MODULE_DEBUG_INFO),y)
define KPROF_UNSTRIP_TARGET_MODULES
	$(KPROF_PKGDIR)/kprof-symbols unstrip-modules \
		$(TARGET_DIR) $(LINUX_DIR) $(BUILD_DIR) $(TARGET_READELF)
endef
KPROF_TARGET_FINALIZE_HOOKS += KPROF_UNSTRIP_TARGET_MODULES
endif

ifeq ($(BR2_PACKAGE_KPROF_EXPORT_SYMBOLS),y)
define KPROF_EXPORT_SYMBOLS
	$(KPROF_PKGDIR)/kprof-symbols export \
		$(TARGET_DIR) $(LINUX_DIR) $(BUILD_DIR) $(TARGET_READELF) \
		$(BINARIES_DIR)/kprof-symbols \
		$(KPROF_AGENT_UNSTRIPPED)
endef
KPROF_TARGET_FINALIZE_HOOKS += KPROF_EXPORT_SYMBOLS
endif

# kprof/marker.h, for applications that mark their phases on kprof's timeline
# (docs/markers.md).
KPROF_INSTALL_STAGING = YES
define KPROF_INSTALL_STAGING_CMDS
	$(INSTALL) -D -m 0644 $(@D)/include/kprof/marker.h \
		$(STAGING_DIR)/usr/include/kprof/marker.h
endef

$(eval $(cargo-package))
