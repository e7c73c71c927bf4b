//! What a Windows gaming VM can and cannot be, said plainly (shared/
//! research/playable-vm.md, "Windows 11, anti-cheat, ReBAR"): shown by the
//! New VM page's Features step and the README, so nobody builds a VM for a
//! game that refuses VMs or chases a Code 43 that a setting cannot fix.

/// (topic, what is true) — in the order a user meets them.
pub const REALITIES: &[(&str, &str)] = &[
    (
        "Windows 11 needs TPM 2.0, Secure Boot and SMM",
        "The domain gets UEFI firmware with Microsoft's keys enrolled (OVMF's secboot variables), <smm state='on'/> on q35, and an emulated TPM 2.0 (swtpm, tpm-crb). Without any one of them Windows 11's setup refuses to install. Windows 10 needs none of them.",
    ),
    (
        "Kernel anti-cheat may refuse any VM",
        "Some games' kernel anti-cheat (Riot Vanguard; BattlEye and EasyAntiCheat where the game's maker turns it on) detects virtual machines and refuses to start or bans. Hiding KVM and changing the SMBIOS does not defeat them and is against their terms: check the game before building the VM for it. Many others run fine.",
    ),
    (
        "Code 43 on NVIDIA",
        "NVIDIA's drivers from R465 (2021) accept VMs: \"Hide KVM\" is only for older drivers. A Code 43 today is more often a missing or wrong ROM, a laptop GPU, or Resizable BAR (below).",
    ),
    (
        "Resizable BAR",
        "QEMU does not pass the Resizable BAR capability: the guest sees the BAR size the host left. Set it on the host while the card is unbound (echo N > /sys/bus/pci/devices/ADDR/resource1_resize, a size the card offers) and give OVMF a 64-bit MMIO window large enough for it; or turn Resizable BAR off in the firmware if the guest shows Code 43.",
    ),
];
