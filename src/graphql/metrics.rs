//! What GraphQL adds to the server's metrics ([`crate::metrics`]): the name an operation is counted
//! under.

use async_graphql::parser::types::{DocumentOperations, ExecutableDocument, OperationType};

pub use crate::metrics::{encode, observe, render};

/// The name and type of the operation a parsed document will execute, chosen as async-graphql
/// chooses it: `operation_name`, else the one operation of the document (None for an anonymous
/// one). None when the document names no such operation: execution reports that error.
pub fn operation(
    doc: &ExecutableDocument,
    operation_name: Option<&str>,
) -> Option<(Option<String>, OperationType)> {
    match (&doc.operations, operation_name) {
        (DocumentOperations::Single(op), None) => Some((None, op.node.ty)),
        (DocumentOperations::Multiple(ops), Some(name)) => {
            let op = ops.get(name)?;
            Some((Some(name.to_owned()), op.node.ty))
        }
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => {
            let (name, op) = ops.iter().next()?;
            Some((Some(name.to_string()), op.node.ty))
        }
        _ => None,
    }
}
