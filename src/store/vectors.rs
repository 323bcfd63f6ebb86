//! A batch of embeddings bound as one flat `real[]` parameter, which the driver sends in binary.
//! The text form (`'[0.0123,…]'` per vector) cost more than the rest of a `createMessages` batch:
//! formatting 1536 floats per message here, and parsing them again in PostgreSQL. The SQL takes
//! row `n`'s vector back out of the array with [`nth_vector`]. A single vector is bound the same
//! way, as an `Option<Vec<f32>>` the SQL casts with `$n::real[]::vector` (NULL stays NULL).

use super::{StoreError, StoreResult};

/// Equally long vectors laid end to end; a row without a vector holds zeros, so that row `n` is
/// always at `(n - 1) · dims`.
pub(crate) struct FlatVectors {
    pub values: Vec<f32>,
    pub dims: i32,
}

impl FlatVectors {
    /// The batch, and for each row whether it has a vector.
    pub fn new<'a>(
        vectors: impl IntoIterator<Item = Option<&'a [f32]>>,
    ) -> StoreResult<(FlatVectors, Vec<bool>)> {
        let vectors: Vec<Option<&[f32]>> = vectors.into_iter().collect();
        let dims = vectors
            .iter()
            .flatten()
            .map(|v| v.len())
            .next()
            .unwrap_or(0);
        let mut values = Vec::with_capacity(vectors.len() * dims);
        let mut present = Vec::with_capacity(vectors.len());
        for v in &vectors {
            match v {
                Some(v) if v.len() == dims => values.extend_from_slice(v),
                Some(v) => {
                    return Err(StoreError::Internal(format!(
                        "the embedder returned vectors of {} and {dims} dimensions in one batch",
                        v.len()
                    )));
                }
                None => values.resize(values.len() + dims, 0.0),
            }
            present.push(v.is_some());
        }
        let dims = i32::try_from(dims)
            .map_err(|_| StoreError::Internal(format!("a vector of {dims} dimensions")))?;
        Ok((FlatVectors { values, dims }, present))
    }
}

/// SQL for the vector of row `ord` (from 1) of the flat `real[]` expression `array` holding
/// vectors of `dims` (an `int` expression) dimensions.
pub(crate) fn nth_vector(array: &str, dims: &str, ord: &str) -> String {
    format!("(({array})[(({ord}) - 1)::int * {dims} + 1 : ({ord})::int * {dims}])::vector")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_without_a_vector_keep_their_place_as_zeros() {
        let a = [1.0, 2.0];
        let b = [3.0, 4.0];
        let (flat, present) = FlatVectors::new([Some(&a[..]), None, Some(&b[..])]).unwrap();
        assert_eq!(flat.dims, 2);
        assert_eq!(flat.values, vec![1.0, 2.0, 0.0, 0.0, 3.0, 4.0]);
        assert_eq!(present, vec![true, false, true]);
    }

    #[test]
    fn vectors_of_different_lengths_in_one_batch_are_an_error() {
        let a = [1.0, 2.0];
        let b = [3.0];
        assert!(FlatVectors::new([Some(&a[..]), Some(&b[..])]).is_err());
    }

    #[test]
    fn a_batch_without_vectors_is_empty() {
        let (flat, present) = FlatVectors::new([None, None]).unwrap();
        assert_eq!((flat.dims, flat.values.len()), (0, 0));
        assert_eq!(present, vec![false, false]);
    }
}
