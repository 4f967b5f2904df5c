//! What the platform does when its dependencies fail, when its workers are killed, and under
//! a quarter hour of steady load: one test binary (one stack, one link) for the three, as
//! `docs/reliability.md` reports them. `make test` runs the short versions; `make chaos` the
//! full fault matrix and crashes (`CHAOS=full`); `make soak` the soak.

mod crashes;
mod faults;
mod soak;
