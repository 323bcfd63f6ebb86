//! Facts about the database the server checks before serving (placeholder; filled with the
//! embedder check).
