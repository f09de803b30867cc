mod binaries;
mod config;
mod golden;
mod play;
mod report;
mod runner;
mod store;
mod train;
