//! Firmware facts: EFI boot, the ACPI tables that announce an IOMMU (Intel DMAR,
//! AMD IVRS), and whether `/dev/kvm` exists.

use crate::sysroot::{HostPath, HostRoot};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FirmwareState {
    /// Booted through UEFI (`sys/firmware/efi` exists).
    pub efi_boot: bool,
    /// Intel's DMA remapping table: VT-d is enabled in the firmware.
    pub acpi_dmar: bool,
    /// AMD's I/O virtualization table: AMD-Vi/IOMMU is enabled in the firmware.
    pub acpi_ivrs: bool,
    /// Whether the ACPI table directory could be seen at all (it is root-only on
    /// some systems; then `acpi_*` false means "unknown", not "absent").
    pub acpi_tables_visible: bool,
    pub dev_kvm: bool,
    /// The board's maker and model (DMI `board_vendor`, `board_name`): the
    /// firmware's setting names differ by maker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub board_vendor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub board_name: Option<String>,
}

pub fn read_firmware(root: &HostRoot) -> FirmwareState {
    let tables = HostPath::sys("firmware/acpi/tables");
    FirmwareState {
        efi_boot: root.is_dir(&HostPath::sys("firmware/efi")),
        acpi_dmar: root.exists(&tables.join("DMAR")),
        acpi_ivrs: root.exists(&tables.join("IVRS")),
        acpi_tables_visible: root.list_dir(&tables).is_ok(),
        dev_kvm: root.exists(&HostPath::dev("kvm")),
        board_vendor: dmi(root, "board_vendor"),
        board_name: dmi(root, "board_name"),
    }
}

/// A DMI id field, when readable and not the firmware's placeholder.
fn dmi(root: &HostRoot, name: &str) -> Option<String> {
    let v = root
        .read_attr(&HostPath::sys("class/dmi/id").join(name))
        .ok()?;
    let v = v.trim();
    let placeholder = v.is_empty()
        || v.eq_ignore_ascii_case("To be filled by O.E.M.")
        || v.eq_ignore_ascii_case("Default string");
    (!placeholder).then(|| v.chars().take(80).collect())
}
