pub mod scheduler;
pub mod store;
