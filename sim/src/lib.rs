//! A simulated app that carries the lynkeus agent, written from the spec.
//!
//! It dials a driver the way the agent does, checks the token, answers
//! `hello`, remembers its last 64 answers per session, and runs an
//! [app model](model) with every core method. Tests, benchmarks and
//! `argus demo` use it where no simulator exists; it is not a mock, and it
//! fails the way the agent fails.

pub mod agent;
pub mod app;
pub mod backoff;
pub mod matching;
pub mod model;
pub mod picture;
pub mod screen;

pub use agent::{Agent, AgentConfig};
pub use app::App;
pub use model::{Model, ModelError};
