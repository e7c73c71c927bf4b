//! Domain capabilities (`virsh domcapabilities`) as a model, pure XML →
//! model: what this host's QEMU and KVM can actually give a guest. The template and the tuning ask it which
//! Hyper-V enlightenments exist here, which UEFI loaders are installed and
//! whether a TPM can be emulated, instead of guessing.

use crate::domain::xml::{Document, Element, XmlError};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DomainCaps {
    /// The QEMU binary.
    pub emulator: String,
    /// `kvm` or `qemu` (TCG).
    pub virttype: String,
    /// The machine type these caps are for, e.g. `pc-q35-9.0`.
    pub machine: String,
    pub arch: String,
    pub max_vcpus: Option<u32>,
    pub iothreads: bool,
    pub efi: bool,
    /// UEFI firmware images libvirt knows (OVMF_CODE…).
    pub loaders: Vec<String>,
    pub secure_boot: bool,
    pub host_passthrough: bool,
    /// Hyper-V enlightenments this host supports; `None` when the caps do not
    /// list them (old libvirt) — then nothing is known either way.
    pub hyperv: Option<Vec<String>>,
    /// TPM models (`tpm-crb`, `tpm-tis`) and backends (`emulator` = swtpm).
    pub tpm_models: Vec<String>,
    pub tpm_backends: Vec<String>,
    /// Display types this QEMU was built with (`spice`, `vnc`…); `None` when
    /// the caps do not list them. Debian 13 ships SPICE in a package of its
    /// own (qemu-system-modules-spice), a Recommends a minimal install lacks.
    pub graphics: Option<Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
pub enum CapsError {
    #[error("domain capabilities are not well-formed XML: {0}")]
    Xml(#[from] XmlError),
    #[error("the root element is <{0}>, not <domainCapabilities>")]
    NotCaps(String),
}

fn supported(el: Option<&Element>) -> bool {
    el.is_some_and(|e| e.attr("supported") == Some("yes"))
}

/// The `<value>`s of `<enum name=NAME>` under `el`.
fn enum_values(el: Option<&Element>, name: &str) -> Vec<String> {
    el.into_iter()
        .flat_map(|e| e.elements())
        .filter(|e| e.name == "enum" && e.attr("name") == Some(name))
        .flat_map(|e| e.elements())
        .filter(|v| v.name == "value")
        .map(|v| v.text().trim().to_string())
        .collect()
}

fn text_of(el: &Element, name: &str) -> String {
    el.child(name)
        .map(|c| c.text().trim().to_string())
        .unwrap_or_default()
}

impl DomainCaps {
    pub fn parse(xml: &str) -> Result<DomainCaps, CapsError> {
        let doc = Document::parse(xml)?;
        let root = &doc.root;
        if root.name != "domainCapabilities" {
            return Err(CapsError::NotCaps(root.name.clone()));
        }
        let os = root.child("os");
        let loader = os.and_then(|o| o.child("loader"));
        let cpu_modes = root.child("cpu");
        let host_passthrough = cpu_modes.is_some_and(|c| {
            c.elements().any(|m| {
                m.name == "mode"
                    && m.attr("name") == Some("host-passthrough")
                    && m.attr("supported") == Some("yes")
            })
        });
        let hyperv = root.child("features").and_then(|f| f.child("hyperv"));
        let hyperv = match hyperv {
            Some(h) if h.attr("supported") == Some("yes") => Some(enum_values(Some(h), "features")),
            Some(_) => Some(Vec::new()),
            None => None,
        };
        let tpm = root.child("devices").and_then(|d| d.child("tpm"));
        let graphics = root
            .child("devices")
            .and_then(|d| d.child("graphics"))
            .map(|g| {
                if supported(Some(g)) {
                    enum_values(Some(g), "type")
                } else {
                    Vec::new()
                }
            });
        let tpm_ok = supported(tpm);
        Ok(DomainCaps {
            emulator: text_of(root, "path"),
            virttype: text_of(root, "domain"),
            machine: text_of(root, "machine"),
            arch: text_of(root, "arch"),
            max_vcpus: root
                .child("vcpu")
                .and_then(|v| v.attr("max"))
                .and_then(|m| m.parse().ok()),
            iothreads: supported(root.child("iothreads")),
            efi: enum_values(os, "firmware").iter().any(|f| f == "efi") || supported(loader),
            loaders: loader
                .into_iter()
                .flat_map(|l| l.elements())
                .filter(|v| v.name == "value")
                .map(|v| v.text().trim().to_string())
                .collect(),
            secure_boot: enum_values(loader, "secure").iter().any(|s| s == "yes"),
            host_passthrough,
            hyperv,
            tpm_models: if tpm_ok {
                enum_values(tpm, "model")
            } else {
                Vec::new()
            },
            tpm_backends: if tpm_ok {
                enum_values(tpm, "backendModel")
            } else {
                Vec::new()
            },
            graphics,
        })
    }

    /// Whether a Hyper-V enlightenment can be turned on here. Unknown (no list)
    /// counts as yes: that is what libvirt before the list did.
    pub fn hyperv_supports(&self, feature: &str) -> bool {
        match &self.hyperv {
            Some(list) => list.iter().any(|f| f == feature),
            None => true,
        }
    }

    /// The UEFI code image to use: the secure-boot build for Windows 11, the
    /// plain one otherwise (4M builds preferred; Microsoft-keys `.ms` variants
    /// are the same code and need their own VARS).
    pub fn pick_loader(&self, secure: bool) -> Option<&str> {
        let is_secure =
            |l: &str| l.contains("secboot") || l.contains(".secure") || l.contains(".ms.");
        let mut candidates: Vec<&str> = self
            .loaders
            .iter()
            .map(String::as_str)
            .filter(|l| is_secure(l) == secure)
            .filter(|l| !l.contains("snakeoil"))
            .collect();
        candidates.sort_by_key(|l| (!l.contains("4M"), l.contains(".ms."), l.len()));
        candidates.first().copied()
    }
}
