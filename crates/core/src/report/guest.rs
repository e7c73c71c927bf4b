//! The checks inside a running Windows VM, read through its guest agent:
//! which Windows it is, each passed-through function as Windows sees it
//! (Code 43 and the other problem codes, from pnputil), and whether it runs
//! on message-signalled interrupts (MSI, from the registry), then Windows'
//! power plan, timer and Looking Glass service (guest_settings.rs). Each with its
//! evidence, why and fix, like the host's checks. `check --domain` and the
//! app's VM findings get them from `domain_findings`.

use std::time::Duration;

use crate::checks::model::{Finding, Status};
use crate::guest::windows::{PnpDevice, msi_key, msi_supported, pnputil_devices};
use crate::guest::{Agent, AgentError, AgentLink};

/// Each call's bound: a guest that does not answer costs seconds, not a hang.
pub const AGENT_TIMEOUT_S: u32 = 5;
/// A program run in the guest (pnputil, reg) gets this long.
const EXEC_WAIT: Duration = Duration::from_secs(20);

/// A function passed through, as the guest should see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedFunction {
    /// The host's address (`0000:0b:00.0`), for the finding's device.
    pub address: String,
    pub vendor_id: u16,
    pub device_id: u16,
    pub name: String,
}

const PNPUTIL: &str = "C:\\Windows\\System32\\pnputil.exe";
const REG: &str = "C:\\Windows\\System32\\reg.exe";

/// The in-guest findings of a running VM whose functions are `passed`;
/// `looking_glass`: the VM has Looking Glass's shared memory, so its host
/// service should run in Windows.
pub fn guest_findings(
    link: &dyn AgentLink,
    passed: &[PassedFunction],
    looking_glass: bool,
) -> Vec<Finding> {
    let agent = Agent::new(link, AGENT_TIMEOUT_S);
    let os = match agent.osinfo() {
        Ok(os) => os,
        // The demo's test driver has no QEMU, so no agent: nothing to say.
        Err(AgentError::Unsupported(_)) => return Vec::new(),
        Err(e) => return vec![agent_missing(&e)],
    };
    let mut out = vec![
        Finding::new(
            "guest.os",
            format!("The guest agent answers: {}", os.summary()),
            if os.is_windows() { Status::Pass } else { Status::Info },
        )
        .evidence("guest-get-osinfo", os.summary())
        .why("The checks inside the VM (the GPU's driver and problem code, MSI mode) are read through the guest agent."),
    ];
    if !os.is_windows() {
        return out;
    }
    let listing = agent.exec(PNPUTIL, &["/enum-devices", "/connected"], EXEC_WAIT);
    let devices = match listing {
        Ok(o) if o.exit_code == Some(0) => pnputil_devices(&o.stdout),
        Ok(o) => {
            out.push(
                Finding::new(
                    "guest.devices",
                    "Windows' device list could not be read",
                    Status::Unknown,
                )
                .evidence(
                    "pnputil /enum-devices",
                    format!("exit {:?}: {}", o.exit_code, o.stderr.trim()),
                )
                .why("pnputil lists devices from Windows 10 version 2004 on."),
            );
            return out;
        }
        Err(e) => {
            out.push(agent_unknown(
                "guest.devices",
                "Windows' device list could not be read",
                &e,
            ));
            return out;
        }
    };
    for f in passed {
        let seen = devices
            .iter()
            .find(|d| d.pci_ids() == Some((f.vendor_id, f.device_id)));
        out.push(function_finding(f, seen));
        if let Some(d) = seen {
            out.push(msi_finding(&agent, f, d));
        }
    }
    out.push(super::guest_settings::power_finding(&agent));
    out.push(super::guest_settings::timer_finding(&agent));
    if looking_glass {
        out.push(super::guest_settings::looking_glass_finding(&agent));
    }
    out
}

/// What happened, without the "what to try" line (the finding's fix says it).
fn said(e: &AgentError) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

fn agent_missing(e: &AgentError) -> Finding {
    let status = match e {
        AgentError::Absent(_) => Status::Warn,
        _ => Status::Unknown,
    };
    Finding::new("guest.agent", "No guest agent answers in the VM", status)
        .evidence("guest-get-osinfo", said(e))
        .why("Without the agent nothing here can see inside Windows: whether the GPU has its driver, a Code 43, MSI mode. It also lets the host shut Windows down cleanly.")
        .fix(e.hint())
}

fn agent_unknown(id: &str, title: &str, e: &AgentError) -> Finding {
    Finding::new(id, title, Status::Unknown)
        .evidence("guest agent", said(e))
        .why("The check needs a program run in the guest through its agent.")
        .fix(e.hint())
}

/// The function as Windows lists it (`seen`: its pnputil entry, if any).
fn function_finding(f: &PassedFunction, seen: Option<&PnpDevice>) -> Finding {
    let id = format!("PCI\\VEN_{:04X}&DEV_{:04X}", f.vendor_id, f.device_id);
    let Some(d) = seen else {
        return Finding::new("guest.function", format!("Windows does not list {}", f.name), Status::Fail)
            .device(&f.address)
            .evidence("pnputil /enum-devices /connected", format!("no {id}"))
            .why("The function is passed through but Windows sees no device with its IDs: it did not reach the guest (a start with the hostdev missing), or its slot is hidden.")
            .fix("Check the VM's hostdev lines on the Devices page, and that the VM was started after the card was added.");
    };
    let evidence = format!(
        "{}: {}{}",
        d.instance_id,
        d.status,
        d.problem
            .as_ref()
            .map(|(c, n)| format!(", problem {c} [{n}]"))
            .unwrap_or_default()
    );
    let base = |title: String, status| {
        Finding::new("guest.function", title, status)
            .device(&f.address)
            .evidence("pnputil /enum-devices /connected", evidence.clone())
    };
    match &d.problem {
        Some((43, _)) => base(format!("{} stopped by Windows: Code 43", d.description), Status::Fail)
            .why("Code 43 is the driver giving up on the card after it started: on a passed-through GPU mostly the driver seeing a VM (older NVIDIA drivers), a card not reset since the host used it, or a missing or wrong ROM.")
            .fix("Run the VM checks on this page (hidden KVM signature and Hyper-V vendor ID for older NVIDIA drivers, the card's reset and ROM), then restart the VM; update the GPU driver in Windows."),
        Some((code, name)) => base(format!("{} has a problem: code {code}", d.description), Status::Warn)
            .why(format!("Windows' device manager reports {name} for it: the card does not work as it should."))
            .fix("Open Device Manager in Windows for the device's own message; reinstall the GPU vendor's driver."),
        None if d.driver.is_none() => base(format!("{} has no driver yet", d.description), Status::Warn)
            .why("Windows found the card but has no driver for it: it shows at most a basic display.")
            .fix("Install the GPU vendor's driver in Windows (NVIDIA's, AMD's or Intel's own installer)."),
        None => base(format!("{} runs in Windows", d.description), Status::Pass)
            .why("Windows has the card with its driver and no problem code."),
    }
}

fn msi_finding(agent: &Agent, f: &PassedFunction, d: &PnpDevice) -> Finding {
    let key = msi_key(&d.instance_id);
    let q = agent.exec(REG, &["query", &key, "/v", "MSISupported"], EXEC_WAIT);
    let why = "Line-based interrupts are shared and emulated through the host: a GPU or its HDMI audio on them stutters and crackles in a VM. Message-signalled interrupts (MSI) go to the guest directly.";
    let fix = "Set MSISupported to 1 under the device's Interrupt Management\\MessageSignaledInterruptProperties key in Windows (or with the MSI mode utility), then restart Windows; redo it after each GPU driver update.";
    let finding = |title: String, status, value: String| {
        Finding::new("guest.msi", title, status)
            .device(&f.address)
            .evidence(format!("reg query {key} /v MSISupported"), value)
            .why(why)
    };
    match q {
        Ok(o) => match msi_supported(&o.stdout) {
            Some(true) => finding(
                format!("{} uses MSI in Windows", d.description),
                Status::Pass,
                "0x1".into(),
            ),
            Some(false) => finding(
                format!("{} is on line-based interrupts", d.description),
                Status::Warn,
                "0x0".into(),
            )
            .fix(fix),
            None => finding(
                format!("{}'s MSI setting is the driver's default", d.description),
                Status::Info,
                "not set".into(),
            )
            .fix(fix),
        },
        Err(e) => agent_unknown(
            "guest.msi",
            &format!("{}'s MSI setting could not be read", d.description),
            &e,
        )
        .device(&f.address),
    }
}
