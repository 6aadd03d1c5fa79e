//! Flow definitions (flows/*.yaml): the stage DAG of a review and its parameters.
