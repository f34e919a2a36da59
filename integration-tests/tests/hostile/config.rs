//! Hostile inputs: see `super` for the conventions.
