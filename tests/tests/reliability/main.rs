//! What the platform does when its dependencies fail, when its workers are killed, and under
//! a quarter hour of steady load: one test binary (one link) for the three, as
//! `docs/reliability.md` reports them, run as one process per module (`faults::`, `crashes::`, and one
//! for the rest; each starts its own stack, so killed workers' leftovers in moto never meet
//! the matrix).
//! `make test` runs the short versions; `make chaos` the full fault matrix and crashes
//! (`CHAOS=full`); `make soak` the soak.

mod crashes;
mod faults;
mod soak;
