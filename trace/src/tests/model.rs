//! Model-based property tests.
