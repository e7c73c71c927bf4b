//! Names in the accessibility tree for controls that draw no text of their
//! own (an arrow, a chip to drag): what a screen reader says for them, and
//! what an AT-SPI driver finds them by. A hover text is not a name.

use egui::{Response, Role, WidgetInfo};

/// Name `resp` as a control of `role`, called `name`.
pub fn name_control(resp: &Response, role: Role, name: impl Into<String>) {
    let name = name.into();
    let enabled = resp.enabled();
    resp.widget_info(|| WidgetInfo::labeled(role, enabled, &name));
}

/// Name the arrow that opens or closes a section `about` something, and
/// say whether it is open (a screen reader says "expanded" or "collapsed").
/// What it is about goes in its description, not its name: the section's
/// title is its own node beside it, and one name is found once.
pub fn name_expander(resp: &Response, name: impl Into<String>, about: &str, open: bool) {
    name_control(resp, Role::Button, name);
    resp.ctx.accesskit_node_builder(resp.id, |node| {
        node.set_expanded(open);
        node.set_description(about);
    });
}

/// What a disabled control's description starts with.
pub const UNAVAILABLE: &str = "unavailable";

/// AccessKit's AT-SPI adapter (accesskit_atspi_common 0.20, the one eframe
/// 0.37 takes) says ENABLED and SENSITIVE for a disabled button, link or
/// tab: only roles with a read-only state lose them (AccessKit pull
/// requests 787 and 788, merged after 0.20.0). A screen reader then says
/// "Apply, button" for an Apply that does nothing. Until that release,
/// every disabled node's description starts with "unavailable", which
/// Orca reads after the name and the desktop driver tests.
pub struct DisabledSaid;

impl egui::Plugin for DisabledSaid {
    fn debug_name(&self) -> &'static str {
        "vfio-assistant: disabled said"
    }

    fn output_hook(&mut self, _ctx: &egui::Context, output: &mut egui::FullOutput) {
        let Some(update) = output.platform_output.accesskit_update.as_mut() else {
            return;
        };
        for (_, node) in &mut update.nodes {
            if !node.is_disabled()
                || node
                    .description()
                    .is_some_and(|d| d.starts_with(UNAVAILABLE))
            {
                continue;
            }
            let said = match node.description() {
                Some(d) if !d.is_empty() => format!("{UNAVAILABLE}: {d}"),
                _ => UNAVAILABLE.to_string(),
            };
            node.set_description(said);
        }
    }
}
