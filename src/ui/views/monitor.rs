//! Monitor: live interrupts per CPU as heat over the topology drawing (the
//! VM's CPUs marked with their vCPU; a compact strip on request),
//! the busiest interrupt sources, where each vCPU ran against its pinning,
//! KVM exit rates by kind with what they mean, and the last minutes as plots.
//! The sampler thread wakes the window only when a sample would show something
//! new (`MonitorConfig::only_changes`).

use super::monitor_heat::{heat_legend, heat_strip, heat_topology};
use crate::host::HostSnapshot;
use crate::host::topology::Topology;
use crate::monitor::latency::{LatencyStats, TIMELINE_WINDOW, compared};
use crate::monitor::rates::Rates;
use crate::monitor::sampler::{Series, Update};
use crate::parse::cpulist::{format_cpulist, parse_cpulist};
use crate::ui::app::Command;
use crate::ui::state::State;
use egui::RichText;
use egui_plot::{Bar, BarChart, Legend, Line, Plot, PlotPoints};
use std::collections::BTreeSet;

/// What the page shows between samples (not persisted).
#[derive(Debug, Default)]
pub struct MonitorView {
    pub last: Option<Update>,
    pub irq_total: Series,
    pub exits: Series,
    pub busy_avg: Series,
    /// The last latency probe's answer.
    pub latency: Option<Result<Vec<LatencyStats>, String>>,
    /// The same probe with every CPU held out of deep idle states, when asked.
    pub latency_held: Option<Result<Vec<LatencyStats>, String>>,
    /// The other machine the samples come from (its monitor runs there).
    pub from: Option<String>,
    /// Why that machine's feed ended (not started again by itself).
    pub ended: Option<String>,
}

impl MonitorView {
    pub fn new() -> Self {
        MonitorView {
            last: None,
            irq_total: Series::new(600),
            exits: Series::new(600),
            busy_avg: Series::new(600),
            latency: None,
            latency_held: None,
            from: None,
            ended: None,
        }
    }
    /// A new sampler starts from scratch; the last probe result stays.
    pub fn restart(&mut self) {
        let latency = self.latency.take();
        let held = self.latency_held.take();
        *self = MonitorView::new();
        self.latency = latency;
        self.latency_held = held;
    }
    pub fn push(&mut self, u: Update) {
        let r = &u.rates;
        self.irq_total
            .push(u.t_s, r.irq_per_cpu.iter().map(|(_, v)| v).sum());
        if let Some(k) = r.kvm.iter().find(|k| k.name == "exits") {
            self.exits.push(u.t_s, k.per_s);
        }
        if !r.cpu_use.is_empty() {
            let avg = r.cpu_use.iter().map(|c| c.busy).sum::<f64>() / r.cpu_use.len() as f64;
            self.busy_avg.push(u.t_s, avg * 100.0);
        }
        self.last = Some(u);
    }
}

use crate::ui::theme::WARN;

/// Which cpufreq governor runs where; in the warning colour when a CPU of
/// the followed VM is not on `performance`.
fn governors_ui(ui: &mut egui::Ui, r: &Rates, vm_cpus: &BTreeSet<u32>) {
    if r.governors.is_empty() {
        return;
    }
    let text = format!("CPU frequency governor: {}", r.governors_text());
    let slow: Vec<u32> = r
        .governors
        .iter()
        .filter(|g| g.governor != "performance")
        .flat_map(|g| g.cpus.iter().copied())
        .filter(|c| vm_cpus.contains(c))
        .collect();
    let why = "A power-saving governor lets cores clock down between frames; the guest then waits for them to ramp up again (stutter, audio crackle). The CPU frequency governor check on the Overview says how to switch while gaming.";
    if slow.is_empty() {
        ui.weak(text).on_hover_text(why);
    } else {
        ui.colored_label(
            WARN,
            if slow.len() == 1 {
                format!("{text} - the VM's CPU {} is not on performance", slow[0])
            } else {
                format!(
                    "{text} - the VM's CPUs {} are not on performance",
                    format_cpulist(&slow)
                )
            },
        )
        .on_hover_text(why);
    }
}

fn plot(ui: &mut egui::Ui, v: &MonitorView) {
    let line = |s: &Series, name: &str| Line::new(name, PlotPoints::from_iter(s.points().copied()));
    Plot::new("monitor_plot")
        .height(160.0)
        .legend(Legend::default())
        .allow_scroll(false)
        .x_axis_label("seconds")
        .y_axis_label("per second")
        // A range always, so the y numbers never vanish (all zeros, a
        // flat line) and the axis keeps its width.
        .include_y(0.0)
        .include_y(10.0)
        .y_axis_min_width(48.0)
        .show(ui, |p| {
            p.line(line(&v.irq_total, "interrupts/s (all CPUs)"));
            if !v.exits.is_empty() {
                p.line(line(&v.exits, "KVM exits/s (VM)"));
            }
        });
}

/// Where the probe runs when the field is left empty, and why there: while
/// the VM this page follows runs, on the housekeeping CPUs (a real-time probe
/// on the VM's CPUs would itself disturb the guest); otherwise on the CPUs
/// the CPU page's board pins it to, said to be for before it starts (a VM
/// not followed here may be running), or else on the isolated ones.
pub fn default_probe_cpus(
    t: &Topology,
    state: &State,
    vm_cpus: &BTreeSet<u32>,
) -> Option<(Vec<u32>, &'static str)> {
    let online: Vec<u32> = t.online_cpus().map(|c| c.id).collect();
    if !vm_cpus.is_empty() {
        let house: Vec<u32> = online
            .iter()
            .copied()
            .filter(|c| !vm_cpus.contains(c))
            .collect();
        return (!house.is_empty())
            .then_some((house, "the housekeeping CPUs (the VM runs on the others)"));
    }
    let pinned: BTreeSet<u32> = state.board.pins.values().copied().collect();
    if !pinned.is_empty() {
        return Some((
            pinned.into_iter().collect(),
            "the CPUs the CPU page pins the vCPUs to: run it before the VM starts, a running guest there would be disturbed",
        ));
    }
    let isolated: Vec<u32> = t
        .online_cpus()
        .filter(|c| c.isolated || c.nohz_full)
        .map(|c| c.id)
        .collect();
    (!isolated.is_empty()).then_some((isolated, "the isolated CPUs (isolcpus/nohz_full)"))
}

fn latency_ui(
    ui: &mut egui::Ui,
    t: &Topology,
    v: &MonitorView,
    state: &mut State,
    vm_cpus: &BTreeSet<u32>,
    mode: PageMode,
    out: &mut Vec<Command>,
) {
    let busy = mode.busy;
    ui.label(RichText::new("Timer latency (cyclictest-style)").strong());
    let default = default_probe_cpus(t, state, vm_cpus);
    let hint = default
        .as_ref()
        .map_or_else(|| "e.g. 2-5".to_string(), |(c, _)| format_cpulist(c));
    ui.horizontal(|ui| {
        let l = ui.label("Probe CPUs");
        ui.add(
            egui::TextEdit::singleline(&mut state.latency_cpus)
                .hint_text(hint.clone())
                .desired_width(100.0),
        )
        .labelled_by(l.id);
        let text = if state.latency_cpus.trim().is_empty() {
            hint.clone()
        } else {
            state.latency_cpus.clone()
        };
        let cpus = parse_cpulist(&text).ok().filter(|c| !c.is_empty());
        let label = if state.latency_compare_idle {
            "Run the probe (2 x 5 s)"
        } else {
            "Run the probe (5 s)"
        };
        let run = ui
            .add_enabled(cpus.is_some() && !busy && mode.live, egui::Button::new(label))
            .on_hover_text("Wakes a real-time thread on each CPU every millisecond and records how late it woke: the delay a vCPU pinned there would see from the host. Run it before starting the VM on the CPUs you will pin, or while it runs on the housekeeping CPUs.")
            .on_disabled_hover_text(if mode.live {
                "Give the CPUs to measure (e.g. 2-5), or wait for the running job."
            } else {
                "The probe measures the CPUs of the machine the app runs on, not the captured host shown here."
            });
        ui.checkbox(&mut state.latency_compare_idle, "and with shallow idle states only")
            .on_hover_text("Measures a second time while every CPU is kept to idle states that wake within 10 µs, like C1/C1E (root; a request the kernel drops as soon as the probe ends). A big difference means deep idle states add to the guest's latency: see the CPU idle states check on the Overview.");
        if run.clicked()
            && let Some(cpus) = cpus {
                out.push(Command::Latency {
                    cpus: cpus.into_iter().collect(),
                    seconds: 5,
                    compare_idle: state.latency_compare_idle,
                });
            }
        if busy {
            ui.weak("measuring…");
        }
    });
    // On its own line: the reasons are longer than the row has room for.
    if !busy && state.latency_cpus.trim().is_empty() && mode.live {
        match &default {
            Some((_, why)) => ui.weak(format!("An empty field probes {why}.")),
            None => ui.weak("Type the CPUs to measure: no VM is followed, the CPU page pins nothing and no CPU is isolated, so there is no default."),
        };
    }
    match &v.latency {
        Some(Ok(stats)) => {
            for s in stats {
                let note = if s.realtime {
                    ""
                } else {
                    " (not real-time: run as root for SCHED_FIFO)"
                };
                let word = crate::monitor::latency::verdict(s.summary.p99_us, s.summary.max_us);
                let color = match word {
                    crate::monitor::latency::Verdict::Good => crate::ui::theme::GOOD,
                    crate::monitor::latency::Verdict::Fair => crate::ui::theme::WARN,
                    crate::monitor::latency::Verdict::Poor => crate::ui::theme::BAD,
                };
                ui.horizontal_wrapped(|ui| {
                    ui.colored_label(color, RichText::new(word.word().to_uppercase()).strong())
                        .on_hover_text(crate::monitor::latency::thresholds());
                    ui.label(
                        RichText::new(format!(
                            "CPU {}: min {} µs, avg {} µs, p50 {} µs, p99 {} µs, max {} µs over {} wake-ups{note}",
                            s.cpu, s.summary.min_us, s.summary.avg_us, s.summary.p50_us, s.summary.p99_us, s.summary.max_us, s.summary.samples
                        ))
                        .monospace(),
                    );
                });
                if let Some(Ok(held)) = &v.latency_held
                    && let Some(h) = held.iter().find(|h| h.cpu == s.cpu)
                {
                    ui.label(RichText::new(format!("       {}", compared(s, h))).monospace());
                }
            }
            if let Some(Err(e)) = &v.latency_held {
                ui.weak(format!("With shallow idle states only: not measured ({e})"));
            }
            ui.weak(format!(
                "For a vCPU pinned there — {}.",
                crate::monitor::latency::thresholds()
            ));
            let mut buckets: Vec<u64> = Vec::new();
            for s in stats {
                for (i, n) in s.summary.histogram_log2_us.iter().enumerate() {
                    if buckets.len() <= i {
                        buckets.resize(i + 1, 0);
                    }
                    buckets[i] += n;
                }
            }
            let bars: Vec<Bar> = buckets
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    Bar::new(i as f64, (*n as f64 + 1.0).log10())
                        .name(format!("below {} µs: {n}", 1u64 << (i + 1).min(63)))
                })
                .collect();
            // Over time: the worst wake-up of each window, one line per CPU.
            ui.add_space(8.0);
            Plot::new("latency_timeline")
                .height(120.0)
                .allow_scroll(false)
                .legend(Legend::default())
                .x_axis_label("seconds into the probe")
                .y_axis_label(format!("worst µs per {} ms", TIMELINE_WINDOW.as_millis()))
                .show(ui, |p| {
                    for s in stats {
                        let pts = s.summary.timeline_us.iter().map(|(t, us)| [*t, *us as f64]);
                        p.line(Line::new(
                            format!("CPU {}", s.cpu),
                            PlotPoints::from_iter(pts),
                        ));
                    }
                });
            Plot::new("latency_hist")
                .height(120.0)
                .allow_scroll(false)
                .x_axis_label("wake-up delay, µs (each bar: up to the value under it)")
                .x_axis_formatter(|mark, _| {
                    let i = mark.value;
                    if i >= 0.0 && i.fract() == 0.0 && i < 40.0 {
                        format!("{} µs", 1u64 << (i as u32 + 1))
                    } else {
                        String::new()
                    }
                })
                .y_axis_label("wake-ups (log scale)")
                .y_axis_formatter(|mark, _| {
                    let n = 10f64.powf(mark.value) - 1.0;
                    if n < 0.5 {
                        "0".into()
                    } else {
                        format!("{n:.0}")
                    }
                })
                .show(ui, |p| p.bar_chart(BarChart::new("wake-ups", bars)));
        }
        Some(Err(e)) => {
            ui.colored_label(
                ui.visuals().error_fg_color,
                format!("The probe failed: {e}"),
            );
        }
        None => {}
    }
}

/// What the page is shown with: whether the sampler runs, whether a job
/// (the probe) does, and whether the host is this machine (a snapshot's or
/// the demo's counters never move, and the probe would measure this
/// machine, not the one shown).
#[derive(Debug, Clone, Copy)]
pub struct PageMode {
    pub running: bool,
    pub busy: bool,
    pub live: bool,
}

pub fn monitor_ui(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    v: &MonitorView,
    state: &mut State,
    mode: PageMode,
    install: Option<&super::inside_vm::InstallView<'_>>,
    out: &mut Vec<Command>,
) {
    egui::ScrollArea::vertical()
        .id_salt("monitor_page")
        .auto_shrink(false)
        .show(ui, |ui| {
            if let Some(i) = install {
                super::inside_vm::install_ui(ui, i, out);
            }
            page(ui, snap, v, state, mode, out)
        });
}

/// The rows of "Busiest interrupt sources" and of the KVM exits, always.
const SOURCE_ROWS: usize = 8;

/// Said at the top of the page on a captured host.
pub const CAPTURED_HOST: &str = "A captured host (a snapshot or the demo): its counters were written once and never move, so rates here stay at zero. The monitor and the latency probe are for the live machine: choose This machine in the Host menu, or run the app there.";

fn page(
    ui: &mut egui::Ui,
    snap: &HostSnapshot,
    v: &MonitorView,
    state: &mut State,
    mode: PageMode,
    out: &mut Vec<Command>,
) {
    let PageMode { running, live, .. } = mode;
    if !live {
        ui.colored_label(WARN, CAPTURED_HOST);
    }
    if let Some(host) = &v.from {
        ui.weak(format!(
            "Samples from {host}: its monitor runs there and sends them over one SSH session; the latency probe runs there too."
        ));
    }
    if let Some(why) = &v.ended {
        ui.colored_label(WARN, format!("The feed ended: {why}"));
    }
    ui.horizontal(|ui| {
        let l = ui.label("Follow VM");
        // The VM every page shares, offered by name (it may not run yet).
        let vm = state.vm.name.trim().to_string();
        ui.add(
            egui::TextEdit::singleline(&mut state.monitor_domain)
                .hint_text(crate::ui::theme::hint(&vm))
                .desired_width(200.0),
        )
        .labelled_by(l.id);
        if !vm.is_empty()
            && state.monitor_domain.trim() != vm
            && ui
                .button(format!("Follow '{vm}'"))
                .on_hover_text(
                    "The VM of the New VM, CPU and Tuning pages; it is followed once it runs.",
                )
                .clicked()
        {
            state.monitor_domain = vm;
            out.push(Command::StartMonitor);
        }
        if ui
            .button(match (running, v.ended.is_some()) {
                (true, _) => "Restart",
                (false, true) => "Connect again",
                (false, false) => "Start",
            })
            .clicked()
        {
            out.push(Command::StartMonitor);
        }
        if running {
            // No spinner: it would repaint every frame; the sampler wakes us.
            ui.weak("sampling every second");
        }
    });
    let Some(u) = &v.last else {
        ui.label("Waiting for the first two samples…");
        return;
    };
    let r = &u.rates;
    let vm_cpus: BTreeSet<u32> =
        u.vm.iter()
            .flat_map(|vm| vm.pins.values().flatten().copied())
            .collect();
    match (&u.vm, &u.vm_problem) {
        (Some(vm), _) => {
            ui.label(format!(
                "Following {} (QEMU pid {}), {} vCPUs; its CPUs are marked with their vCPU.",
                vm.name,
                vm.pid,
                vm.vcpus.len()
            ));
        }
        (None, Some(p)) => {
            ui.colored_label(WARN, format!("VM not followed: {p}"));
        }
        (None, None) => {
            ui.weak("Host only: name a running VM to see its vCPUs and KVM exits.");
        }
    }
    ui.horizontal(|ui| {
        ui.label(RichText::new("Interrupts per CPU").strong());
        ui.checkbox(&mut state.monitor_strip, "compact strip")
            .on_hover_text("One row of CPUs instead of the topology drawing");
    });
    if state.monitor_strip || snap.topology.cores.is_empty() {
        heat_strip(ui, r, &vm_cpus);
    } else {
        heat_topology(ui, &snap.topology, u, &vm_cpus);
    }
    heat_legend(ui);
    governors_ui(ui, r, &vm_cpus);
    plot(ui, v);
    ui.columns(2, |cols| {
        let ui = &mut cols[0];
        ui.label(RichText::new("Busiest interrupt sources").strong());
        // Always SOURCE_ROWS rows (padded): the controls below stay put
        // as the list grows and shrinks from one second to the next.
        let mut rows = 0;
        if r.sources.is_empty() && !r.irq_per_cpu.is_empty() {
            ui.weak("none fired during the last interval");
            rows += 1;
        }
        for s in r.sources.iter().take(SOURCE_ROWS - rows) {
            rows += 1;
            let mut line = format!("{:>7.0}/s  {}  {}", s.per_s, s.label, s.description);
            if let Some(m) = s.vfio {
                line.push_str(&format!("  [passed-through, {m:?}]"));
            }
            // One line each (truncated, the whole line on hover): columns stay aligned.
            match s.misplaced() {
                None => {
                    ui.add(egui::Label::new(RichText::new(line.clone()).monospace()).truncate())
                        .on_hover_text(line);
                }
                Some(m) => {
                    let line = format!("{line}  - on {m}");
                    ui.add(egui::Label::new(RichText::new(line.clone()).monospace().color(WARN)).truncate())
                        .on_hover_text(format!("{line}\n\nAn interrupt handled on a CPU set aside for the guest (a vCPU's host CPU, or one isolated with isolcpus/nohz_full) interrupts the guest: steer it away with irqaffinity= on the kernel command line or /proc/irq/N/smp_affinity_list."));
                }
            }
        }
        for _ in rows..SOURCE_ROWS {
            ui.label(RichText::new(" ").monospace());
        }
        let ui = &mut cols[1];
        if !r.vcpus.is_empty() {
            ui.label(RichText::new("vCPU placement").strong());
            for c in &r.vcpus {
                let text = format!(
                    "vCPU {} on CPU {} (pinned {:?}), ran {:.0}%, waited {:.1} ms/s",
                    c.vcpu, c.cpu, c.pinned, c.running * 100.0, c.wait_ms_per_s
                );
                if c.on_pin == Some(false) {
                    ui.colored_label(WARN, format!("{text} — not on its pinned CPU"));
                } else {
                    ui.label(text);
                }
            }
        }
        if !r.kvm.is_empty() {
            let heading = ui.label(RichText::new("KVM exits by kind").strong());
            if let Some(src) = r.kvm_source {
                heading.on_hover_text(format!("from {}", src.label()));
            }
            // One line each, padded to SOURCE_ROWS (the meaning on hover).
            let kinds: Vec<_> = r.kvm.iter().take(SOURCE_ROWS).collect();
            for k in &kinds {
                ui.add(egui::Label::new(format!("{:>8.0}/s  {}", k.per_s, k.name)).truncate())
                    .on_hover_text(k.meaning);
            }
            for _ in kinds.len()..SOURCE_ROWS {
                ui.label(" ");
            }
        }
    });
    for p in &r.problems {
        ui.weak(format!("note: {p}"));
    }
    ui.separator();
    latency_ui(ui, &snap.topology, v, state, &vm_cpus, mode, out);
}
