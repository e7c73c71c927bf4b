//! Temporary roots for the tuning tests: the X570 host (a real IOMMU
//! listing and topology) with the runtime knobs, optionally a real
//! distribution's boot configuration, and the tools as empty executables
//! (with a root, commands are listed, not run).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The X570 host with THP 'always', KSM on, no hugepages, governors on
/// schedutil, and no boot configuration.
pub fn runtime_host() -> tempfile::TempDir {
    let dir = super::hosts::good_host();
    let r = dir.path();
    let put = |rel: &str, text: &str| super::hosts::put(r, rel, text);
    put(
        "sys/kernel/mm/transparent_hugepage/enabled",
        "[always] madvise never\n",
    );
    put("sys/kernel/mm/ksm/run", "1\n");
    put(
        "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
        "0\n",
    );
    put(
        "sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages",
        "0\n",
    );
    put("proc/sys/vm/compact_memory", "");
    // Write-only triggers a real sysfs always has.
    put("sys/bus/pci/drivers_probe", "");
    put(
        "proc/cmdline",
        "BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64 root=UUID=0 ro quiet\n",
    );
    put("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n");
    for cpu in 0..12 {
        put(
            &format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"),
            "schedutil\n",
        );
    }
    put(
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors",
        "performance schedutil\n",
    );
    dir
}

/// `runtime_host` with Debian 12's GRUB and initramfs-tools configuration
/// (tests/fixtures/tuning/debian12, real files with their SOURCE).
pub fn tuning_host() -> tempfile::TempDir {
    let dir = runtime_host();
    let r = dir.path();
    distro(r, "debian12");
    // Debian's grub package ships the drop-in folder empty (git keeps none).
    std::fs::create_dir_all(r.join("etc/default/grub.d")).unwrap();
    for t in ["update-grub", "update-initramfs"] {
        super::hosts::put(r, &format!("usr/sbin/{t}"), "");
        std::fs::set_permissions(
            r.join("usr/sbin").join(t),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    super::hosts::put(r, "var/lib/dpkg/info/initramfs-tools.list", "");
    dir
}

/// Copy a distribution's tree from tests/fixtures/tuning into `root`.
pub fn distro(root: &Path, name: &str) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tuning")
        .join(name);
    super::hosts::copy_tree(&fixtures, root);
}

/// A sysfs/procfs value as the kernel would read it back: a write of
/// `madvise` to `[always] madvise never` reads `always [madvise] never`; in a
/// test root, plain files hold what was written. Compared by meaning.
fn kernel_value(rel: &str, bytes: Vec<u8>) -> Vec<u8> {
    if !(rel.starts_with("sys/") || rel.starts_with("proc/")) {
        return bytes;
    }
    // Triggers the kernel does not keep (write-only): nothing to compare.
    if rel.ends_with("/compact_memory")
        || rel.ends_with("/drivers_probe")
        || rel.ends_with("/unbind")
    {
        return Vec::new();
    }
    let t = String::from_utf8_lossy(&bytes);
    let t = t.trim();
    // A cleared driver_override (a newline written) reads back "(null)".
    if rel.ends_with("/driver_override") && t.is_empty() {
        return b"(null)".to_vec();
    }
    let v = t
        .split_whitespace()
        .find(|w| w.starts_with('['))
        .map_or(t, |w| w.trim_matches(|c| c == '[' || c == ']'));
    v.as_bytes().to_vec()
}

/// The paths whose content or mode differ between two trees.
pub fn differ(
    a: &BTreeMap<String, (Vec<u8>, u32)>,
    b: &BTreeMap<String, (Vec<u8>, u32)>,
) -> Vec<String> {
    let mut out: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, _)| k.clone())
        .collect();
    out.extend(
        b.keys()
            .filter(|k| !a.contains_key(*k))
            .map(|k| format!("{k} (new)")),
    );
    out
}

/// Every file under `dir` (but the journal) with its bytes and mode.
pub fn tree(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    fn walk(base: &Path, d: &Path, out: &mut BTreeMap<String, (Vec<u8>, u32)>) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if rel.starts_with("var/lib/vfio-assistant") || rel == "var/log/standins.log" {
                continue;
            }
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(base, &p, out);
            } else if ft.is_file() {
                let mode = std::fs::metadata(&p).unwrap().permissions().mode();
                let bytes = kernel_value(&rel, std::fs::read(&p).unwrap());
                out.insert(rel, (bytes, mode));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What the kernel does after a write to `nr_hugepages`: the new pages are
/// free. A test root's files do not do it by themselves.
pub fn kernel_gives_hugepages(root: &Path) {
    let d = root.join("sys/kernel/mm/hugepages/hugepages-2048kB");
    let nr = std::fs::read_to_string(d.join("nr_hugepages")).unwrap();
    std::fs::write(d.join("free_hugepages"), nr).unwrap();
}

/// The app on the Tuning page of `root` (a temporary host), planning for
/// the X570's GTX 1080 Ti, 4 vCPUs and 1 GiB, with the helper this test
/// build made, run with `helper_args` (e.g. `--fail-at 1`).
pub fn tuning_app(root: &Path, helper_args: &[&str]) -> vfio_assistant::ui::app::App {
    use vfio_assistant::ui::state::{Page, State, TuningChoices};
    let mut state = State {
        page: Page::Tuning,
        tuning: TuningChoices {
            gpus: vec!["0000:0b:00.0".into()],
            reserve_hugepages: true,
            ..TuningChoices::default()
        },
        ..State::default()
    };
    // The VM's 4 vCPUs (placed by the planner) and 1 GiB.
    state.board.set_vcpus(4);
    state.vm.memory_gib = 1;
    let mut app = vfio_assistant::ui::app::App::with_source(
        vfio_assistant::ui::Source::Root(root.into()),
        state,
        || {},
    );
    app.tuning.helper = Some(vfio_assistant::ui::jobs::HelperProgram {
        path: crate::support::helper_bin().into(),
        args: helper_args.iter().map(|a| a.to_string()).collect(),
    });
    app
}
