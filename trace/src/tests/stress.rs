//! Multi-threaded stress test.
