//! pass@k reports over run folders (`patchgrade report`, and the table at
//! the end of `patchgrade run`).
//!
//! A run folder holds one record per evaluated sample
//! ([`crate::rundir`]); [`samples`] reads them into per-instance sample
//! tables (n samples, c resolved), leaving out samples whose outcome does not
//! count for the model. [`build`] computes pass@k and pass^k for each k with
//! 95% bootstrap intervals over instances, their "clean" variants (a
//! resolved sample whose audit verdict is `suspect` counts as a failure) and
//! [`slices`]; [`compare`] pairs two runs; [`render`] writes the table,
//! the Markdown report and its [`plot`]s.

pub mod build;
pub mod compare;
pub mod keyed;
pub mod plot;
pub mod render;
pub mod samples;
pub mod slices;

#[cfg(test)]
mod tests;
