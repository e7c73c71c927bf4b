//! What a host tuning plan is made of. A `Plan` is a list of `Change`s; each
//! says what and why in plain words, the evidence it rests on, when it takes
//! effect, its exact steps (whole files before → after, sysfs/procfs values
//! before → after, commands as argv), how it is verified, and how it is
//! undone. The same types go into the journal, out as `tune … --json`
//! (docs/tune-json.md), and through the privileged helper.

pub use super::kind::{ChangeId, Kind};
use crate::finding::Evidence;
use crate::host::pci_addr::PciAddr;
use crate::tuning::paths;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The user's choices; everything else comes from the host. A closed type:
/// the helper takes exactly this from its caller and re-plans itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Request {
    /// GPUs going to the VM (their whole passthrough sets go with them).
    pub gpus: Vec<PciAddr>,
    /// More PCI devices for the VM (USB controllers, NICs…).
    pub devices: Vec<PciAddr>,
    /// vCPUs for the pinning planner, or…
    pub vcpus: Option<usize>,
    /// …the host CPUs the VM runs on, as given (the CPU page's board).
    pub cpus: Option<Vec<u32>>,
    /// The VM's memory, for hugepages.
    pub memory_mib: Option<u64>,
    /// 1 GiB pages instead of 2 MiB ones.
    pub hugepages_1g: bool,
    /// SR-IOV: physical function address → number of virtual functions.
    pub sriov: BTreeMap<PciAddr, u32>,
    /// Only these changes (empty: all); `sriov` takes every card's.
    pub only: Vec<ChangeId>,
    /// The dynamic isolation hook (libvirt qemu hook with AllowedCPUs)
    /// instead of `isolcpus` at boot; needs `vm` and the VM's CPUs.
    pub isolation_hook: bool,
    /// The host keeps the VM's CPUs at boot: no isolcpus, nohz_full,
    /// rcu_nocbs or irqaffinity on the kernel's command line (boot-time
    /// isolation takes those threads from the host for good, the VM off or
    /// on). The isolation hook, when asked, still takes them while the VM
    /// runs. `tune --no-isolcpus`; the app's default.
    pub host_keeps_vm_cpus: bool,
    /// The libvirt domain the isolation hook is for.
    pub vm: Option<String>,
    /// Looking Glass's shared memory (MiB, `playable::looking_glass_mib`).
    pub looking_glass_mib: Option<u64>,
    /// …through the kvmfr module instead of /dev/shm.
    pub kvmfr: bool,
    /// QEMU runs as the desktop user (qemu.conf's `user`): every VM of the
    /// system libvirt, and the disk images libvirt hands to QEMU, become
    /// that user's — so that QEMU reaches the user's sound server. Its own
    /// choice, never implied by another (`--qemu-as-me`), named in the plan
    /// and the prompt, and refused through the sudoers line.
    pub qemu_as_user: bool,
    /// Single-GPU passthrough: the hook that hands the desktop's only GPU
    /// to the VM `vm` and back.
    pub single_gpu: bool,
    /// Shared GPU: the card stays the desktop's at boot; the hook lends it
    /// to the VM `vm` at its start and gives it back at its stop.
    pub shared_gpu: bool,
    /// Units the shared-GPU hook may stop when they hold the card
    /// (nvidia-persistenced always).
    pub shared_stop_units: Vec<String>,
    /// The desktop user these are for. Under pkexec the helper takes the
    /// user who asked (PKEXEC_UID), whatever this says.
    pub desktop_user: Option<String>,
}

/// When a change takes effect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    #[default]
    Now,
    AfterReboot,
    AtVmStart,
}

impl Effect {
    pub fn label(self) -> &'static str {
        match self {
            Effect::Now => "now",
            Effect::AfterReboot => "after a reboot",
            Effect::AtVmStart => "when the VM starts",
        }
    }
}

/// A whole file, before and after (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// As the host spells it (`/etc/modprobe.d/vfio.conf`).
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

impl FileChange {
    /// The change as a unified diff, labelled as diff(1) labels it: a file
    /// made or removed is diffed against /dev/null (what both faces show).
    pub fn diff(&self) -> String {
        const NONE: &str = paths::DEV_NULL;
        let label = |side: &Option<String>| {
            if side.is_some() {
                self.path.as_str()
            } else {
                NONE
            }
        };
        crate::domain::tune::diff_labeled(
            self.before.as_deref().unwrap_or(""),
            self.after.as_deref().unwrap_or(""),
            label(&self.before),
            label(&self.after),
        )
    }
}

/// A sysfs/procfs value, before and after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueChange {
    pub path: String,
    pub before: String,
    pub after: String,
    /// Written only to trigger something (compact_memory, drivers_probe):
    /// nothing to restore.
    #[serde(default)]
    pub action: bool,
    /// The kernel may refuse it (EPP under HWP: EBUSY; a per-CPU IRQ):
    /// recorded as data, not a failure that rolls everything back.
    #[serde(default)]
    pub may_fail: bool,
}

/// A command: one of the closed set in `command.rs` with its checked
/// parameters (never an argv, never through a shell). Written out with its
/// `argv` too, for people and scripts; read back from `cmd` alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "ShownStep")]
pub struct CommandStep {
    pub cmd: super::command::Cmd,
    /// Whether it runs (false with `--root` and `--dry-run`: listed only).
    pub run: bool,
    pub why: String,
}

impl CommandStep {
    pub fn new(cmd: super::command::Cmd, why: impl Into<String>) -> CommandStep {
        CommandStep {
            cmd,
            run: true,
            why: why.into(),
        }
    }

    /// What runs, derived from `cmd`.
    pub fn argv(&self) -> Vec<String> {
        self.cmd.argv()
    }
}

/// A `CommandStep` as written out: its argv shown beside the data.
#[derive(Serialize)]
struct ShownStep {
    argv: Vec<String>,
    cmd: super::command::Cmd,
    run: bool,
    why: String,
}

impl From<CommandStep> for ShownStep {
    fn from(c: CommandStep) -> ShownStep {
        ShownStep {
            argv: c.cmd.argv(),
            cmd: c.cmd,
            run: c.run,
            why: c.why,
        }
    }
}

/// How a change is checked after it is applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Verify {
    /// The value reads back as this.
    ValueIs { path: String, value: String },
    /// A hugepage pool holds at least this many pages.
    PagesAtLeast { path: String, pages: u64 },
    /// The rebuilt initramfs images hold these modules and files.
    InitramfsHas {
        images: Vec<String>,
        modules: Vec<String>,
        files: Vec<String>,
    },
    /// The generated boot entries hold every token as a whole token.
    BootEntriesHave {
        files: Vec<String>,
        tokens: Vec<String>,
    },
    /// One menu entry of a grub.cfg (by its id) holds every token: GRUB's
    /// entry of ours, booted once.
    MenuEntryHas {
        file: String,
        id: String,
        tokens: Vec<String>,
    },
    /// After the reboot, `/proc/cmdline` holds every token.
    CmdlineHas { tokens: Vec<String> },
    /// A device is bound to this driver.
    DriverIs { device: String, driver: String },
    /// After the reboot, a device is bound to this driver (the binding at
    /// boot): until then nothing can be seen; after it, a card its own
    /// driver took first means the change did not take.
    DriverAfterReboot { device: String, driver: String },
    /// A file is there and executable (a hook script).
    Executable { path: String },
    /// A path is there (a device node's name udev makes).
    Exists { path: String },
}

/// A file the boot reads that a command of the change generates (grub.cfg,
/// an initramfs image, a boot entry). The journal keeps its bytes from
/// before; after the command it is checked (before the boot can see it,
/// when it is staged) and made durable for the boot loader; undo puts the
/// saved bytes back when nothing regenerated it since, else regenerates it
/// from the restored inputs and checks that again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// As the host spells it (`/boot/grub/grub.cfg`).
    pub path: String,
    /// Where the command writes it first (`None`: the command replaces
    /// `path` itself, by a rename of its own, as update-initramfs does).
    /// A staged file is checked, synced and then renamed over `path`: that
    /// rename is the switch the next boot sees, all or nothing.
    pub staging: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Its kind (and device): `cmdline`, `vfio-boot`, `sriov:ADDR`… — the
    /// closed set of `kind::KINDS`.
    pub id: ChangeId,
    pub title: String,
    pub why: String,
    pub evidence: Vec<Evidence>,
    /// The finding ids this change fixes.
    pub fixes: Vec<String>,
    pub effect: Effect,
    pub files: Vec<FileChange>,
    /// Run after the files, before the values: what the values need first
    /// (the vfio-pci module loaded before a device is handed to it).
    #[serde(default)]
    pub prepare: Vec<CommandStep>,
    pub values: Vec<ValueChange>,
    /// Run after the files and values, in order.
    pub commands: Vec<CommandStep>,
    /// What those commands generate for the boot (see `Artifact`).
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    /// Written on undo after the non-action values are restored (unbinding
    /// from vfio-pci, an SR-IOV count through 0).
    #[serde(default)]
    pub undo_values: Vec<ValueChange>,
    /// Run after the files and values are restored on undo.
    pub undo_commands: Vec<CommandStep>,
    pub verify: Vec<Verify>,
    /// Things to know (two identical cards claimed by ID, a daemon that
    /// rewrites the governor).
    pub notes: Vec<String>,
    /// The changes of the same plan it does nothing without: the binding
    /// at boot needs the kernel command line when the IDs it claims are
    /// there (`vfio_pci.ids=`). `Plan::keep_needs` keeps a selection whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<ChangeId>,
}

impl Change {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.values.is_empty() && self.commands.is_empty()
    }

    /// Whether it boots an entry of its own once (`bootctl set-oneshot`,
    /// `grub-reboot`): the loader's default stays the old setup until it is
    /// kept.
    pub fn boots_once(&self) -> bool {
        self.commands.iter().any(|s| {
            matches!(
                s.cmd,
                super::command::Cmd::BootctlSetOneshot
                    | super::command::Cmd::BootctlSetOneshotUki { .. }
                    | super::command::Cmd::GrubReboot { .. }
            )
        })
    }

    /// Where the artifact at `path` is written first (itself when not staged).
    pub fn written_at<'a>(&'a self, path: &'a str) -> &'a str {
        self.artifacts
            .iter()
            .find(|a| a.path == path)
            .and_then(|a| a.staging.as_deref())
            .unwrap_or(path)
    }
}

/// What could not be planned, and what to do by hand instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manual {
    pub id: ChangeId,
    pub title: String,
    pub why: String,
    pub steps: Vec<String>,
}

/// The boot path as detected, for the plan's header and the tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootInfo {
    /// `grub-debian`, `grub-mkconfig`, `grub-bls`, `systemd-boot`,
    /// `kernelstub`, `rpm-ostree`, `bootc`, `uki`, `unknown`.
    pub loader: String,
    /// `initramfs-tools`, `dracut`, `mkinitcpio`, `none`, `unknown`.
    pub initramfs: String,
    /// What the detection rests on.
    pub evidence: Vec<Evidence>,
    /// How to get back if the new setup does not boot, in plain words.
    pub recovery: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub boot: BootInfo,
    pub changes: Vec<Change>,
    pub manual: Vec<Manual>,
    /// Said once (no GPU chosen, no pin plan…).
    pub notes: Vec<String>,
}

impl Plan {
    pub fn needs_reboot(&self) -> bool {
        self.changes.iter().any(|c| c.effect == Effect::AfterReboot)
    }

    /// Every command (and undo command) listed, not run: a captured host's
    /// tree (`--root`, the window on a snapshot) or a dry run, where the
    /// transaction records them only. The one place that says so, for the
    /// CLI, the helper and the window.
    pub fn list_commands_only(&mut self) {
        for c in &mut self.changes {
            for cmd in c.commands.iter_mut().chain(c.undo_commands.iter_mut()) {
                cmd.run = false;
            }
        }
    }

    /// `focus` with what each change in it needs (`Change::needs`): the
    /// changes a "Fix/Bind it on the Tuning page" ticks.
    pub fn with_needs(&self, focus: &[String]) -> Vec<String> {
        let mut out = focus.to_vec();
        for c in self
            .changes
            .iter()
            .filter(|c| focus.contains(&c.id.to_string()))
        {
            for n in &c.needs {
                let n = n.to_string();
                if !out.contains(&n) {
                    out.push(n);
                }
            }
        }
        out
    }

    /// Keeps a selection (`off`: the unticked changes' ids) whole: a change
    /// ticked whose need is unticked either ticks that need again or, when
    /// that need must stay off (`kept_off`: the user just unticked it, or
    /// it cannot apply here), is unticked with it. Returns what it changed,
    /// in words.
    pub fn keep_needs(&self, off: &mut Vec<String>, kept_off: &[String]) -> Vec<String> {
        let mut said = Vec::new();
        for c in &self.changes {
            let id = c.id.to_string();
            for n in &c.needs {
                let need = n.to_string();
                if off.contains(&id) || !off.contains(&need) {
                    continue;
                }
                if kept_off.contains(&need) {
                    off.push(id.clone());
                    said.push(format!("{id} unticked too: it does nothing without {need}"));
                } else if self.changes.iter().any(|x| x.id == *n) {
                    off.retain(|x| *x != need);
                    said.push(format!("{need} ticked too: {id} needs it"));
                }
            }
        }
        said
    }
}
