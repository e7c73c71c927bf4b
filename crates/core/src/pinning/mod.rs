//! CPU pinning: the planner (topology + request -> plan with vcpupin,
//! emulatorpin, iothreadpin, guest topology, numatune and the kernel command
//! line) and the validator (any pinning -> problems with reasons). `vcache`
//! is the preference for the biggest of unequal L3 groups (X3D parts).

pub mod board;
pub mod kinds;
pub mod model;
pub mod plan;
pub mod validate;
pub mod vcache;

pub use model::{PinPlan, PinRequest};
pub use plan::{PlanError, plan};
pub use validate::{Pinning, validate};

impl PinPlan {
    /// The plan as a pinning the validator reads.
    pub fn pinning(&self) -> Pinning {
        Pinning {
            vcpus: self
                .vcpupin
                .iter()
                .map(|(v, c)| (*v, std::iter::once(*c).collect()))
                .collect(),
            emulator: self.emulatorpin.iter().copied().collect(),
            guest: Some(self.guest),
        }
    }
}
