//! Which card is the VM's on the desktops people own (issue 40): a CPU with
//! its integrated GPU and a discrete card, on real machines' trees — an AM5
//! desktop (ASUS B650E-F, Ryzen 5 7600X, Raphael iGPU, RX 7900 XT), an
//! Alder Lake desktop (UHD 770, RX 6700 XT, RX 560), a TRX40 with three
//! cards and an X570 with two — and with the IDs of the parts most bought
//! in 2023-26 put in their place (Raphael, Granite Ridge and Phoenix iGPUs,
//! UHD 770 and Arc iGPUs; RTX 30/40/50 and Radeon 6000/7000/9000 cards).
//! The iGPU is never the VM's while a card exists; a card with the host's
//! screen on it gets the step that moves the screen; several cards are
//! asked about, the stronger first; the iGPU the firmware turned off is
//! named.

use crate::support::desktops::*;
use crate::support::hosts::{base_host, bind};
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::report::findings::{FindingsRequest, host_findings};
use vfio_assistant::report::next_step::{NextAction, NextStep, next_step_with};
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::tuning::kinds::Kind;

fn step(r: &Path, chosen: Option<&str>) -> NextStep {
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let findings = host_findings(&root, &snap, &FindingsRequest::default());
    next_step_with(&snap, &findings, chosen)
}

const IGPUS_AMD: &[(u16, u16, &str)] = &[
    (0x1002, 0x164e, "Raphael"),
    (0x1002, 0x13c0, "Granite Ridge"),
    (0x1002, 0x15bf, "Phoenix1"),
];
const CARDS: &[(u16, u16, &str)] = &[
    (0x1002, 0x744c, "amdgpu"), // RX 7900 XT (the machine's own)
    (0x10de, 0x2206, "nvidia"), // RTX 3080
    (0x10de, 0x2786, "nvidia"), // RTX 4070
    (0x10de, 0x2b85, "nvidia"), // RTX 5090
    (0x1002, 0x73bf, "amdgpu"), // RX 6800 XT
    (0x1002, 0x7550, "amdgpu"), // RX 9070 XT
];

#[test]
fn the_card_not_the_igpu_is_the_vms_and_the_screen_moves_first() {
    for igpu in IGPUS_AMD {
        for card in CARDS {
            let what = format!("iGPU {} + card {:04x}:{:04x}", igpu.2, card.0, card.1);
            // The cable in the card: the firmware made it the boot GPU.
            let dir = am5((igpu.0, igpu.1), *card, AM5_CARD);
            let s = step(dir.path(), None);
            match &s.action {
                NextAction::MoveScreen { card: c, to, steps } => {
                    assert_eq!(c, AM5_CARD, "{what}");
                    assert_eq!(to, AM5_IGPU, "{what}");
                    let all = steps.join(" ");
                    assert!(
                        all.contains("Primary Video Device"),
                        "{what}: ASUS's name: {all}"
                    );
                    assert!(
                        all.contains("Integrated Graphics") && all.contains("Force"),
                        "{what}: {all}"
                    );
                    assert!(all.contains("motherboard"), "{what}: the cable: {all}");
                }
                other => panic!("{what}: {other:?}: {}", s.sentence),
            }
            assert!(s.sentence.contains(igpu.2), "{what}: {}", s.sentence);
            assert!(
                s.alternatives.iter().any(|a| matches!(
                    &a.action,
                    NextAction::Tuning { change: Kind::SingleGpuHook, device: Some(d) } if d == AM5_CARD
                )),
                "{what}: single GPU works now"
            );
            // The screen moved (the firmware shows the boot screen on the
            // iGPU): the card is bound, never the iGPU.
            let dir = am5((igpu.0, igpu.1), *card, AM5_IGPU);
            let s = step(dir.path(), None);
            assert_eq!(
                s.action,
                NextAction::Tuning {
                    change: Kind::VfioBoot,
                    device: Some(AM5_CARD.into())
                },
                "{what}: {}",
                s.sentence
            );
            assert!(
                s.why.contains("discrete"),
                "{what}: the evidence is said: {}",
                s.why
            );
        }
    }
}

#[test]
fn an_igpu_the_firmware_turned_off_is_named() {
    let dir = am5((0x1002, 0x164e), CARDS[2], AM5_CARD);
    let r = dir.path();
    for f in ["0000:0f:00.0", "0000:0f:00.1"] {
        remove(r, f);
    }
    let s = step(r, None);
    assert_eq!(s.action, NextAction::ByHand, "{}", s.sentence);
    assert!(s.sentence.contains("integrated graphics"), "{}", s.sentence);
    assert!(
        s.why.contains("Force") && s.why.contains("7600X"),
        "{}",
        s.why
    );
    // A Ryzen 5 7500F has none to turn on: the step says single GPU, and
    // never to enable graphics the CPU lacks.
    cpu(r, "AuthenticAMD", "AMD Ryzen 5 7500F 6-Core Processor");
    let s = step(r, None);
    assert!(!s.sentence.contains("turn on"), "{}", s.sentence);
    assert!(
        !s.sentence.contains("enable it in the firmware"),
        "{}",
        s.sentence
    );
    assert!(
        s.sentence.contains("no integrated graphics"),
        "{}",
        s.sentence
    );
    assert!(s.why.contains("single-GPU"), "{}", s.why);
}

/// The Alder Lake desktop: UHD 770 at 00:02.0, RX 6700 XT (x16) and an
/// RX 560 (x8): the two cards are asked about, the stronger first, the
/// UHD 770 never.
#[test]
fn several_cards_are_asked_about_stronger_first() {
    let dir = base_host(ADL);
    let r = dir.path();
    cpu(r, "GenuineIntel", "12th Gen Intel(R) Core(TM) i7-12700K");
    board(r, "Micro-Star International Co., Ltd.");
    // As they boot before any tuning: each card on its own driver.
    for g in ["0000:03:00.0", "0000:04:00.0"] {
        bind(r, g, "amdgpu");
    }
    bind(r, "0000:00:02.0", "i915");
    // Both ways round: the PCI order does not decide.
    for (strong, weak) in [
        ("0000:04:00.0", "0000:03:00.0"),
        ("0000:03:00.0", "0000:04:00.0"),
    ] {
        link(r, strong, "16.0", 16);
        link(r, weak, "8.0", 8);
        boot_vga(r, "0000:00:02.0", &["0000:00:02.0", strong, weak]);
        let s = step(r, None);
        let NextAction::ChooseGpu { cards } = &s.action else {
            panic!("{:?}: {}", s.action, s.sentence)
        };
        let order: Vec<&str> = cards.iter().map(|c| c.address.as_str()).collect();
        assert_eq!(order, vec![strong, weak], "{}", s.why);
        assert!(cards[0].why.contains("x16"), "{}", cards[0].why);
        // The user picks the weaker: it is the one bound.
        let s = step(r, Some(weak));
        assert_eq!(
            s.action,
            NextAction::Tuning {
                change: Kind::VfioBoot,
                device: Some(weak.into())
            },
            "{}",
            s.sentence
        );
    }
    // The picked card shows the console: the screen moves to the UHD 770,
    // with MSI's setting name and Intel's multi-monitor switch.
    boot_vga(
        r,
        "0000:03:00.0",
        &["0000:00:02.0", "0000:03:00.0", "0000:04:00.0"],
    );
    let s = step(r, Some("03:00.0"));
    let NextAction::MoveScreen { to, steps, .. } = &s.action else {
        panic!("{:?}: {}", s.action, s.sentence)
    };
    assert_eq!(to, "0000:00:02.0");
    let all = steps.join(" ");
    assert!(
        all.contains("Initiate Graphic Adapter") && all.contains("IGD Multi-Monitor"),
        "{all}"
    );
}

/// Intel's Arc iGPU (Arrow Lake, 8086:7d67) and UHD 770 (Raptor Lake,
/// 8086:a780) at 00:02.0 with one card: told integrated by their place.
#[test]
fn intel_igpus_on_the_root_bus_are_integrated() {
    for igpu in [0x7d67u16, 0xa780] {
        let dir = base_host(ADL);
        let r = dir.path();
        remove(r, "0000:04:00.0");
        set_ids(r, "0000:00:02.0", 0x8086, igpu);
        set_ids(r, "0000:03:00.0", 0x10de, 0x2786);
        bind(r, "0000:03:00.0", "nvidia");
        cpu(r, "GenuineIntel", "Intel(R) Core(TM) Ultra 9 285K");
        boot_vga(r, "0000:03:00.0", &["0000:00:02.0", "0000:03:00.0"]);
        let s = step(r, None);
        assert!(
            matches!(&s.action, NextAction::MoveScreen { card, to, .. } if card == "0000:03:00.0" && to == "0000:00:02.0"),
            "8086:{igpu:04x}: {:?}: {}",
            s.action,
            s.sentence
        );
        assert!(s.why.contains("discrete"), "{}", s.why);
    }
}

/// The TRX40 host's three cards (RX 580, GTX 1080, Quadro 2000) as they
/// boot, none on vfio-pci: asked about, all three, the Quadro with the
/// console last among equals.
#[test]
fn three_cards_are_asked_about() {
    let dir = base_host("asrock-trx40-creator-threadripper-3960x.txt");
    let r = dir.path();
    let root = HostRoot::at(r);
    let snap = scan(&root).unwrap();
    let gpus: Vec<String> = snap.gpus().map(|e| e.device.address.clone()).collect();
    assert_eq!(gpus.len(), 3, "{gpus:?}");
    for g in &gpus {
        bind(r, g, "nouveau");
    }
    let console = gpus[0].clone();
    let refs: Vec<&str> = gpus.iter().map(String::as_str).collect();
    boot_vga(r, &console, &refs);
    let s = step(r, None);
    let NextAction::ChooseGpu { cards } = &s.action else {
        panic!("{:?}: {}", s.action, s.sentence)
    };
    assert_eq!(cards.len(), 3);
    assert_eq!(
        cards.last().map(|c| c.address.as_str()),
        Some(console.as_str()),
        "{}",
        s.why
    );
}

/// Two identical cards (the X570's two NVIDIA cards given the RTX 4070's
/// ID): asked about; the one without the console first.
#[test]
fn twin_cards_are_asked_about_the_free_one_first() {
    let dir = base_host("gigabyte-x570-aorus-pro-wifi-ryzen9-3900x.txt");
    let r = dir.path();
    for g in ["0000:0b:00.0", "0000:0c:00.0"] {
        set_ids(r, g, 0x10de, 0x2786);
        bind(r, g, "nvidia");
        link(r, g, "16.0", 16);
    }
    boot_vga(r, "0000:0b:00.0", &["0000:0b:00.0", "0000:0c:00.0"]);
    let s = step(r, None);
    let NextAction::ChooseGpu { cards } = &s.action else {
        panic!("{:?}: {}", s.action, s.sentence)
    };
    assert_eq!(cards[0].address, "0000:0c:00.0");
    assert!(cards[1].why.contains("screen"), "{}", cards[1].why);
}
