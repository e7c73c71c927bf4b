//! Drawing: the top bar and the page, with each view given its page's
//! runtime; the views' commands run after the frame is drawn.

use super::{App, Command};
use crate::ui::Source;
use crate::ui::state::Page;

impl App {
    /// Draw everything into `ui`, then run what the views asked for.
    pub fn ui_content(&mut self, ui: &mut egui::Ui) {
        super::super::theme::ensure_readable(ui.ctx());
        // Once per context (egui keeps one plugin of a type).
        ui.ctx().add_plugin(crate::ui::widgets::a11y::DisabledSaid);
        egui::Panel::top("top_bar").show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.heading("VFIO Assistant");
                ui.separator();
                for &page in Page::ALL {
                    if ui
                        .selectable_label(self.state.page == page, page.title())
                        .clicked()
                    {
                        self.commands.push(Command::ShowPage(page));
                    }
                }
                ui.separator();
                let rescan = ui.add_enabled(
                    self.root.is_some() && !self.is_scanning(),
                    egui::Button::new("Rescan"),
                );
                if rescan.clicked() {
                    self.commands.push(Command::Rescan);
                }
                if self.is_fetching() {
                    ui.spinner();
                    ui.label("Taking the snapshot there over SSH…");
                } else if self.is_scanning() {
                    ui.spinner();
                    ui.label("Scanning…");
                }
                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                    self.host_picker_ui(ui);
                });
            });
            if let Some(n) = &self.note {
                ui.colored_label(crate::ui::theme::WARN, n);
            }
        });
        egui::CentralPanel::default().show(ui, |ui| self.page_ui(ui));
        let ctx = ui.ctx().clone();
        for cmd in std::mem::take(&mut self.commands) {
            self.run(cmd, &ctx);
        }
    }

    /// The host shown, and the places to switch to: this machine, the
    /// demo, another machine over SSH, a snapshot. Each keeps its own
    /// saved choices.
    fn host_picker_ui(&mut self, ui: &mut egui::Ui) {
        let label = format!("Host: {} (change)", self.source_label);
        // A click inside (into a field) keeps the menu open; one outside,
        // Escape, or a choice closes it. Tab walks its own controls (they
        // are drawn in the top bar's turn, before the page's).
        let config = egui::containers::menu::MenuConfig::new()
            .close_behavior(egui::PopupCloseBehavior::CloseOnClickOutside);
        let button = egui::Button::new(super::super::theme::shortened(&label, 60));
        let r = egui::containers::menu::MenuButton::from_button(button)
            .config(config)
            .ui(ui, |ui| self.host_menu_ui(ui));
        r.0.on_hover_text(label);
    }

    fn host_menu_ui(&mut self, ui: &mut egui::Ui) {
        ui.set_min_width(340.0);
        if ui.button("This machine").clicked() {
            self.commands.push(Command::SwitchHost(Source::Live));
            ui.close();
        }
        if ui.button("Demo host (sample data)").clicked() {
            self.commands.push(Command::SwitchHost(Source::Demo));
            ui.close();
        }
        ui.separator();
        let l = ui.label("Another machine over SSH");
        let typed = ui
            .add(
                egui::TextEdit::singleline(&mut self.picker.ssh)
                    .hint_text(super::super::theme::hint("ssh://anna@server"))
                    .desired_width(300.0),
            )
            .labelled_by(l.id);
        let mut parsed = crate::remote::SshTarget::parse(self.picker.ssh.trim());
        if let Ok(t) = &mut parsed {
            t.via = self.picker.via.clone();
        }
        let enter = typed.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let connect = ui.add_enabled(parsed.is_ok(), egui::Button::new("Connect"));
        if let Ok(t) = &parsed
            && (connect.clicked() || enter)
        {
            self.commands
                .push(Command::SwitchHost(Source::Remote(t.clone())));
            ui.close();
        }
        if let (Err(e), false) = (&parsed, self.picker.ssh.trim().is_empty()) {
            ui.colored_label(crate::ui::theme::WARN, e.to_string());
        }
        ui.weak(crate::ui::theme::detail(
            "Your SSH keys and ~/.ssh/config are used (no password is asked here). That machine needs the same vfio-assistant installed; its VMs are reached over qemu+ssh, its tuning runs there through sudo.",
        ));
        ui.separator();
        let l = ui.label("A snapshot (file or folder)");
        let typed = ui
            .add(
                egui::TextEdit::singleline(&mut self.picker.snapshot)
                    .hint_text(super::super::theme::hint("~/host.tar.gz"))
                    .desired_width(300.0),
            )
            .labelled_by(l.id);
        let enter = typed.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
        let path = self.picker.snapshot.trim();
        let open = ui.add_enabled(!path.is_empty(), egui::Button::new("Open"));
        if !path.is_empty() && (open.clicked() || enter) {
            self.commands
                .push(Command::SwitchHost(Source::Root(path.into())));
            ui.close();
        }
    }

    fn page_ui(&mut self, ui: &mut egui::Ui) {
        if let Some(err) = &self.error {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("Could not read the host: {err}"),
            );
        }
        let Some(snap) = self.snapshot.clone() else {
            if self.error.is_none() {
                ui.label("Reading the host…");
            }
            return;
        };
        let mut out = Vec::new();
        super::page_table::draw(self.state.page, self, ui, &snap, &mut out);
        self.commands.extend(out);
    }
}
