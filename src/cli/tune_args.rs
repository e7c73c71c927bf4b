//! `tune`'s command line: its subcommands and flags (clap), the values
//! parsed where clap reads them (`PciAddr`, a CPU list, a memory size), and
//! the request they make (`Asked::request`, as the window's). tune.rs runs
//! them.

use crate::host::pci_addr::{NotPciAddr, PciAddr};
use crate::parse::cpulist::parse_cpulist;
use crate::parse::values::parse_memory_mib;
use crate::tuning::asked::Asked;
use crate::tuning::kinds::ChangeId;
use crate::tuning::model::Request;
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct TuneArgs {
    #[command(subcommand)]
    pub command: TuneCommand,
}

#[derive(Debug, Subcommand)]
pub enum TuneCommand {
    /// Show what would change on this host, and why.
    Plan(PlanArgs),
    /// Apply the plan as one transaction (asks first unless --yes).
    Apply(ApplyArgs),
    /// What is applied, waiting for a reboot, took effect, or drifted.
    Status(JournalArgs),
    /// Keep the kernel command line that booted well once (GRUB's or
    /// systemd-boot's entry, or the image, tried once) as the default, as
    /// one more transaction.
    Keep(super::tune_keep::KeepArgs),
    /// Restore a transaction (files byte for byte, values, boot files rebuilt).
    Undo(UndoArgs),
    /// The journal's transactions.
    List(JournalArgs),
    /// The one sudoers line that lets you tune without a password (over
    /// SSH, from the app on another machine): the helper, no arguments.
    Sudoers,
}

impl TuneArgs {
    /// Whether it changes the host (root's to do), not only reads it.
    pub fn changes_host(&self) -> bool {
        matches!(
            self.command,
            TuneCommand::Apply(_) | TuneCommand::Keep(_) | TuneCommand::Undo(_)
        )
    }
}

#[derive(Debug, Args, Clone, Default)]
pub struct RequestArgs {
    /// A GPU for the VM (its whole passthrough set goes with it). Repeatable.
    #[arg(long = "gpu", value_name = "ADDR")]
    pub gpus: Vec<PciAddr>,
    /// Another device for the VM. Repeatable.
    #[arg(long = "device", value_name = "ADDR")]
    pub devices: Vec<PciAddr>,
    /// vCPUs, for the pinning planner (which host CPUs the VM gets).
    #[arg(long, conflicts_with = "cpus")]
    pub vcpus: Option<usize>,
    /// The host CPUs the VM runs on, e.g. 2-7,10-15.
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,
    /// The VM's memory (e.g. 16G), for hugepages.
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    pub memory: Option<u64>,
    /// 1 GiB hugepages (reserved at boot) instead of 2 MiB ones (now).
    #[arg(long)]
    pub hugepages_1g: bool,
    /// SR-IOV virtual functions: ADDR=N. Repeatable.
    #[arg(long = "sriov", value_name = "ADDR=N", value_parser = parse_sriov)]
    pub sriov: Vec<(PciAddr, u32)>,
    /// Dynamic isolation: a libvirt hook keeps the host's own tasks off the
    /// VM's CPUs only while the VM NAME runs (instead of isolcpus at boot).
    #[arg(long, value_name = "NAME")]
    pub isolate_vm: Option<String>,
    /// No boot-time isolation of the VM's CPUs (isolcpus, nohz_full,
    /// rcu_nocbs, irqaffinity): the host keeps them while the VM is off
    /// (with --isolate-vm they are taken only while it runs).
    #[arg(long)]
    pub no_isolcpus: bool,
    /// Looking Glass's shared memory for this resolution (WIDTHxHEIGHT):
    /// /dev/shm/looking-glass for you and QEMU, or with --kvmfr the kvmfr
    /// module set up.
    #[arg(long, value_name = "WxH", value_parser = super::domain_new::parse_resolution)]
    pub looking_glass: Option<(u32, u32)>,
    #[arg(long, requires = "looking_glass")]
    pub hdr: bool,
    /// …or its size in MiB (16-1024), as the app's Tuning page gives it.
    #[arg(long, value_name = "MIB", conflicts_with = "looking_glass")]
    pub looking_glass_mib: Option<u64>,
    #[arg(long)]
    pub kvmfr: bool,
    /// Single-GPU passthrough for the VM NAME: a libvirt hook hands the
    /// desktop's only GPU to it at its start and back when it stops.
    #[arg(long, value_name = "NAME", conflicts_with = "isolate_vm")]
    pub single_gpu: Option<String>,
    /// Shared GPU for the VM NAME: the second GPU (--gpu) stays the
    /// desktop's while the VM is off; a libvirt hook lends it to the VM at
    /// its start and gives it back at its stop, and the compositor is kept
    /// off it.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["isolate_vm", "single_gpu"])]
    pub shared_gpu: Option<String>,
    /// With --shared-gpu: a systemd unit (NAME.service) the hook may stop
    /// at the VM's start when it holds the card, and starts again at its
    /// stop (nvidia-persistenced always). Repeat for more.
    #[arg(long = "shared-stop", value_name = "UNIT", requires = "shared_gpu")]
    pub shared_stop: Vec<String>,
    /// QEMU runs as you (qemu.conf's user), so that it reaches your sound
    /// server: every VM of the system libvirt, and the disk images libvirt
    /// hands to QEMU, become yours. Refused through the sudoers line.
    #[arg(long)]
    pub qemu_as_me: bool,
    /// The desktop user Looking Glass and QEMU's user are for (default:
    /// who ran sudo, or you).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Tests only (the `test-hooks` build): another journal folder. The
    /// journal is /var/lib/vfio-assistant/journal, inside the root with --root.
    #[cfg_attr(feature = "test-hooks", arg(long, value_name = "DIR"))]
    #[cfg_attr(not(feature = "test-hooks"), arg(skip))]
    pub journal: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub req: RequestArgs,
    /// Only these changes (ids from `tune plan`: thp, cmdline, vfio-boot,
    /// sriov:ADDRESS…), comma-separated: what `apply --only` would do.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<ChangeId>,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub req: RequestArgs,
    /// Only these changes (ids from `tune plan`: thp, cmdline, sriov:ADDRESS…),
    /// comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<ChangeId>,
    /// Show what would happen; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask.
    #[arg(long)]
    pub yes: bool,
}

impl ApplyArgs {
    /// The request these flags make (the window's terminal line parses
    /// back to its own request: tests/it/tuning_command_line.rs).
    pub fn request(&self) -> Request {
        request(&self.req, &self.only)
    }
}

#[derive(Debug, Args)]
pub struct JournalArgs {
    #[arg(long)]
    pub json: bool,
    /// Tests only (the `test-hooks` build): another journal folder.
    #[cfg_attr(feature = "test-hooks", arg(long, value_name = "DIR"))]
    #[cfg_attr(not(feature = "test-hooks"), arg(skip))]
    pub journal: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    /// The transaction id (from `tune list`).
    #[arg(required_unless_present = "last", conflicts_with = "last")]
    pub id: Option<String>,
    /// The newest applied transaction.
    #[arg(long)]
    pub last: bool,
    /// Put the old files back even if they changed since.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub yes: bool,
    #[arg(long)]
    pub json: bool,
    /// Tests only (the `test-hooks` build): another journal folder.
    #[cfg_attr(feature = "test-hooks", arg(long, value_name = "DIR"))]
    #[cfg_attr(not(feature = "test-hooks"), arg(skip))]
    pub journal: Option<PathBuf>,
}

/// A CPU list argument (one value, not clap's repeated values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

fn parse_cpus(s: &str) -> Result<CpuList, String> {
    parse_cpulist(s)
        .map(|set| CpuList(set.into_iter().collect()))
        .map_err(|e| e.to_string())
}

fn parse_memory(s: &str) -> Result<u64, String> {
    parse_memory_mib(s).map_err(|e| e.0)
}

fn parse_sriov(s: &str) -> Result<(PciAddr, u32), String> {
    let (a, n) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: use ADDRESS=COUNT, e.g. 0000:03:00.0=4"))?;
    let a: PciAddr = a.parse().map_err(|e: NotPciAddr| e.to_string())?;
    let n: u32 = n
        .parse()
        .map_err(|_| format!("{n:?} is not a number of virtual functions"))?;
    Ok((a, n))
}

/// The request the flags make (`Asked::request`, as the window's).
pub(super) fn request(a: &RequestArgs, only: &[ChangeId]) -> Request {
    Asked {
        gpus: a.gpus.clone(),
        devices: a.devices.clone(),
        vcpus: a.vcpus,
        cpus: a.cpus.as_ref().map(|c| c.0.clone()),
        memory_mib: a.memory,
        hugepages_1g: a.hugepages_1g,
        sriov: a.sriov.iter().copied().collect::<BTreeMap<_, _>>(),
        only: only.to_vec(),
        isolate_vm: a.isolate_vm.clone(),
        host_keeps_vm_cpus: a.no_isolcpus,
        single_gpu_vm: a.single_gpu.clone(),
        shared_gpu_vm: a.shared_gpu.clone(),
        shared_stop_units: a.shared_stop.clone(),
        looking_glass_mib: a
            .looking_glass
            .map(|(w, h)| crate::domain::playable::looking_glass_mib(w, h, a.hdr))
            .or(a.looking_glass_mib),
        kvmfr: a.kvmfr,
        qemu_as_user: a.qemu_as_me,
        desktop_user: a.user.clone().or_else(|| {
            ["SUDO_USER", "USER"]
                .iter()
                .find_map(|k| std::env::var(k).ok().filter(|u| u != "root"))
        }),
    }
    .request()
}
