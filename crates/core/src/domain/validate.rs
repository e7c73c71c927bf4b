//! Is this domain XML one libvirt will take, on this host? Two checks:
//! libvirt's own RNG schema through `virt-xml-validate` (libvirt-clients),
//! and the host's domain capabilities (Hyper-V features, vCPU limit, TPM,
//! UEFI).

use super::caps::DomainCaps;
use super::inspect::hyperv_on;
use super::xml::Document;
use std::io::Write;

/// The schema check's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaResult {
    Valid,
    /// libvirt's schema rejected it; the validator's messages.
    Invalid(String),
    /// `virt-xml-validate` is not installed (or could not run).
    Unavailable(String),
}

/// Run `virt-xml-validate` on the text (written to a temporary file).
pub fn schema_check(xml: &str) -> SchemaResult {
    let mut file = match tempfile::Builder::new()
        .prefix("vfio-assistant-")
        .suffix(".xml")
        .tempfile()
    {
        Ok(f) => f,
        Err(e) => return SchemaResult::Unavailable(format!("no temporary file: {e}")),
    };
    if let Err(e) = file.write_all(xml.as_bytes()) {
        return SchemaResult::Unavailable(format!("writing a temporary file: {e}"));
    }
    let out = crate::syspath::command("virt-xml-validate")
        .arg(file.path())
        .arg("domain")
        .output();
    match out {
        Err(e) => SchemaResult::Unavailable(format!(
            "virt-xml-validate could not run ({e}); it comes with libvirt-clients (Debian/Ubuntu), libvirt-client (Fedora) or libvirt (Arch)"
        )),
        Ok(o) if o.status.success() => SchemaResult::Valid,
        // 127: the shell script found no xmllint (it needs libxml2-utils):
        // nothing was checked, the domain was not refused.
        Ok(o) if o.status.code() == Some(127) => SchemaResult::Unavailable(format!(
            "virt-xml-validate could not run its validator ({}); install libxml2-utils (Debian/Ubuntu), libxml2 (Fedora, Arch)",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(o) => {
            let path = file.path().display().to_string();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stderr),
                String::from_utf8_lossy(&o.stdout)
            );
            // Name the document, not our temporary file.
            SchemaResult::Invalid(text.replace(&path, "domain").trim().to_string())
        }
    }
}

/// What in the domain this host cannot give, in plain sentences.
pub fn caps_problems(doc: &Document, caps: &DomainCaps) -> Vec<String> {
    let root = &doc.root;
    let mut out = Vec::new();
    let missing: Vec<String> = hyperv_on(doc)
        .into_iter()
        .filter(|f| !caps.hyperv_supports(f))
        .collect();
    if !missing.is_empty() {
        out.push(format!(
            "Hyper-V enlightenments this host's KVM does not offer: {} — QEMU will refuse to start the guest; drop them (the CPU page's Apply does, from the capabilities; or in a terminal: domain tune).",
            missing.join(", ")
        ));
    }
    let vcpus = root
        .child("vcpu")
        .and_then(|v| v.text().trim().parse::<u32>().ok());
    if let (Some(n), Some(max)) = (vcpus, caps.max_vcpus)
        && n > max
    {
        out.push(format!("{n} vCPUs, but this machine type allows {max}."));
    }
    let os = root.child("os");
    let wants_efi =
        os.is_some_and(|o| o.attr("firmware") == Some("efi") || o.child("loader").is_some());
    if wants_efi && !caps.efi {
        out.push("The domain boots UEFI but libvirt knows no OVMF firmware here: install ovmf (Debian/Ubuntu), edk2-ovmf (Fedora, Arch).".into());
    }
    let wants_secure = os
        .and_then(|o| o.child("loader"))
        .is_some_and(|l| l.attr("secure") == Some("yes"));
    if wants_secure && !caps.secure_boot {
        out.push("Secure Boot is asked for but no secure-boot OVMF build is installed.".into());
    }
    let devices = root.child("devices");
    if let Some(types) = &caps.graphics {
        for g in devices
            .into_iter()
            .flat_map(|d| d.elements())
            .filter(|e| e.name == "graphics")
        {
            let t = g.attr("type").unwrap_or("");
            if !t.is_empty() && !types.iter().any(|x| x == t) {
                out.push(format!(
                    "This host's QEMU has no {t} display (it has: {}){} — install {}, then check again.",
                    if types.is_empty() { "none".to_string() } else { types.join(", ") },
                    if t == "spice" {
                        ": Looking Glass's keyboard, mouse, clipboard and sound go through SPICE"
                    } else {
                        ""
                    },
                    if t == "spice" {
                        "qemu-system-modules-spice (Debian 13, Ubuntu) or qemu-ui-spice-core (Fedora, Arch)"
                    } else {
                        "your distribution's QEMU display module"
                    }
                ));
            }
        }
    }
    for tpm in devices
        .into_iter()
        .flat_map(|d| d.elements())
        .filter(|e| e.name == "tpm")
    {
        if let Some(model) = tpm.attr("model")
            && !caps.tpm_models.iter().any(|m| m == model)
        {
            out.push(format!(
                "TPM model '{model}' is not supported by this QEMU."
            ));
        }
        let backend = tpm.child("backend").and_then(|b| b.attr("type"));
        if backend == Some("emulator") && !caps.tpm_backends.iter().any(|b| b == "emulator") {
            out.push(
                "An emulated TPM needs swtpm: install swtpm (and swtpm-tools on Debian/Ubuntu)."
                    .into(),
            );
        }
    }
    if root.child("cpu").and_then(|c| c.attr("mode")) == Some("host-passthrough")
        && !caps.host_passthrough
    {
        out.push("host-passthrough CPU is not available (is this KVM? TCG cannot pass the host CPU through).".into());
    }
    out
}
