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
}

pub fn read_firmware(root: &HostRoot) -> FirmwareState {
    let tables = HostPath::sys("firmware/acpi/tables");
    FirmwareState {
        efi_boot: root.is_dir(&HostPath::sys("firmware/efi")),
        acpi_dmar: root.exists(&tables.join("DMAR")),
        acpi_ivrs: root.exists(&tables.join("IVRS")),
        acpi_tables_visible: root.list_dir(&tables).is_ok(),
        dev_kvm: root.exists(&HostPath::dev("kvm")),
    }
}
