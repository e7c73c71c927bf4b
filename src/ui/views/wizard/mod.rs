//! New VM: a step-by-step wizard for a tuned Windows passthrough domain. The
//! domain is rebuilt from the choices every frame (it takes well under a
//! millisecond), so every step shows what it changes. The storage step names
//! or creates the disk (the VM needs one to go on); the review step runs the
//! one preflight (`report::preflight`, the CLI's `domain validate`): what
//! was adapted to this host and what would stop the start, then defines it
//! (an update keeps an existing domain's identity) and starts, shuts down or
//! forces it off with its state live.

mod cpu;
mod features;
mod gpu;
mod memory;
mod network;
mod review;
mod storage;
mod use_it;
pub mod virtio_source;

use crate::domain::from_host::prepare;
use crate::domain::template::{NewDomain, new_windows};
use crate::host::HostSnapshot;
use crate::ui::app::Command;
use crate::ui::pages::WizardRuntime;
use crate::ui::vm_model::{SUGGESTED_VCPUS, VmModel};
use crate::ui::wizard_state::{Step, WizardState};

/// The VM's vCPUs as the wizard builds it: the board's, or the suggestion
/// while the board has none (said on the CPU step).
pub fn vcpus_of(board: &crate::pinning::board::Board) -> u32 {
    if board.vcpus == 0 {
        SUGGESTED_VCPUS
    } else {
        board.vcpus
    }
}
use egui::RichText;

/// What a step draws from: the host, the choices, the wizard's libvirt
/// answers, whether the host is a running machine, the commands out, and
/// the domain as the choices build it (None while it cannot be built).
pub struct StepCx<'a> {
    pub snap: &'a HostSnapshot,
    pub w: &'a mut WizardState,
    /// The VM every page shares (name, GPU, memory, media).
    pub vm: &'a mut VmModel,
    /// Its vCPUs and their CPUs: the CPU page's board.
    pub board: &'a mut crate::pinning::board::Board,
    pub rt: &'a WizardRuntime,
    pub live: bool,
    pub out: &'a mut Vec<Command>,
    pub built: Option<&'a (NewDomain, Vec<String>)>,
    /// The Tuning page's choices (how the host hands the GPU over).
    pub tuning: &'a crate::ui::state::TuningChoices,
}

/// A step's line in the table.
pub struct StepSpec {
    pub step: Step,
    /// Its tab's name (numbered by its place in `STEPS`).
    pub title: &'static str,
    pub draw: fn(&mut egui::Ui, &mut StepCx),
}

/// The steps, in their order: adding one is its file here with its
/// `STEP`, its `Step` variant (`steps!`), and its line below, at the
/// variant's place (checked while compiling, below).
pub const STEPS: &[StepSpec] = &[
    gpu::STEP,
    cpu::STEP,
    memory::STEP,
    storage::STEP,
    network::STEP,
    use_it::STEP,
    features::STEP,
    review::STEP,
];

// Every `Step` has its line, at its place.
const _: () = {
    assert!(
        STEPS.len() == Step::ALL.len(),
        "a Step without its line in STEPS"
    );
    let mut i = 0;
    while i < STEPS.len() {
        assert!(
            STEPS[i].step as usize == i,
            "a line of STEPS out of its Step's place"
        );
        i += 1;
    }
};

impl Step {
    /// Its line in `STEPS`.
    pub fn spec(self) -> &'static StepSpec {
        &STEPS[self as usize]
    }
}

/// `live`: the host shown is a running machine (this one, or another over
/// SSH), whose keyboards can be pressed for the input picker.
pub fn wizard_ui(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    state: &mut crate::ui::state::State,
    rt: &WizardRuntime,
    live: bool,
    out: &mut Vec<Command>,
) {
    let crate::ui::state::State {
        wizard: w,
        tuning,
        vm,
        board,
        ..
    } = state;
    // The VM's name on every step, editable where it is shown.
    ui.horizontal(|ui| {
        let l = ui.label(RichText::new("New VM:").strong());
        ui.add(egui::TextEdit::singleline(&mut vm.name).desired_width(200.0))
            .labelled_by(l.id);
        ui.weak(if w.windows11 {
            "Windows 11"
        } else {
            "Windows 10"
        });
    });
    ui.horizontal(|ui| {
        for (i, s) in STEPS.iter().enumerate() {
            let title = format!("{} {}", i + 1, s.title);
            if ui.selectable_label(w.step == s.step, title).clicked() {
                w.step = s.step;
            }
        }
        ui.separator();
        if ui
            .add_enabled(w.step != Step::Gpu, egui::Button::new("Back"))
            .clicked()
        {
            w.step = w.step.prev();
        }
        let next = egui::Button::new(RichText::new("Next").strong());
        // A VM with no disk has nothing to install to: the storage step
        // must name or create one first.
        let blocked = w.step == Step::Storage && !w.has_disk();
        if ui
            .add_enabled(w.step != Step::Review && !blocked, next)
            .on_disabled_hover_text("Name a disk image, or create one, first: the VM needs a disk.")
            .clicked()
        {
            w.step = w.step.next();
        }
    });
    ui.separator();
    let total_kib = snap.kernel.mem_total_kib;
    let prepared = prepare(
        snap,
        &w.choices(vm, vcpus_of(board), total_kib),
        rt.caps.clone(),
    );
    let built: Result<(NewDomain, Vec<String>), String> =
        prepared.map_err(|e| e.to_string()).and_then(|p| {
            new_windows(&p.spec)
                .map(|d| (d, p.notes))
                .map_err(|e| e.to_string())
        });
    if let Err(e) = &built {
        ui.colored_label(
            ui.visuals().error_fg_color,
            format!("Cannot build the VM yet: {e}"),
        );
    }
    let mut cx = StepCx {
        snap,
        w,
        vm,
        board,
        rt,
        live,
        out,
        built: built.as_ref().ok(),
        tuning,
    };
    egui::ScrollArea::vertical()
        .id_salt("wizard_scroll")
        .show(ui, |ui| {
            (cx.w.step.spec().draw)(ui, &mut cx);
        });
}
