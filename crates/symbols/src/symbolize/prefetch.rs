//! Asking the symbol providers for every recorded build-id at once, before the walk: a
//! provider that downloads (debuginfod) fetches them in parallel instead of one at a time as
//! the samples first touch each image.

use super::State;
use linux_perf_data::DsoKey;

impl State<'_> {
    /// Hands the providers the kernel's, the modules' and the header's build-ids; the ones
    /// found on this host are not asked for. Images only seen in MMAP2 build-ids are fetched
    /// when first touched.
    pub(super) fn prefetch(&self) {
        let sources = self.images.sources();
        if sources.providers.is_empty() {
            return;
        }
        let mut images: Vec<(String, String)> = Vec::new();
        if let Some(id) = &self.kernel.build_id {
            images.push((id.clone(), "vmlinux".into()));
        }
        for m in &self.kernel.modules {
            if let Some(id) = &m.build_id {
                images.push((id.clone(), format!("{}.ko", m.name)));
            }
        }
        for (key, id) in &self.images.header_build_ids {
            let name = match key {
                DsoKey::Kernel => "vmlinux".to_string(),
                k => k.name().to_string(),
            };
            images.push((id.clone(), name));
        }
        sources.prefetch(&images);
    }
}
