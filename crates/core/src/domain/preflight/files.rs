//! The files a domain names (disks, ISOs, firmware, NVRAM, ROMs), what each
//! is for and what was found at its path, and relative paths made absolute.

use super::*;

/// What a file the domain names is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileRole {
    Disk,
    Cdrom,
    /// A GPU ROM file (`<hostdev><rom file=…>`).
    Rom,
    /// An explicit UEFI loader or NVRAM template.
    Firmware,
}

impl FileRole {
    pub(super) fn word(self) -> &'static str {
        match self {
            FileRole::Disk => "disk image",
            FileRole::Cdrom => "ISO",
            FileRole::Rom => "ROM file",
            FileRole::Firmware => "firmware file",
        }
    }
}

/// What was found at a path the domain names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "detail")]
pub enum FileState {
    /// There, a file (or a block device), and QEMU's user can reach it.
    Ok,
    Missing,
    /// Something else (a folder, a FIFO).
    NotAFile(String),
    /// A folder above it that QEMU's user may not enter.
    FolderClosed(String),
    /// Could not tell (e.g. permission denied to us).
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileFact {
    pub path: String,
    pub role: FileRole,
    pub state: FileState,
}

/// The files the domain names: disk and CD sources, ROM files, explicit
/// firmware paths. Each once, in document order.
pub fn referenced_files(doc: &Document) -> Vec<(String, FileRole)> {
    let mut out: Vec<(String, FileRole)> = Vec::new();
    let mut add = |p: &str, role: FileRole| {
        let p = p.trim();
        if !p.is_empty() && !out.iter().any(|(q, _)| q == p) {
            out.push((p.to_string(), role));
        }
    };
    if let Some(devices) = doc.root.child("devices") {
        for d in devices.elements() {
            match d.name.as_str() {
                "disk" => {
                    let role = if d.attr("device") == Some("cdrom") {
                        FileRole::Cdrom
                    } else {
                        FileRole::Disk
                    };
                    if let Some(src) = d.child("source") {
                        let kind = d.attr("type").unwrap_or("file");
                        let p = match kind {
                            "file" => src.attr("file"),
                            "block" => src.attr("dev"),
                            _ => None,
                        };
                        if let Some(p) = p {
                            add(p, role);
                        }
                    }
                }
                "hostdev" => {
                    if let Some(f) = d.child("rom").and_then(|r| r.attr("file")) {
                        add(f, FileRole::Rom);
                    }
                }
                _ => {}
            }
        }
    }
    if let Some(os) = doc.root.child("os") {
        if let Some(l) = os.child("loader") {
            let t = l.text();
            add(&t, FileRole::Firmware);
        }
        if let Some(t) = os.child("nvram").and_then(|n| n.attr("template")) {
            add(t, FileRole::Firmware);
        }
    }
    out
}

/// Attributes that hold a file path, per element, for `absolute_paths`.
fn path_attr(el: &Element) -> Option<&'static str> {
    match el.name.as_str() {
        "source" if el.attr("file").is_some() => Some("file"),
        "source" if el.attr("dev").is_some() => Some("dev"),
        "rom" if el.attr("file").is_some() => Some("file"),
        _ => None,
    }
}

/// Make relative disk, ISO and ROM paths absolute against `base` (the
/// folder the user gave them in): libvirt's schema takes only absolute ones.
pub fn absolute_paths(doc: &mut Document, base: &Path) -> Vec<Edit> {
    let mut edits = Vec::new();
    let Some(devices) = doc.root.child_mut("devices") else {
        return edits;
    };
    for dev in devices.elements_mut() {
        let dev_name = dev.name.clone();
        for child in dev.elements_mut() {
            let Some(attr) = path_attr(child) else {
                continue;
            };
            let Some(value) = child.attr(attr).map(str::to_string) else {
                continue;
            };
            let trimmed = value.trim();
            if trimmed.is_empty() || Path::new(trimmed).is_absolute() {
                continue;
            }
            let abs = base.join(trimmed).display().to_string();
            child.set_attr(attr, &abs);
            edits.push(Edit {
                path: format!("devices/{dev_name}/{}", child.name),
                what: format!("'{trimmed}' → '{abs}'"),
                why: "libvirt needs absolute paths (its schema refuses relative ones, and QEMU does not run in your folder); this is the file you named, from the folder you named it in.".into(),
            });
        }
    }
    edits
}
