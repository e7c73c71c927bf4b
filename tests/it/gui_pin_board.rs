//! Drag-to-pin on the CPU page, on the real Ryzen 5 1600 topology (siblings N
//! and N+6): a vCPU chip dragged from the tray onto a host thread is pinned
//! there and dragged back to the tray is unpinned; the accessible selector does
//! the same; the validator's warning shows next to the vCPU at once; the
//! planner fills the board; and the board's pinning is applied to a real
//! libvirt domain (the test driver).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may unwrap

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use std::path::Path;
use vfio_assistant::host::scan;
use vfio_assistant::pinning::board::{Board, Chip};
use vfio_assistant::sysroot::HostRoot;
use vfio_assistant::ui::app::App;
use vfio_assistant::ui::state::{Page, State};

fn ryzen() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology/ghw-amd-ryzen5-1600")
}

fn board_harness(board: Board) -> Harness<'static, App> {
    let snap = scan(&HostRoot::at(ryzen())).unwrap();
    let state = State {
        page: Page::Cpu,
        board,
        ..State::default()
    };
    let app = App::with_snapshot(snap, state);
    let mut h = crate::support::gui::harness(app, [1400.0, 1400.0]);
    h.run();
    h
}

fn drag(h: &mut Harness<'static, App>, from: egui::Pos2, to: egui::Pos2) {
    h.hover_at(from);
    h.run();
    h.drag_at(from);
    h.run();
    h.hover_at(from + egui::vec2(8.0, 8.0));
    h.run();
    h.hover_at(to);
    h.run();
    h.drop_at(to);
    h.run();
}

#[test]
fn drag_a_chip_onto_a_thread_and_back_to_the_tray() {
    let mut h = board_harness(Board {
        vcpus: 2,
        ..Board::default()
    });
    let chip = h.get_all_by_label("vCPU 0").next().unwrap().rect().center();
    let target = h.get_by_label("CPU 3").rect().center();
    drag(&mut h, chip, target);
    assert_eq!(
        h.state().state.board.pins.get(&0),
        Some(&3),
        "vCPU 0 pinned to CPU 3 by drag"
    );
    h.get_by_label("CPU 3 v0");
    // Back to the tray: unpinned again.
    let on_board = h.get_by_label("CPU 3 v0").rect().center();
    let tray = h
        .get_by_label_contains("Tray (drag onto a CPU")
        .rect()
        .center();
    drag(&mut h, on_board, tray);
    assert_eq!(
        h.state().state.board.pins.get(&0),
        None,
        "{:?}",
        h.state().state.board
    );
    // The emulator chip can cover several CPUs.
    let emu = h.get_by_label("emulator").rect().center();
    let cpu0 = h.get_by_label("CPU 0").rect().center();
    drag(&mut h, emu, cpu0);
    let emu = h.get_by_label("emulator").rect().center();
    let cpu6 = h.get_by_label("CPU 6").rect().center();
    drag(&mut h, emu, cpu6);
    assert_eq!(
        h.state()
            .state
            .board
            .emulator
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        vec![0, 6]
    );
    h.get_by_label("CPU 0 emu");
}

#[test]
fn selectors_pin_and_the_validator_warns_next_to_the_vcpu() {
    let mut h = board_harness(Board {
        vcpus: 2,
        ..Board::default()
    });
    // The accessible way: the selector of vCPU 1.
    h.get_all_by_label("vCPU 1").last().unwrap().click();
    h.run();
    h.get_by_label("CPU 0, core 0,6, L3 #0").click();
    h.run();
    assert_eq!(h.state().state.board.pins.get(&1), Some(&0));
    h.get_by_label("CPU 0 v1");
    h.get_by_label_contains("! vCPU on CPU 0: the host handles most interrupts");
    // The planner fills the board; the warning goes, the XML follows.
    h.state_mut().state.board.set_vcpus(4);
    h.run();
    h.get_by_label("Fill the board from the planner").click();
    h.run();
    h.get_by_label("CPU 1 v0");
    h.get_by_label("CPU 7 v1");
    assert!(h.query_by_label_contains("! vCPU on CPU 0").is_none());
    h.get_by_label("The board as XML, kernel line, and apply to a domain")
        .click();
    h.run();
    h.get_by_label_contains("<vcpupin vcpu='1' cpuset='7'/>");
    h.get_by_label_contains("<topology sockets='1' dies='1' cores='2' threads='2'/>");
}

#[test]
fn the_board_is_applied_to_a_libvirt_domain() {
    let mut board = Board {
        vcpus: 2,
        ..Board::default()
    };
    board.place(Chip::Vcpu(0), 2);
    board.place(Chip::Vcpu(1), 8);
    let mut h = board_harness(board);
    h.state_mut().state.wizard.uri = "test:///default".into();
    h.state_mut().state.pin_domain = "test".into();
    h.run();
    h.get_by_label("The board as XML, kernel line, and apply to a domain")
        .click();
    h.run();
    h.get_by_label("Apply pinning to domain").click();
    for _ in 0..300 {
        h.step();
        if !h.state().is_busy() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    h.run();
    let msg = h.state().cpu.applied.clone().unwrap().unwrap();
    assert!(
        msg.starts_with("Applied to 'test' on test:///default"),
        "{msg}"
    );
    h.get_by_label_contains("Applied to 'test'");
    // What was applied: the board's own pins, and the guest topology they allow
    // (CPUs 2 and 8 are one core's two threads on this Ryzen).
    assert!(msg.contains("2 vCPUs pinned to CPUs 2,8"), "{msg}");
}

#[test]
fn hover_names_the_irqs_and_the_board_saves_its_xml() {
    let dir = tempfile::tempdir().unwrap();
    crate::support::hosts::copy_tree(&ryzen(), dir.path());
    crate::support::hosts::put(dir.path(), "proc/irq/30/smp_affinity_list", "0-11\n");
    crate::support::hosts::put(dir.path(), "proc/irq/31/smp_affinity_list", "3\n");
    let snap = scan(&HostRoot::at(dir.path())).unwrap();
    let out = dir.path().join("pinning.xml");
    let mut board = Board {
        vcpus: 2,
        ..Board::default()
    };
    board.place(Chip::Vcpu(0), 3);
    board.place(Chip::Vcpu(1), 9);
    let state = State {
        page: Page::Cpu,
        board,
        pin_save_path: out.display().to_string(),
        ..State::default()
    };
    let mut h = crate::support::gui::harness(App::with_snapshot(snap, state), [1400.0, 1400.0]);
    h.run();
    h.get_by_label("CPU 3 v0").hover();
    h.run();
    h.get_by_label("2 of 2 IRQs may land here (smp_affinity_list), 1 only here");
    h.get_by_label("The board as XML, kernel line, and apply to a domain")
        .click();
    h.run();
    h.get_by_label("Save board XML").click();
    h.run();
    let xml = std::fs::read_to_string(&out).unwrap();
    assert!(xml.contains("<vcpupin vcpu='0' cpuset='3'/>"), "{xml}");
    assert!(
        xml.contains("threads='2'"),
        "CPUs 3 and 9 are one core's threads: {xml}"
    );
}

/// One numbering of cores for both faces: a core is named by its threads,
/// so the page's selector and `pin`'s table name the same core alike.
#[test]
fn the_page_and_pin_name_a_core_alike() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vfio-assistant"))
        .args(["--root", ryzen().to_str().unwrap(), "pin", "--vcpus", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // "     0 -> 1    (core 1,7, L3 #0, node 0)"
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("0 ->"))
        .unwrap();
    let cpu: u32 = line
        .split("->")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let core = line
        .split('(')
        .nth(1)
        .unwrap()
        .split(',')
        .take_while(|p| !p.contains("L3"))
        .collect::<Vec<_>>()
        .join(",");
    assert!(core.starts_with("core "), "{line}");
    let mut h = board_harness(Board {
        vcpus: 2,
        ..Board::default()
    });
    h.get_all_by_label("vCPU 0").last().unwrap().click();
    h.run();
    h.get_by_label_contains(&format!("CPU {cpu}, {core}, L3"));
}
