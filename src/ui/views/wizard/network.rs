//! The network step: NAT, a bridge, macvtap or an SR-IOV function.

use super::StepSpec;
use crate::ui::wizard_state::{NetChoice, Step, WizardState};

pub const STEP: StepSpec = StepSpec {
    step: Step::Network,
    title: "Network",
    draw: |ui, cx| network_step(ui, cx.w),
};

fn network_step(ui: &mut egui::Ui, w: &mut WizardState) {
    ui.heading("Network");
    ui.radio_value(
        &mut w.network,
        NetChoice::Nat,
        "NAT (libvirt's 'default' network): works everywhere, the LAN does not see the VM",
    );
    ui.radio_value(
        &mut w.network,
        NetChoice::Bridge,
        "Bridge: the VM is on your LAN (needs a host bridge such as br0)",
    );
    ui.radio_value(
        &mut w.network,
        NetChoice::Macvtap,
        "macvtap on a host interface: on the LAN without a bridge, but host and VM cannot talk",
    );
    ui.radio_value(
        &mut w.network,
        NetChoice::Vf,
        "An SR-IOV virtual function of the NIC (PCI address): the NIC's own hardware, lowest latency",
    );
    ui.radio_value(&mut w.network, NetChoice::Off, "No network");
    if matches!(
        w.network,
        NetChoice::Bridge | NetChoice::Macvtap | NetChoice::Vf
    ) {
        ui.horizontal(|ui| {
            let l = ui.label(match w.network {
                NetChoice::Bridge => "Bridge",
                NetChoice::Vf => "Virtual function (PCI address)",
                _ => "Interface",
            });
            ui.text_edit_singleline(&mut w.net_device).labelled_by(l.id);
        });
    }
}
