//! Loom models.
