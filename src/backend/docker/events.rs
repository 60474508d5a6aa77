//! What the docker backend tells the person running it about its images
//! (the cache budget and lease, removals, what a run reused and built), as
//! typed events: the library never prints, the command layer's reporter
//! shows them (each event's `Display` is its line).

use std::fmt;
use std::sync::Arc;

use super::cache::human;
use super::images::Tier;

/// Where the backend sends its events (set by the command layer).
#[derive(Clone)]
pub struct ImageEvents(Arc<dyn Fn(ImageEvent) + Send + Sync>);

impl ImageEvents {
    pub fn new(tell: impl Fn(ImageEvent) + Send + Sync + 'static) -> ImageEvents {
        ImageEvents(Arc::new(tell))
    }

    pub fn tell(&self, event: ImageEvent) {
        (self.0)(event)
    }
}

impl fmt::Debug for ImageEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ImageEvents")
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ImageEvent {
    /// Another run of the cache folder is evicting: this one waits for it.
    LeaseWait,
    /// The cache folder's lease could not be taken: this run evicts as if
    /// it were alone.
    LeaseFailed { error: String },
    /// The cache index could not be read; a new one is started.
    IndexUnreadable { error: String },
    /// The cache when the run connected, and the budget in force.
    Budget {
        usage: u64,
        images: usize,
        budget: u64,
        rule: String,
    },
    /// Images about to be removed, and why.
    Removing { total: usize, why: String },
    Removed {
        name: String,
        done: usize,
        total: usize,
    },
    NotRemoved {
        name: String,
        done: usize,
        total: usize,
        error: String,
    },
    /// Another run uses the cache folder: the last to end evicts.
    EvictionLeft,
    /// The cache after the end of the run.
    Usage {
        usage: u64,
        images: usize,
        budget: u64,
    },
    /// The cache index could not be written.
    IndexNotSaved { error: String },
    /// An image of `tier` was asked for: found in the engine (`hit`) or
    /// built. One per lookup: counted (serve's /metrics), not shown.
    Looked { tier: Tier, hit: bool },
    /// `--shelve`: instance images about to be saved to the shelf.
    Shelving { images: usize },
    /// Instance images saved to the shelf: their own layers' bytes, the
    /// archives' bytes and the time it took.
    Shelved {
        images: usize,
        raw: u64,
        stored: u64,
        secs: f64,
    },
    /// Shelving failed: the images stay in the engine.
    ShelfFailed { error: String },
    /// A shelved image could not be loaded: it is built instead (and its
    /// record dropped).
    ShelfSkipped { name: String, reason: String },
    /// What the run did with images.
    Summary {
        /// Instance images used and not built by this run.
        reused: usize,
        /// Of `reused`, those loaded from the shelf.
        unshelved: usize,
        /// Instance images built by this run.
        built_instances: usize,
        /// Images of every tier built by this run.
        built: usize,
        removed: usize,
    },
}

impl ImageEvent {
    /// Counted, not shown: a line per lookup would drown the run's output.
    pub fn is_quiet(&self) -> bool {
        matches!(self, ImageEvent::Looked { .. })
    }
}

impl fmt::Display for ImageEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageEvent::LeaseWait => {
                write!(f, "image cache: waiting for another run's eviction to end")
            }
            ImageEvent::LeaseFailed { error } => write!(
                f,
                "warning: image cache lease: {error}; evicting as if alone"
            ),
            ImageEvent::IndexUnreadable { error } => {
                write!(f, "warning: {error}; starting a new index")
            }
            ImageEvent::Budget {
                usage,
                images,
                budget,
                rule,
            } => write!(
                f,
                "image cache: {} in {images} images ({usage} bytes), budget {} ({rule})",
                human(*usage),
                human(*budget)
            ),
            ImageEvent::Removing { total, why } => write!(f, "removing {total} images ({why})"),
            ImageEvent::Removed { name, done, total } => {
                write!(f, "  removed {name} ({done}/{total})")
            }
            ImageEvent::NotRemoved {
                name,
                done,
                total,
                error,
            } => write!(f, "  could not remove {name} ({done}/{total}): {error}"),
            ImageEvent::EvictionLeft => write!(
                f,
                "image cache: eviction left to the last run to end: another run is using this cache folder"
            ),
            ImageEvent::Usage {
                usage,
                images,
                budget,
            } => write!(
                f,
                "image cache: {} in {images} images ({usage} bytes), budget {}",
                human(*usage),
                human(*budget)
            ),
            ImageEvent::IndexNotSaved { error } => write!(f, "warning: {error}"),
            ImageEvent::Looked { tier, hit } => write!(
                f,
                "{} image {}",
                tier.name(),
                if *hit { "reused" } else { "built" }
            ),
            ImageEvent::Shelving { images } => {
                write!(f, "shelving {images} instance images (--shelve)")
            }
            ImageEvent::Shelved {
                images,
                raw,
                stored,
                secs,
            } => write!(
                f,
                "shelved {images} instance images: {} of layers in {} of archives ({secs:.1} s)",
                human(*raw),
                human(*stored)
            ),
            ImageEvent::ShelfFailed { error } => write!(
                f,
                "warning: shelving failed: {error}; the instance images stay in the engine"
            ),
            ImageEvent::ShelfSkipped { name, reason } => write!(
                f,
                "warning: shelved image {name} not loaded ({reason}): building it"
            ),
            ImageEvent::Summary {
                reused,
                unshelved,
                built_instances,
                built,
                removed,
            } => {
                let from_shelf = match unshelved {
                    0 => String::new(),
                    n => format!(" ({n} from the shelf)"),
                };
                write!(
                    f,
                    "images: {reused} instance images reused{from_shelf}, {built_instances} built ({built} images built in all); {removed} removed"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_as_before() {
        let budget = ImageEvent::Budget {
            usage: 3 << 20,
            images: 2,
            budget: 1 << 30,
            rule: "--cache-budget".into(),
        };
        assert_eq!(
            budget.to_string(),
            format!(
                "image cache: {} in 2 images (3145728 bytes), budget {} (--cache-budget)",
                human(3 << 20),
                human(1 << 30)
            )
        );
        let summary = ImageEvent::Summary {
            reused: 1,
            unshelved: 0,
            built_instances: 0,
            built: 0,
            removed: 2,
        };
        assert_eq!(
            summary.to_string(),
            "images: 1 instance images reused, 0 built (0 images built in all); 2 removed"
        );
        let shelf = ImageEvent::Summary {
            reused: 3,
            unshelved: 2,
            built_instances: 0,
            built: 0,
            removed: 0,
        };
        assert_eq!(
            shelf.to_string(),
            "images: 3 instance images reused (2 from the shelf), 0 built (0 images built in all); 0 removed"
        );
        let removing = ImageEvent::Removing {
            total: 2,
            why: "--cache-level env".into(),
        };
        assert_eq!(
            removing.to_string(),
            "removing 2 images (--cache-level env)"
        );
    }
}
