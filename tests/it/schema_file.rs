#[test]
fn committed_schema_graphql_matches_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let current = honcho_graphql::graphql::sdl();
    assert!(
        committed == current,
        "schema.graphql is out of date: run `make schema` (honcho-graphql schema > schema.graphql)"
    );
}
