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
